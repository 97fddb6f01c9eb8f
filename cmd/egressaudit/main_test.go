package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/telemetry"
)

// binary is the command built once for the tests.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testprog.MainWithBinary(m, ".", "egressaudit", &binary))
}

type result struct {
	code           int
	stdout, stderr string
}

func runBinary(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running egressaudit: %v", err)
	}
	return result{code, out.String(), errb.String()}
}

// clock hands out times one minute apart from 2026-03-01 10:00 UTC.
func clock() func() time.Time {
	t := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Minute)
		return t
	}
}

// writeLog writes a log of 12 lines: open, 4 attempts, halt, escalation,
// consent, minimisation, deletion received and completed, close. It
// returns the path and the head.
func writeLog(t *testing.T, cfg telemetry.AuditConfig) (string, telemetry.Head) {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "audit.jsonl")
	}
	cfg.Now = clock()
	cfg.SyncEvery = -1 // one clock reading per line
	a, err := telemetry.NewAudit(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, h := range []string{"a.example", "b.example", "a.example", "c.example"} {
		a.Observe(ctx, &telemetry.Event{Host: h, Method: "GET", Attempt: 1, Final: true, Status: 200 + i, Outcome: classify.OK})
	}
	refused := classify.Result{Outcome: classify.Refused, Status: 403, Reason: "challenge marker"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(auditrec.Halt(a, "c.example", refused))
	must(auditrec.Escalation(a, "c.example", refused))
	must(a.Consent(telemetry.Consent{Subject: "a.example", Kind: "host", State: "granted", Licence: "CC-BY-4.0"}))
	must(a.Minimisation(telemetry.Minimisation{Subject: "a.example", Kind: "host", Fields: []string{"email", "phone"}, Reason: "not needed"}))
	must(a.Deletion(telemetry.Deletion{Request: "DSR-9", Stage: "received", Subject: "reviews", Kind: "dataset"}))
	must(a.Deletion(telemetry.Deletion{Request: "DSR-9", Stage: "completed", Subject: "reviews", Kind: "dataset", Records: 4}))
	must(a.Close())
	return cfg.Path, a.Head()
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

func rewrite(t *testing.T, path string, ls []string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "altered.jsonl")
	s := strings.Join(ls, "")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if err := os.WriteFile(out, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVerifyFindsTheLine(t *testing.T) {
	path, head := writeLog(t, telemetry.AuditConfig{})
	orig := lines(t, path)
	if len(orig) != 12 {
		t.Fatalf("the log has %d lines, want 12", len(orig))
	}
	anchor := fmt.Sprintf("%d:%s", head.Seq, head.Hash)

	r := runBinary(t, "verify", path)
	if r.code != exitOK || !strings.Contains(r.stdout, "OK 12 lines") || !strings.Contains(r.stdout, anchor) {
		t.Fatalf("verify intact log: exit %d, stdout %q, stderr %q; want 0, 12 lines, head %s", r.code, r.stdout, r.stderr, anchor)
	}
	r = runBinary(t, "head", path)
	if r.code != exitOK || r.stdout != anchor+"\n" {
		t.Errorf("head: exit %d, stdout %q; want 0 and %q (Audit.Head)", r.code, r.stdout, anchor)
	}

	edit := func(i int, from, to string) []string {
		ls := append([]string(nil), orig...)
		if !strings.Contains(ls[i], from) {
			t.Fatalf("line %d has no %q: %s", i+1, from, ls[i])
		}
		ls[i] = strings.Replace(ls[i], from, to, 1)
		return ls
	}
	without := func(i int) []string {
		return append(append([]string(nil), orig[:i]...), orig[i+1:]...)
	}
	swapped := func(i, j int) []string {
		ls := append([]string(nil), orig...)
		ls[i], ls[j] = ls[j], ls[i]
		return ls
	}
	tests := []struct {
		name   string
		lines  []string
		anchor string
		want   string // in the output: file:line and the reason
	}{
		{"edited status", edit(3, `"status":202`, `"status":200`), "", ":4: hash mismatch"},
		{"edited consent", edit(7, `"state":"granted"`, `"state":"denied"`), "", ":8: hash mismatch"},
		{"deleted line", without(5), "", ":6: prev does not match"},
		{"deleted first line", without(0), "", ":1: does not chain from the start"},
		{"reordered lines", swapped(8, 9), "", ":9: prev does not match"},
		{"cut at the end, with the anchor", orig[:10], anchor, ":11: log ends at seq 10 before the anchored head at seq 12"},
		{"anchor of another log", orig, "12:" + strings.Repeat("ab", 32), ":12: hash differs from the anchored head"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rewrite(t, path, tt.lines)
			args := []string{"verify", p}
			if tt.anchor != "" {
				args = append(args, "-anchor", tt.anchor) // flags after FILE, as documented
			}
			r := runBinary(t, args...)
			if r.code != exitTampered || !strings.Contains(r.stdout, p+tt.want) {
				t.Errorf("verify %s: exit %d, stdout %q, stderr %q; want 1 and %q", tt.name, r.code, r.stdout, r.stderr, p+tt.want)
			}
			if r := runBinary(t, "head", p); tt.anchor == "" && r.code != exitTampered {
				t.Errorf("head of a tampered log: exit %d, want 1 (no anchor for a tampered log)", r.code)
			}
		})
	}
	// Cut at the end without an anchor: a hash chain alone cannot tell.
	if r := runBinary(t, "verify", rewrite(t, path, orig[:10])); r.code != exitOK {
		t.Errorf("verify cut log without anchor: exit %d, want 0 (why the anchor exists)", r.code)
	}
	// A last line cut short.
	p := rewrite(t, path, orig)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-20], 0o600)
	if r := runBinary(t, "verify", p); r.code != exitTampered || !strings.Contains(r.stdout, ":12: truncated last line") {
		t.Errorf("verify log cut mid-line: exit %d, stdout %q; want 1 naming line 12", r.code, r.stdout)
	}
}

func TestVerifyRotatedFiles(t *testing.T) {
	path, head := writeLog(t, telemetry.AuditConfig{MaxBytes: 700})
	fs, err := telemetry.AuditFiles(path)
	if err != nil || len(fs) < 3 {
		t.Fatalf("AuditFiles = %v, %v; want at least 3 files", fs, err)
	}
	anchor := fmt.Sprintf("%d:%s", head.Seq, head.Hash)
	if r := runBinary(t, "verify", "-anchor", anchor, path); r.code != exitOK || !strings.Contains(r.stdout, fmt.Sprintf("in %d files", len(fs))) {
		t.Errorf("verify rotated log: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Edit the first line of the oldest file: the error names that file.
	b, _ := os.ReadFile(fs[0])
	os.WriteFile(fs[0], bytes.Replace(b, []byte(`egresskit-audit/1`), []byte(`egresskit-audit/2`), 1), 0o600)
	if r := runBinary(t, "verify", path); r.code != exitTampered || !strings.Contains(r.stdout, fs[0]+":1: hash mismatch") {
		t.Errorf("verify edited rotated file: exit %d, stdout %q; want 1 naming %s:1", r.code, r.stdout, fs[0])
	}
}

func TestShow(t *testing.T) {
	path, _ := writeLog(t, telemetry.AuditConfig{})
	count := func(s, sub string) int { return strings.Count(s, sub) }
	tests := []struct {
		name  string
		args  []string
		want  []string
		lines int
	}{
		{"everything", nil, []string{"open", "attempt", "consent", "close"}, 12},
		{"by host", []string{"-host", "a.example"}, []string{`host="a.example"`, `subject="a.example"`}, 4},
		{"by kind", []string{"-kind", "halt,escalation"}, []string{`halt`, `escalation`, `reason="challenge marker"`}, 2},
		{"provenance", []string{"-provenance"}, []string{
			`consent      subject="a.example" subject_kind="host" state="granted" licence="CC-BY-4.0"`,
			`minimisation subject="a.example" subject_kind="host" fields=["email","phone"] action="dropped" reason="not needed"`,
			`deletion     request="DSR-9" stage="received" subject="reviews"`,
			`deletion     request="DSR-9" stage="completed" subject="reviews" subject_kind="dataset" records=4`,
		}, 4},
		// Lines are one minute apart from 10:01: seq 3..5 are 10:03-10:05.
		{"time range", []string{"-since", "2026-03-01T10:03:00Z", "-until", "2026-03-01T10:06:00Z"}, []string{"2026-03-01T10:03:00Z      3", "2026-03-01T10:05:00Z      5"}, 3},
		{"date", []string{"-since", "2026-03-02"}, nil, 0},
		{"provenance of one dataset", []string{"-provenance", "-host", "reviews"}, []string{`stage="received"`, `stage="completed"`}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBinary(t, append(append([]string{"show"}, tt.args...), path)...)
			if r.code != exitOK {
				t.Fatalf("show %v: exit %d, stderr %q", tt.args, r.code, r.stderr)
			}
			if n := count(r.stdout, "\n"); n != tt.lines {
				t.Errorf("show %v printed %d lines, want %d:\n%s", tt.args, n, tt.lines, r.stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("show %v lacks %q:\n%s", tt.args, w, r.stdout)
				}
			}
		})
	}
	// -json prints the lines as written: they verify on their own.
	r := runBinary(t, "show", "-json", path)
	if _, err := (telemetry.Verifier{}).Verify(strings.NewReader(r.stdout)); r.code != exitOK || err != nil {
		t.Errorf("show -json: exit %d, Verify(output) = %v; want the log itself", r.code, err)
	}
	// A tampered log is still shown, and reported.
	ls := lines(t, path)
	ls[7] = strings.Replace(ls[7], "granted", "denied!", 1)
	r = runBinary(t, "show", "-provenance", rewrite(t, path, ls))
	if r.code != exitTampered || !strings.Contains(r.stdout, `state="denied!"`) || !strings.Contains(r.stderr, ":8: hash mismatch") {
		t.Errorf("show tampered: exit %d, stdout %q, stderr %q; want 1, the lines, and line 8 named", r.code, r.stdout, r.stderr)
	}
}

func TestUsage(t *testing.T) {
	path, _ := writeLog(t, telemetry.AuditConfig{})
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage"},
		{"unknown command", []string{"check", path}, `unknown command "check"`},
		{"verify without file", []string{"verify"}, "want one FILE"},
		{"verify two files", []string{"verify", path, path}, "want one FILE"},
		{"bad anchor", []string{"verify", "-anchor", "12", path}, "SEQ:HASH"},
		{"anchor with short hash", []string{"verify", "-anchor", "12:abc", path}, "SEQ:HASH"},
		{"unknown flag", []string{"verify", "-strict", path}, "flag provided but not defined"},
		{"bad time", []string{"show", "-since", "yesterday", path}, "-since"},
		{"missing file", []string{"verify", filepath.Join(dir, "absent.jsonl")}, "no such file"},
		{"directory", []string{"head", dir}, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBinary(t, tt.args...)
			want := exitUsage
			if tt.name == "missing file" || tt.name == "directory" {
				want = exitFailure // not a usage error: the file is the problem
			}
			if r.code != want || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("egressaudit %v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, want, tt.want)
			}
		})
	}
}

// TestSubcommandHelp: every subcommand's -h and -help print its usage,
// with its flags, on stdout and exit 0.
func TestSubcommandHelp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"show", "-help"}, []string{"egressaudit show", "-host", "-kind", "-since", "-json"}},
		{[]string{"show", "-h"}, []string{"egressaudit show", "-provenance"}},
		{[]string{"verify", "-h"}, []string{"egressaudit verify", "-anchor"}},
		{[]string{"verify", "-help"}, []string{"egressaudit verify", "-anchor"}},
		{[]string{"head", "-h"}, []string{"egressaudit head FILE"}},
	} {
		r := runBinary(t, tt.args...)
		for _, w := range tt.want {
			if r.code != exitOK || !strings.Contains(r.stdout, w) {
				t.Errorf("egressaudit %v: exit %d, stdout %q; want 0 and %q", tt.args, r.code, r.stdout, w)
			}
		}
	}
}
