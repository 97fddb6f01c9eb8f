package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/telemetry"
)

// fixedClock returns a Now func advancing one millisecond per call.
func fixedClock() func() time.Time {
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Millisecond)
		return t
	}
}

func newAudit(t *testing.T, cfg telemetry.AuditConfig) *telemetry.Audit {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = fixedClock()
	}
	a, err := telemetry.NewAudit(cfg)
	if err != nil {
		t.Fatalf("NewAudit(%+v): %v", cfg, err)
	}
	return a
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func decode(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return m
}

func wantVerifyError(t *testing.T, what string, err error, line int) {
	t.Helper()
	var ve *telemetry.VerifyError
	if !errors.As(err, &ve) {
		t.Errorf("%s: Verify() = %v, want *VerifyError at line %d", what, err, line)
		return
	}
	if ve.Line != line || ve.Truncated {
		t.Errorf("%s: Verify() = %v (line %d, truncated %v), want line %d", what, err, ve.Line, ve.Truncated, line)
	}
}

// spliced returns a reader over the given pieces without copying them.
func spliced(pieces ...[]byte) io.Reader {
	rs := make([]io.Reader, len(pieces))
	for i, p := range pieces {
		rs[i] = bytes.NewReader(p)
	}
	return io.MultiReader(rs...)
}

func TestAuditTamperDetection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path, SyncEvery: -1})
	ev := sampleEvent()
	const events = 100_000
	for i := range events {
		ev.Attempt = i%5 + 1
		a.Observe(context.Background(), ev)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	head := a.Head()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// off[k-1] is the offset of line k; off[n] the end.
	off := []int{0}
	for i, c := range data {
		if c == '\n' {
			off = append(off, i+1)
		}
	}
	n := len(off) - 1
	line := func(k int) []byte { return data[off[k-1]:off[k]] }
	if n != events+2 { // open + events + close
		t.Fatalf("log has %d lines, want %d", n, events+2)
	}
	if head.Seq != uint64(n) {
		t.Errorf("Head().Seq = %d, want %d", head.Seq, n)
	}
	if err := verify(bytes.NewReader(data)); err != nil {
		t.Fatalf("Verify(untouched) = %v", err)
	}
	if _, err := (telemetry.Verifier{Anchor: head}).Verify(bytes.NewReader(data)); err != nil {
		t.Fatalf("Verify(untouched, anchored) = %v", err)
	}

	// Positions are 1-based line numbers.
	for _, k := range []int{1, 2, 777, n / 2, n - 1, n} {
		// Delete line k: the line now at k no longer chains.
		del := spliced(data[:off[k-1]], data[off[k]:])
		if k == n {
			// The chain alone cannot see a missing last line; an anchor can.
			if err := verify(del); err != nil {
				t.Errorf("delete last: Verify() = %v, want nil without an anchor", err)
			}
			_, err := telemetry.Verifier{Anchor: head}.Verify(spliced(data[:off[k-1]]))
			wantVerifyError(t, "delete last, anchored", err, k)
		} else {
			wantVerifyError(t, "delete line "+strconv.Itoa(k), verify(del), k)
		}

		// Swap lines i and i+1, where i is k, or k-1 for the last line.
		i := min(k, n-1)
		sw := spliced(data[:off[i-1]], line(i+1), line(i), data[off[i+1]:])
		wantVerifyError(t, "swap at line "+strconv.Itoa(i), verify(sw), i)

		// Edit line k: change its time, or corrupt its JSON.
		edited := bytes.Replace(line(k), []byte(`"time":"2026`), []byte(`"time":"2025`), 1)
		ed := spliced(data[:off[k-1]], edited, data[off[k]:])
		wantVerifyError(t, "edit line "+strconv.Itoa(k), verify(ed), k)
		corrupt := bytes.Replace(line(k), []byte(`"}`), []byte(`"`), 1)
		ed = spliced(data[:off[k-1]], corrupt, data[off[k]:])
		wantVerifyError(t, "corrupt line "+strconv.Itoa(k), verify(ed), k)
	}

	// An inserted copy of an earlier line.
	ins := spliced(data[:off[10]], line(5), data[off[10]:])
	wantVerifyError(t, "insert", verify(ins), 11)
}

func TestAuditRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path, SyncEachLine: true})
	res := classify.Result{Outcome: classify.Refused, Status: 403, Markers: []string{"cf-challenge"}, Reason: "challenge marker"}
	steps := []func() error{
		func() error { a.Observe(context.Background(), sampleEvent()); return nil },
		func() error { return auditrec.Halt(a, "example.com", res) },
		func() error { return auditrec.Escalation(a, "example.com", res) },
		func() error { return auditrec.Resume(a, "example.com", "oncall@example.org") },
		func() error { return auditrec.ForcedEgress(a, "example.com", "proxy-2", "geo") },
		func() error { return auditrec.Robots(a, "example.com", "/private?token=abc", false) },
		func() error {
			return a.Record("custom", slog.Int("n", 3), slog.Duration("d", time.Second), slog.Group("g", slog.Bool("b", true)))
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := a.Record("x", slog.String("seq", "1")); !errors.Is(err, telemetry.ErrReservedKey) {
		t.Errorf("Record(seq) = %v, want ErrReservedKey", err)
	}
	if err := a.Record(""); !errors.Is(err, telemetry.ErrReservedKey) {
		t.Errorf("Record(empty kind) = %v, want ErrReservedKey", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if err := auditrec.Resume(a, "h", "x"); !errors.Is(err, telemetry.ErrAuditClosed) {
		t.Errorf("Resume after Close = %v, want ErrAuditClosed", err)
	}
	lines := readLines(t, path)
	want := []map[string]any{
		{"seq": 1.0, "kind": "open", "format": "egresskit-audit/1", "prev": telemetry.Genesis},
		{"seq": 2.0, "kind": "attempt", "host": "example.com", "method": "GET", "attempt": 2.0, "final": true,
			"status": 503.0, "outcome": "transient", "egress": "proxy-1", "egress_reason": "affinity", "breaker": "closed",
			"url": nil, "error": nil},
		{"kind": "halt", "host": "example.com", "outcome": "refused", "status": 403.0, "reason": "challenge marker"},
		{"kind": "escalation", "host": "example.com", "outcome": "refused"},
		{"kind": "resume", "host": "example.com", "by": "oncall@example.org"},
		{"kind": "forced_egress", "host": "example.com", "egress": "proxy-2", "reason": "geo"},
		{"kind": "robots", "host": "example.com", "path": "/private?token=REDACTED", "allowed": false},
		{"kind": "custom", "n": 3.0, "d": "1s"},
		{"seq": 9.0, "kind": "close", "time": "2026-03-01T12:00:00.009Z"},
	}
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		got := decode(t, lines[i])
		for k, v := range w {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i+1, k, got[k], v)
			}
		}
	}
	if err := verifyFiles(path); err != nil {
		t.Errorf("VerifyFiles = %v", err)
	}
}

func TestAuditTruncatedLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path})
	for range 10 {
		a.Observe(context.Background(), sampleEvent())
	}
	a.Close()
	full, _ := os.ReadFile(path)
	lines := readLines(t, path)
	// A crash in the middle of writing line 13.
	partial := lines[5][:40]
	if err := os.WriteFile(path, append(full, partial...), 0o600); err != nil {
		t.Fatal(err)
	}
	err := verifyFiles(path)
	var ve *telemetry.VerifyError
	if !errors.As(err, &ve) || !ve.Truncated || ve.Line != 13 || ve.File != path {
		t.Fatalf("VerifyFiles(truncated) = %v, want a truncation at %s line 13", err, path)
	}

	// Reopening repairs the log and continues the chain.
	a = newAudit(t, telemetry.AuditConfig{Path: path})
	if err := auditrec.Resume(a, "example.com", "op"); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := verifyFiles(path); err != nil {
		t.Fatalf("VerifyFiles(after reopen) = %v", err)
	}
	lines = readLines(t, path)
	rec := decode(t, lines[12])
	if rec["kind"] != "recovered" || rec["discarded_bytes"] != 40.0 {
		t.Errorf("line 13 = %v, want a recovered line with discarded_bytes 40", rec)
	}
	if k := decode(t, lines[13])["kind"]; k != "open" {
		t.Errorf("line 14 kind = %v, want open", k)
	}
}

func TestAuditOnlyPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"seq":1,"ti`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAudit(t, telemetry.AuditConfig{Path: path})
	a.Close()
	if err := verifyFiles(path); err != nil {
		t.Errorf("VerifyFiles = %v", err)
	}
}

func TestAuditRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	cfg := telemetry.AuditConfig{Path: path, MaxBytes: 4096, SyncEvery: -1}
	a := newAudit(t, cfg)
	for range 200 {
		a.Observe(context.Background(), sampleEvent())
	}
	a.Close()
	// Reopen: the chain continues from the current file.
	a = newAudit(t, cfg)
	for range 50 {
		a.Observe(context.Background(), sampleEvent())
	}
	a.Close()
	files, err := telemetry.AuditFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 || files[len(files)-1] != path {
		t.Fatalf("AuditFiles() = %v, want several rotated files then %s", files, path)
	}
	for _, f := range files {
		st, _ := os.Stat(f)
		if st.Size() > cfg.MaxBytes {
			t.Errorf("%s has %d bytes, more than MaxBytes %d", f, st.Size(), cfg.MaxBytes)
		}
	}
	if err := verifyFiles(files...); err != nil {
		t.Fatalf("VerifyFiles(rotated) = %v", err)
	}
	// The concatenation is one log.
	var all bytes.Buffer
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all.Write(b)
	}
	if err := verify(&all); err != nil {
		t.Errorf("Verify(concatenated) = %v", err)
	}
	// Incremental verification from a known head.
	first := readLines(t, files[0])
	last := decode(t, first[len(first)-1])
	start := telemetry.Head{Seq: uint64(last["seq"].(float64)), Hash: last["hash"].(string)}
	if _, err := (telemetry.Verifier{Start: start}).VerifyFiles(files[1:]...); err != nil {
		t.Errorf("VerifyFiles from %v = %v", start, err)
	}
	// A missing file breaks the chain at the first line of the next one.
	err = verifyFiles(append(append([]string{}, files[:1]...), files[2:]...)...)
	var ve *telemetry.VerifyError
	if !errors.As(err, &ve) || ve.File != files[2] || ve.Line != 1 {
		t.Errorf("VerifyFiles(without %s) = %v, want error at %s line 1", files[1], err, files[2])
	}
}

func TestAuditCrashDuringRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path})
	a.Observe(context.Background(), sampleEvent())
	a.Close()
	// The file was moved aside but no new one was created.
	if err := os.Rename(path, path+".00000000000000000003"); err != nil {
		t.Fatal(err)
	}
	a = newAudit(t, telemetry.AuditConfig{Path: path})
	a.Close()
	files, _ := telemetry.AuditFiles(path)
	if len(files) != 2 {
		t.Fatalf("AuditFiles() = %v, want 2 files", files)
	}
	if err := verifyFiles(files...); err != nil {
		t.Errorf("VerifyFiles = %v", err)
	}
}

func TestAuditFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.jsonl")
	if err := os.WriteFile(junk, []byte("hello world\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{
		"empty path":       "",
		"missing dir":      filepath.Join(dir, "no", "such", "dir", "audit.jsonl"),
		"directory":        dir,
		"not an audit log": junk,
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		paths["unwritable device"] = "/dev/full"
	}
	for name, p := range paths {
		a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: p})
		if err == nil {
			a.Close()
			t.Errorf("%s: NewAudit(%q) = nil error, want failure", name, p)
		}
	}
	_, err := telemetry.NewAudit(telemetry.AuditConfig{Path: junk})
	var ve *telemetry.VerifyError
	if !errors.As(err, &ve) {
		t.Errorf("NewAudit(junk) = %v, want a *VerifyError inside", err)
	}
}

func TestVerifyEmptyAndGarbage(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
	}{
		{"empty", "", 1},
		{"garbage", "not json\n", 1},
		{"no hash", `{"seq":1,"prev":"` + telemetry.Genesis + `"}` + "\n", 1},
	}
	for _, tt := range tests {
		err := verify(strings.NewReader(tt.in))
		wantVerifyError(t, tt.name, err, tt.line)
	}
}

func TestAuditLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path})
	big := strings.Repeat("x", 200<<10)
	if err := a.Record("note", slog.String("big", big)); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// Reopening reads the long last-but-one line back.
	a = newAudit(t, telemetry.AuditConfig{Path: path})
	if err := a.Record("note", slog.String("big", big)); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := verifyFiles(path); err != nil {
		t.Errorf("VerifyFiles = %v", err)
	}
}

func TestAuditConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path, Now: time.Now})
	done := make(chan struct{})
	for w := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				if i%2 == 0 {
					a.Observe(context.Background(), sampleEvent())
				} else if err := auditrec.Robots(a, "example.com", "/"+strconv.Itoa(w), true); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if err := a.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
	a.Close()
	if err := verifyFiles(path); err != nil {
		t.Errorf("VerifyFiles = %v", err)
	}
	if got := len(readLines(t, path)); got != 8*200+2 {
		t.Errorf("lines = %d, want %d", got, 8*200+2)
	}
}
