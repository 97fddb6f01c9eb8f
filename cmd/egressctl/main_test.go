package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/redis/go-redis/v9"
)

// binary is egressctl, and auditBinary egressaudit, built once for the
// tests.
var binary, auditBinary string

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	path, remove, err := testprog.BuildBinary(".", "egressctl")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = path
	apath, aremove, err := testprog.BuildBinary("../egressaudit", "egressaudit")
	if err != nil {
		remove()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	auditBinary = apath
	code := redistest.Main(m).Run()
	remove()
	aremove()
	os.Exit(code)
}

// audit runs egressaudit and returns its exit status, stdout and stderr.
func audit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return run1(t, auditBinary, nil, args...)
}

// ctl runs the binary and returns its exit status, stdout and stderr.
func ctl(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return run1(t, binary, env, args...)
}

// run1 runs a binary and returns its exit status, stdout and stderr.
func run1(t *testing.T, binary string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// haltOne halts a refusing site through a chain on Redis under prefix and
// returns its host key.
func haltOne(t *testing.T, addr, prefix string) string {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><body>Access denied: TestBot is blocked.</body></html>")
	}))
	t.Cleanup(site.Close)
	st, err := redisstore.New(redistest.Dial(t, addr), redisstore.Config{Prefix: prefix, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := egresskit.New(egresskit.Config{Store: st, IgnoreRobots: true, UserAgent: "TestBot/1.0"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get(site.URL + "/page?session_token=Sv4lue")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !egresskit.Halted(resp) {
		t.Fatal("the site did not halt")
	}
	key, _ := tr.HostKey(site.URL)
	return key
}

// TestCLI drives the built binary against a real redis-server: list (table
// and JSON), show, resume with a reason into an audit log, and the exit
// codes of bad input.
func TestCLI(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	key := haltOne(t, addr, prefix)
	logPath := filepath.Join(t.TempDir(), "ops.audit")
	g := []string{"-redis", addr, "-prefix", prefix, "-audit", logPath}
	args := func(a ...string) []string { return append(append([]string(nil), g...), a...) }

	code, out, errs := ctl(t, nil, args("halts")...)
	if code != 0 || !strings.Contains(out, key) || !strings.Contains(out, "403") || !strings.Contains(out, "HOST") {
		t.Fatalf("halts: %d\n%s%s", code, out, errs)
	}
	code, out, _ = ctl(t, nil, args("halts", "-json")...)
	var list struct {
		Count int `json:"count"`
		Halts []struct {
			Host     string `json:"host"`
			BodyHead string `json:"body_head"`
			Status   int    `json:"status"`
		} `json:"halts"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.Count != 1 || list.Halts[0].Host != key ||
		list.Halts[0].Status != 403 || !strings.Contains(list.Halts[0].BodyHead, "TestBot is blocked") ||
		strings.Contains(out, "Sv4lue") {
		t.Fatalf("halts -json: %d, %v\n%s", code, err, out)
	}
	code, out, _ = ctl(t, nil, args("show", "http://"+key+"/any/page")...)
	if code != 0 || !strings.Contains(out, "HALTED") || !strings.Contains(out, "TestBot is blocked") {
		t.Errorf("show: %d\n%s", code, out)
	}
	code, out, _ = ctl(t, nil, args("show", "-json", key)...)
	var show struct {
		Status struct{ Halted bool } `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &show); code != 0 || err != nil || !show.Status.Halted {
		t.Errorf("show -json: %d, %v\n%s", code, err, out)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", nil, 2, "Usage"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"resume without a reason", []string{"resume", key, "-by", "ana"}, 2, "-reason"},
		{"resume without a name", []string{"resume", key, "-reason", "ok"}, 2, "-by"},
		{"not a host", []string{"show", "a b/c"}, 2, "not a host"},
		{"unknown host", []string{"show", "never-halted.example"}, 3, "not halted"},
		{"resume of a host not halted", []string{"resume", "never-halted.example", "-reason", "x", "-by", "y"}, 3, "not halted"},
	} {
		a := args(tt.args...)
		if tt.args == nil {
			a = nil
		}
		if code, _, errs := ctl(t, nil, a...); code != tt.code || !strings.Contains(errs, tt.msg) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", tt.name, code, errs, tt.code, tt.msg)
		}
	}
	code, _, errs = ctl(t, nil, "-redis", "127.0.0.1:1", "halts")
	if code != 1 || !strings.Contains(errs, "connection refused") {
		t.Errorf("no Redis: exit %d, %q; want 1 naming the refused connection", code, errs)
	}
	code, _, errs = ctl(t, []string{"EGRESSCTL_REDIS=redis://:Pw0rdInUrl@127.0.0.1:1/0"}, "halts")
	if code != 1 || strings.Contains(errs, "Pw0rdInUrl") {
		t.Errorf("no Redis, password in the URL: exit %d, %q; want 1 without the password", code, errs)
	}

	code, out, errs = ctl(t, nil, args("resume", key, "-reason", "owner allowed us", "-by", "ana")...)
	if code != 0 || !strings.Contains(out, "resumed "+key) {
		t.Fatalf("resume: %d\n%s%s", code, out, errs)
	}
	if code, out, _ := ctl(t, nil, args("halts", "-json")...); code != 0 || !strings.Contains(out, `"count": 0`) {
		t.Errorf("halts after resume: %d\n%s", code, out)
	}
	if code, _, _ := ctl(t, nil, args("resume", key, "-reason", "again", "-by", "ana")...); code != 3 {
		t.Errorf("second resume: exit %d, want 3", code)
	}
	if code, out, _ := ctl(t, nil, args("show", key)...); code != 0 || !strings.Contains(out, "resumed") || !strings.Contains(out, "owner allowed us") {
		t.Errorf("show after resume: %d\n%s", code, out)
	}
	if _, err := (telemetry.Verifier{}).VerifyFiles(logPath); err != nil {
		t.Errorf("audit log: %v", err)
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), `"kind":"resume","host":"`+key+`","by":"ana","reason":"owner allowed us"`) {
		t.Errorf("audit log without the resume:\n%s", b)
	}
}

// TestServe: serve reads its token from the environment; a wrong token
// sees nothing, the right one sees the queue.
func TestServe(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	key := haltOne(t, addr, prefix)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "-redis", addr, "-prefix", prefix, "serve", "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "EGRESSCTL_TOKEN=serve-t0ken-9c1f4e7a2b8d")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	var base string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "serving the console on "); ok {
			base, _, _ = strings.Cut(u, " ")
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if base == "" {
		t.Fatal("serve did not say where it serves")
	}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", base, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, page := get("wrong"); code != http.StatusUnauthorized || strings.Contains(page, key) {
		t.Errorf("wrong token: %d", code)
	}
	if code, page := get("serve-t0ken-9c1f4e7a2b8d"); code != 200 || !strings.Contains(page, key) || strings.Contains(page, "serve-t0ken") {
		t.Errorf("right token: %d\n%s", code, page)
	}
}

// TestTLS: -tls-ca, -tls-cert and -tls-key reach a Redis that speaks only
// TLS and requires a client certificate.
func TestTLS(t *testing.T) {
	files, err := redistest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redistest.NewTLSServer(files)
	if err != nil {
		if os.Getenv("EGRESSKIT_REQUIRE_REDIS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(srv.Close)
	tls := []string{"-redis", srv.Addr, "-tls-ca", files.CA, "-tls-cert", files.ClientCert, "-tls-key", files.ClientKey}
	if code, out, errs := ctl(t, nil, append(tls, "halts")...); code != 0 || !strings.Contains(out, "no host is halted") {
		t.Errorf("over TLS: %d\n%s%s", code, out, errs)
	}
	if code, _, _ := ctl(t, nil, "-redis", srv.Addr, "-tls-ca", files.CA, "halts"); code != 1 {
		t.Errorf("over TLS without a client certificate: exit %d, want 1", code)
	}
}

// TestCluster: -cluster reaches a Redis Cluster, where the halt records
// live in the slot of their host's hash tag.
func TestCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.Config{OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Admit(ctx, "shop.example")
	if err != nil {
		t.Fatal(err)
	}
	st.Record(ctx, "shop.example", a, classify.Result{Outcome: classify.Refused, Status: 403, Reason: "challenge"})
	if err := st.PutHalt(ctx, hoststate.Halt{Host: "shop.example", Status: 403, Reason: "challenge"}); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := ctl(t, nil, "-redis", srv.Addr, "-cluster", "halts"); code != 0 || !strings.Contains(out, "shop.example") {
		t.Errorf("halts on a cluster: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := ctl(t, nil, "-redis", srv.Addr, "-cluster", "resume", "shop.example", "-reason", "ok", "-by", "ana"); code != 0 {
		t.Errorf("resume on a cluster: %d\n%s%s", code, out, errs)
	}
	if s, err := st.Status(ctx, "shop.example"); err != nil || s.Halted {
		t.Errorf("after resume on a cluster: halted %v, %v", s.Halted, err)
	}
}
