package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// preflight is the command built once for the tests.
var preflight string

func TestMain(m *testing.M) {
	os.Exit(testprog.MainWithBinary(m, "../../cmd/preflight", "preflight", &preflight))
}

func urls(base, kind string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s/%s/%d", base, kind, i))
	}
	return out
}

// runPreflight runs the real command and returns its exit status and JSON.
func runPreflight(t *testing.T, args ...string) (int, []byte) {
	t.Helper()
	cmd := exec.Command(preflight, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.Bytes()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.Bytes()
}

func TestDecisionOnRealPreflightRuns(t *testing.T) {
	a, b := testprog.ProbeSite(t), testprog.ProbeSite(t)
	hostB := strings.TrimPrefix(b, "http://")
	base := []string{"-timeout", "10s", "-workers", "20"}
	tests := []struct {
		name    string
		args    []string
		code    int
		want    Decision // Reason is checked for presence only
		workers func(int) bool
	}{
		{"healthy", urls(a, "ok", 3), 0,
			Decision{Action: "crawl", Status: "HEALTHY", MaxConcurrency: 20, InitialDelaySec: 1, SkipHosts: []string{}}, nil},
		{"degraded by a refusing host", append(urls(a, "ok", 8), b+"/challenge/1"), 3,
			Decision{Action: "crawl", Status: "DEGRADED", InitialDelaySec: 2, SkipHosts: []string{hostB}}, func(n int) bool { return n >= 1 && n < 20 }},
		{"degraded by a 429", append(urls(a, "ok", 2), a+"/throttle/1"), 3,
			Decision{Action: "crawl", Status: "DEGRADED", InitialDelaySec: 7, SkipHosts: []string{}}, func(n int) bool { return n >= 1 && n < 20 }},
		{"critical", append(urls(a, "ok", 1), urls(b, "challenge", 2)...), 4,
			Decision{Action: "halt", Status: "CRITICAL", SkipHosts: []string{}}, nil},
		{"usage error", []string{"-timeout", "0s", a + "/ok/1"}, 2,
			Decision{Action: "error", SkipHosts: []string{}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, base...), tt.args...)
			if tt.name == "usage error" {
				args = tt.args
			}
			code, out := runPreflight(t, args...)
			if code != tt.code {
				t.Fatalf("preflight exit %d, want %d\n%s", code, tt.code, out)
			}
			got := decide(code, out)
			if tt.workers != nil {
				if !tt.workers(got.MaxConcurrency) {
					t.Errorf("MaxConcurrency = %d, out of range", got.MaxConcurrency)
				}
				tt.want.MaxConcurrency = got.MaxConcurrency
			}
			if (got.Reason != "") != (tt.want.Action != "crawl") {
				t.Errorf("Reason = %q for action %s", got.Reason, got.Action)
			}
			got.Reason = ""
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
			checkSameDecision(t, code, out, decide(code, out))

			// The program: preflight, decide, exit by action.
			var buf bytes.Buffer
			exit := run(context.Background(), &buf, io.Discard, preflight, args)
			wantExit := map[string]int{"crawl": exitCrawl, "halt": exitHalt, "error": exitError}[tt.want.Action]
			var printed Decision
			if err := json.Unmarshal(buf.Bytes(), &printed); exit != wantExit || err != nil || printed.Action != tt.want.Action {
				t.Errorf("run: exit %d, printed %q; want exit %d and action %s", exit, buf.String(), wantExit, tt.want.Action)
			}
		})
	}
}

// checkSameDecision runs the DAG's Python rules and the CronJob's shell
// rules on the same preflight output and compares them with Go's.
func checkSameDecision(t *testing.T, code int, out []byte, want Decision) {
	t.Helper()
	want.Reason = ""
	py := testprog.Need(t, "python3")
	cmd := exec.Command(py, "preflight_decision.py", strconv.Itoa(code))
	cmd.Stdin = bytes.NewReader(out)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("preflight_decision.py: %v", err)
	}
	compare(t, "preflight_decision.py", b, want)

	testprog.Need(t, "jq")
	sh := testprog.Need(t, "sh")
	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, out, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err = exec.Command(sh, "decide.sh", report, strconv.Itoa(code)).Output()
	wantExit := map[string]int{"crawl": 0, "halt": 3, "error": 1}[want.Action]
	gotExit := 0
	if ee, ok := err.(*exec.ExitError); ok {
		gotExit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if gotExit != wantExit {
		t.Errorf("decide.sh exit %d, want %d", gotExit, wantExit)
	}
	compare(t, "decide.sh", b, want)
}

func compare(t *testing.T, who string, b []byte, want Decision) {
	t.Helper()
	var got Decision
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s printed %q: %v", who, b, err)
	}
	if (got.Reason != "") != (want.Action != "crawl") {
		t.Errorf("%s reason %q for action %s", who, got.Reason, got.Action)
	}
	got.Reason = ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s decided %+v, Go decided %+v", who, got, want)
	}
}

// Inconsistent or missing reports are errors for all three.
func TestDecisionRejectsBadReports(t *testing.T) {
	tests := []struct {
		name string
		code int
		out  string
	}{
		{"no output", 0, ""},
		{"not JSON", 1, "hello"},
		{"status and exit disagree", 0, `{"diagnosis":{"status":"CRITICAL","recommendation":{"halt":true}}}`},
		{"critical without halt", 4, `{"diagnosis":{"status":"CRITICAL","recommendation":{"halt":false}}}`},
		{"healthy with halt", 0, `{"diagnosis":{"status":"HEALTHY","recommendation":{"halt":true,"max_concurrency":4}}}`},
		{"no concurrency", 0, `{"diagnosis":{"status":"HEALTHY","recommended_backoff":{"initial_delay_sec":1},"recommendation":{"halt":false}}}`},
		{"interrupted", 130, `{}`},
		{"preflight failed", 1, `{}`},
		{"old DEGRADED status", 1, `{"diagnosis":{"status":"DEGRADED","recommended_backoff":{"initial_delay_sec":1},"recommendation":{"halt":false,"max_concurrency":4}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(tt.code, []byte(tt.out))
			if d.Action != "error" || d.Reason == "" {
				t.Errorf("decide = %+v, want an error with a reason", d)
			}
			checkSameDecision(t, tt.code, []byte(tt.out), d)
		})
	}
}

// The DAG file compiles (Airflow itself is not needed to check that).
func TestDAGCompiles(t *testing.T) {
	py := testprog.Need(t, "python3")
	out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open('airflow_dag.py').read(), 'airflow_dag.py')").CombinedOutput()
	if err != nil {
		t.Errorf("airflow_dag.py does not parse: %v\n%s", err, out)
	}
}

// TestLocalSite: with no target, the command probes a local site it
// starts, as its documentation says: -site ok crawls (exit 0), -site
// blocked halts naming preflight's reason (exit 3), an unknown site is a
// usage error (exit 2).
func TestLocalSite(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		exit   int
		action string
		reason string
	}{
		{[]string{"-preflight", preflight}, exitCrawl, "crawl", ""},
		{[]string{"-preflight", preflight, "-site", "blocked"}, exitHalt, "halt", "preflight is CRITICAL: "},
		{[]string{"-preflight", preflight, "-site", "nope"}, exitUsage, "", ""},
		{[]string{"-preflight", preflight, "-no-such-flag"}, exitUsage, "", ""},
		{[]string{"-preflight", "/nonexistent/preflight"}, exitError, "", ""},
	} {
		t.Run(strings.Join(tt.args[2:], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			exit := command(context.Background(), tt.args, &out, &errb)
			if exit != tt.exit {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", exit, tt.exit, out.String(), errb.String())
			}
			if tt.action == "" {
				return
			}
			var d Decision
			if err := json.Unmarshal(out.Bytes(), &d); err != nil || d.Action != tt.action || !strings.HasPrefix(d.Reason, tt.reason) {
				t.Errorf("printed %q, want action %s, reason starting %q", out.String(), tt.action, tt.reason)
			}
			if tt.action == "halt" && len(d.Reason) <= len(tt.reason) {
				t.Errorf("halt reason %q names no reason of preflight's", d.Reason)
			}
		})
	}
}
