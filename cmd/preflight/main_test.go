package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
	"go.uber.org/goleak"
)

// binary is the preflight command built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	code := testprog.MainWithBinary(m, ".", "preflight", &binary)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// deadProxy returns a proxy URL with credentials on a port nothing
// listens on.
func deadProxy(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://scraper:pa55-w0rd-secret@" + addr
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

func runBinary(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running preflight: %v", err)
	}
	return result{code, out.String(), errb.String()}
}

// checkStableJSON checks that doc is exactly one JSON document with every
// field of the stable report, with its documented types.
func checkStableJSON(t *testing.T, doc string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, doc)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", doc)
	}
	if rest := strings.TrimSpace(doc[dec.InputOffset():]); rest != "" {
		t.Fatalf("stdout has text after the JSON document: %q", rest)
	}
	num := func(v any) bool { _, ok := v.(float64); return ok }
	integer := func(v any) bool { f, ok := v.(float64); return ok && f == math.Trunc(f) }
	str := func(v any) bool { _, ok := v.(string); return ok }
	boolean := func(v any) bool { _, ok := v.(bool); return ok }
	nullOr := func(f func(any) bool) func(any) bool { return func(v any) bool { return v == nil || f(v) } }
	check := func(where string, obj map[string]any, fields map[string]func(any) bool) {
		for name, ok := range fields {
			if v, present := obj[name]; !present || !ok(v) {
				t.Errorf("%s.%s = %#v (present %v): wrong or missing", where, name, v, present)
			}
		}
	}
	check("report", m, map[string]func(any) bool{
		"schema_version": integer, "timestamp": num, "total_probed": integer,
		"results":   func(v any) bool { _, ok := v.([]any); return ok },
		"diagnosis": func(v any) bool { _, ok := v.(map[string]any); return ok },
	})
	results, _ := m["results"].([]any)
	for _, r := range results {
		check("result", r.(map[string]any), map[string]func(any) bool{
			"url": str, "proxy": nullOr(str), "status_code": nullOr(integer),
			"latency_ms": num, "success": boolean, "error_message": nullOr(str),
		})
	}
	d, _ := m["diagnosis"].(map[string]any)
	check("diagnosis", d, map[string]func(any) bool{
		"status": str, "success_rate": num, "average_latency_ms": num,
		"rate_limited_count": integer, "blocked_count": integer,
		"recommended_backoff": func(v any) bool {
			b, ok := v.(map[string]any)
			return ok && num(b["initial_delay_sec"]) && num(b["max_delay_sec"]) && integer(b["max_retries"])
		},
	})
	return m
}

func TestEndToEndJSON(t *testing.T) {
	site := testprog.ProbeSite(t)
	dead := deadProxy(t)
	// The 429 comes from a host of its own, which only rate-limits: it is
	// not a blocking host.
	other := testprog.ProbeSite(t)
	r := runBinary(t, "", "-timeout", "5s",
		site+"/ok/1", other+"/throttle/2", site+"/ok/3")
	m := checkStableJSON(t, r.stdout)
	// One 429 among three: DEGRADED (slow down, pace the host), not a halt.
	if r.code != exitDegraded {
		t.Errorf("exit status = %d, want %d (one 429 among 3 degrades)", r.code, exitDegraded)
	}
	if d := m["diagnosis"].(map[string]any); d["status"] != "DEGRADED" ||
		d["recommendation"].(map[string]any)["halt"] != false || len(d["blocking_hosts"].([]any)) != 0 || d["blocked_count"] != 0.0 {
		t.Errorf("diagnosis = %v, want DEGRADED, no halt, no blocking host, blocked_count 0", d)
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q, want nothing when it is not a terminal", r.stderr)
	}
	if n := m["total_probed"]; n != 3.0 {
		t.Errorf("total_probed = %v, want 3", n)
	}
	d := m["diagnosis"].(map[string]any)
	if d["rate_limited_count"] != 1.0 || d["recommended_backoff"].(map[string]any)["initial_delay_sec"] != 7.0 {
		t.Errorf("diagnosis = %v, want 1 rate-limited and initial_delay_sec 7", d)
	}

	// A dead proxy with credentials: a diagnosis, and no credential anywhere.
	r = runBinary(t, "", "-timeout", "5s", "-proxy", dead, site+"/ok/1")
	checkStableJSON(t, r.stdout)
	if r.code != exitCritical {
		t.Errorf("dead proxy: exit status = %d, want %d", r.code, exitCritical)
	}
	for _, s := range []string{r.stdout, r.stderr} {
		if strings.Contains(s, "pa55-w0rd-secret") || strings.Contains(s, "scraper") {
			t.Errorf("output leaks the proxy credentials: %s", s)
		}
	}
}

func TestEndToEndExitCodes(t *testing.T) {
	site := testprog.ProbeSite(t)
	eight := []string{}
	for i := range 8 {
		eight = append(eight, fmt.Sprintf("%s/ok/%d", site, i))
	}
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"healthy", []string{site + "/ok/1", site + "/ok/2"}, exitHealthy},
		{"degraded", append(append([]string{}, eight...), site+"/missing/1"), exitDegraded},
		{"critical", []string{site + "/ok/1", site + "/challenge/1", site + "/missing/2"}, exitCritical},
		{"critical with -exit-zero", []string{"-exit-zero", site + "/throttle/1"}, exitHealthy},
		{"bad flag", []string{"-no-such-flag", site + "/ok/1"}, exitUsage},
		{"zero timeout", []string{"-timeout", "0s", site + "/ok/1"}, exitUsage},
		{"negative per-request timeout", []string{"-per-request-timeout", "-1s", site + "/ok/1"}, exitUsage},
		{"no targets", []string{"-timeout", "1s"}, exitUsage},
		{"ftp target", []string{"ftp://example.com/"}, exitUsage},
		{"no host", []string{"http://"}, exitUsage},
		{"proxy with a bad port", []string{"-proxy", "http://u:p@127.0.0.1:70000", site + "/ok/1"}, exitUsage},
		{"usage error with -exit-zero", []string{"-exit-zero", "-method", "POST", site + "/ok/1"}, exitUsage},
		{"zero per-host", []string{"-per-host", "0", site + "/ok/1"}, exitUsage},
		{"per-host below -1", []string{"-per-host", "-2", site + "/ok/1"}, exitUsage},
		{"no per-host cap", []string{"-per-host", "-1", site + "/ok/1"}, exitHealthy},
		{"zero workers", []string{"-workers", "0", site + "/ok/1"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBinary(t, "", tt.args...)
			if r.code != tt.want {
				t.Fatalf("preflight %v: exit status %d, want %d\nstderr: %s", tt.args, r.code, tt.want, r.stderr)
			}
			if tt.want == exitUsage {
				if r.stdout != "" {
					t.Errorf("usage error wrote to stdout: %q", r.stdout)
				}
				if r.stderr == "" {
					t.Error("usage error wrote nothing to stderr")
				}
				return
			}
			checkStableJSON(t, r.stdout)
		})
	}
}

func TestEndToEndTargetFile(t *testing.T) {
	site := testprog.ProbeSite(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.txt", "# fleet\n"+site+"/ok/1\n\n"+site+"/ok/2 direct\n")
	r := runBinary(t, "", "-targets", good)
	if m := checkStableJSON(t, r.stdout); r.code != exitHealthy || m["total_probed"] != 2.0 {
		t.Errorf("good file: exit %d, total_probed %v, want 0, 2", r.code, m["total_probed"])
	}
	// Standard input, by -targets - and by the argument -.
	for _, args := range [][]string{{"-targets", "-"}, {"-"}} {
		r = runBinary(t, site+"/ok/1\n"+site+"/ok/2\n", args...)
		if m := checkStableJSON(t, r.stdout); r.code != exitHealthy || m["total_probed"] != 2.0 {
			t.Errorf("stdin %v: exit %d, total_probed %v, want 0, 2", args, r.code, m["total_probed"])
		}
	}
	bad := []struct {
		name, content, want string
	}{
		{"scheme.txt", site + "/ok/1\n# comment\nexample.com/x\n", "line 3"},
		{"ftp.txt", "\nftp://example.com/\n", "line 2"},
		{"long.txt", site + "/ok/1\n" + site + "/" + strings.Repeat("a", 100<<10) + "\n", "line 2"},
		{"fields.txt", site + "/ok/1 direct extra\n", "line 1"},
		{"proxy.txt", site + "/ok/1 http://u:hunter2-pw@127.0.0.1:0\n", "line 1"},
		{"empty.txt", "# nothing\n", "no targets"},
	}
	for _, b := range bad {
		r := runBinary(t, "", "-targets", write(b.name, b.content))
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, b.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 (usage), nothing, an error naming %q", b.name, r.code, r.stdout, r.stderr, b.want)
		}
		if strings.Contains(r.stderr, "hunter2-pw") {
			t.Errorf("%s: stderr leaks a credential: %q", b.name, r.stderr)
		}
	}
	r = runBinary(t, "", "-targets", filepath.Join(dir, "absent.txt"))
	if r.code != exitUsage {
		t.Errorf("missing file: exit %d, want 2 (usage)", r.code)
	}
	proxies := write("proxies.txt", "p1 direct\np2 http://u:hunter2-pw@127.0.0.1:99999\n")
	r = runBinary(t, "", "-proxies", proxies, site+"/ok/1")
	if r.code != exitUsage || !strings.Contains(r.stderr, "line 2") || strings.Contains(r.stderr, "hunter2-pw") {
		t.Errorf("bad proxies file: exit %d, stderr %q; want 2 naming line 2 without the password", r.code, r.stderr)
	}
}

func TestRunInProcess(t *testing.T) {
	site := testprog.ProbeSite(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-format", "text", "-matrix", "-proxy", "direct", site + "/ok/1"},
		strings.NewReader(""), &out, &errb, false)
	if code != exitHealthy {
		t.Fatalf("run -format text: exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"URL", "EGRESS", site + "/ok/1", "HEALTHY", "backoff"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"-help"}, strings.NewReader(""), &out, &errb, false)
	if code != exitHealthy || !strings.Contains(out.String(), "Example:") || !strings.Contains(out.String(), "Exit status") {
		t.Errorf("-help: exit %d, output %q; want 0 and the usage with an example", code, out.String())
	}
	// With a terminal on stderr: progress and a summary there, JSON alone on stdout.
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{site + "/ok/1", site + "/throttle/1"}, strings.NewReader(""), &out, &errb, true)
	checkStableJSON(t, out.String())
	if code != exitDegraded || !strings.Contains(errb.String(), "probed 2/2") || !strings.Contains(errb.String(), "DEGRADED") {
		t.Errorf("tty run: exit %d, stderr %q; want 3 (DEGRADED), progress and summary", code, errb.String())
	}
}

// TestExitStatusConvention: preflight's exit statuses are the module's
// convention (0 ok, 1 failure, 2 usage, 3 and up the verdicts), checked by
// number, in process.
func TestExitStatusConvention(t *testing.T) {
	site := testprog.ProbeSite(t)
	for _, tt := range []struct {
		name   string
		args   []string
		stdout io.Writer // nil: a buffer
		want   int
	}{
		{"HEALTHY", []string{site + "/ok/1"}, nil, 0},
		{"failure: the report cannot be written", []string{site + "/ok/1"}, failingWriter{}, 1},
		{"usage: an unknown flag", []string{"-no-such-flag", site + "/ok/1"}, nil, 2},
		{"usage: no targets", nil, nil, 2},
		{"DEGRADED", []string{site + "/ok/1", site + "/throttle/1"}, nil, 3},
		{"CRITICAL", []string{site + "/ok/1", site + "/challenge/1", site + "/missing/2"}, nil, 4},
		{"CRITICAL with -exit-zero", []string{"-exit-zero", site + "/ok/1", site + "/challenge/1", site + "/missing/2"}, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			stdout := tt.stdout
			if stdout == nil {
				stdout = &out
			}
			if code := run(context.Background(), tt.args, strings.NewReader(""), stdout, &errb, false); code != tt.want {
				t.Errorf("preflight %v: exit %d, want %d; stderr %q", tt.args, code, tt.want, errb.String())
			}
		})
	}
}

// failingWriter fails every write, as a closed standard output does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("write: broken pipe") }
