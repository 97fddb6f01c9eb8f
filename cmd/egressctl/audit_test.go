package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// serveConsole starts `egressctl serve` with args (global flags first)
// and env, and returns the URL it serves on. It stops at the test's end.
func serveConsole(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var base string
	var said strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		said.WriteString(sc.Text() + "\n")
		if _, u, ok := strings.Cut(sc.Text(), "serving the console on "); ok {
			base, _, _ = strings.Cut(u, " ")
			break
		}
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, stderr); close(done) }()
	t.Cleanup(func() { cancel(); cmd.Wait(); <-done })
	if base == "" {
		t.Fatalf("serve did not say where it serves:\n%s", said.String())
	}
	return base
}

// haltHosts halts n hosts named host-I.example straight in the store.
func haltHosts(t *testing.T, st *redisstore.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	hosts := make([]string, n)
	for i := range hosts {
		h := fmt.Sprintf("host-%d.example", i)
		a, err := st.Admit(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		st.Record(ctx, h, a, classify.Result{Outcome: classify.Refused, Status: 403, Reason: "challenge"})
		if err := st.PutHalt(ctx, hoststate.Halt{Host: h, Status: 403, Reason: "challenge"}); err != nil {
			t.Fatal(err)
		}
		hosts[i] = h
	}
	return hosts
}

// consoleClient signs a client in to the console at base with token and
// returns a function that posts a form action (resume or keep).
func consoleClient(t *testing.T, base, token string) func(action, host string) error {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf := func() string {
		u, _ := url.Parse(base)
		for _, ck := range jar.Cookies(u) {
			if ck.Name == "egresskit_csrf" {
				return ck.Value
			}
		}
		return ""
	}
	resp, err := c.Get(base + "login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.PostForm(base+"login", url.Values{"csrf": {csrf()}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	return func(action, host string) error {
		resp, err := c.PostForm(base+action, url.Values{"csrf": {csrf()}, "h": {host}, "by": {"ana"}, "reason": {action + " " + host}})
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			return fmt.Errorf("%s %s: %d %s", action, host, resp.StatusCode, b)
		}
		return nil
	}
}

// TestOneAuditChainManyWriters: two consoles and two runs of egressctl
// resume, four processes at once, write 100 interleaved actions to one
// audit log, which verifies.
func TestOneAuditChainManyWriters(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	st, err := redisstore.New(redistest.Dial(t, addr), redisstore.Config{Prefix: prefix, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hosts := haltHosts(t, st, 80)
	logPath := filepath.Join(t.TempDir(), "ops.audit")
	g := []string{"-redis", addr, "-prefix", prefix, "-audit", logPath}
	const token = "many-writers-token-0123456789"
	env := []string{"EGRESSCTL_TOKEN=" + token}
	consoles := []func(string, string) error{
		consoleClient(t, serveConsole(t, env, append(g, "serve", "-addr", "127.0.0.1:0")...), token),
		consoleClient(t, serveConsole(t, env, append(g, "serve", "-addr", "127.0.0.1:0")...), token),
	}
	// Hosts 0-39: the consoles resume 20 each and keep 10 of them halted
	// first (60 actions); hosts 40-79: two CLI writers resume 20 each (40
	// actions, 40 processes).
	var wg sync.WaitGroup
	for w, act := range consoles {
		wg.Go(func() {
			for i := w * 20; i < w*20+20; i++ {
				if i%2 == 0 {
					if err := act("keep", hosts[i]); err != nil {
						t.Error(err)
					}
				}
				if err := act("resume", hosts[i]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			for i := 40 + w*20; i < 40+w*20+20; i++ {
				code, out, errs := ctl(t, nil, append(g, "resume", hosts[i], "-reason", "cli", "-by", "bo")...)
				if code != 0 {
					t.Errorf("resume %s: %d %s%s", hosts[i], code, out, errs)
				}
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"kind":"resume"`) + strings.Count(string(b), `"kind":"keep_halted"`); n != 100 {
		t.Errorf("%d actions in the log, want 100", n)
	}
	code, out, errs := audit(t, "verify", logPath)
	if code != 0 {
		t.Errorf("egressaudit verify: exit %d\n%s%s", code, out, errs)
	}
}

// TestShowTrail: show prints the host's audit trail, one line a record,
// and says when the log does not verify.
func TestShowTrail(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	key := haltOne(t, addr, prefix)
	logPath := filepath.Join(t.TempDir(), "ops.audit")
	g := []string{"-redis", addr, "-prefix", prefix, "-audit", logPath}
	if code, out, errs := ctl(t, nil, append(g, "resume", key, "-by", "ana", "-reason", "owner agreed")...); code != 0 {
		t.Fatalf("resume: %d %s%s", code, out, errs)
	}
	code, out, errs := ctl(t, nil, append(g, "show", key)...)
	if code != 0 || !strings.Contains(out, `reason="owner agreed"`) || !strings.Contains(out, "audit trail: verified") || errs != "" {
		t.Errorf("show: %d\n%s%s", code, out, errs)
	}
	b, _ := os.ReadFile(logPath)
	os.WriteFile(logPath, []byte(strings.Replace(string(b), "owner agreed", "owner AGREED", 1)), 0o600)
	code, out, errs = ctl(t, nil, append(g, "show", key)...)
	if code != 0 || !strings.Contains(out, "DOES NOT VERIFY") || !strings.Contains(errs, "does not verify") {
		t.Errorf("show of a tampered log: %d\n%s%s", code, out, errs)
	}
	code, out, _ = ctl(t, nil, append(g, "show", "-json", key)...)
	if code != 0 || !strings.Contains(out, `"verified": false`) {
		t.Errorf("show -json of a tampered log: %d\n%s", code, out)
	}
}
