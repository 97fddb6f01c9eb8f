package telemetry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/egresskit/egresskit/telemetry"
)

// TestVerifyFilesHead: the Head VerifyFiles returns is the writer's last
// Head, and its Seq less the Start's is the count of the lines checked,
// over rotated files and from a Start; a log that fails the check returns
// no Head.
func TestVerifyFilesHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path, MaxBytes: 4096, SyncEvery: -1})
	for range 120 {
		a.Observe(context.Background(), sampleEvent())
	}
	a.Close()
	files, err := telemetry.AuditFiles(path)
	if err != nil || len(files) < 3 {
		t.Fatalf("AuditFiles() = %v, %v; want several files", files, err)
	}
	total := 0
	for _, f := range files {
		total += len(readLines(t, f))
	}
	h, err := telemetry.Verifier{}.VerifyFiles(files...)
	if err != nil || h != a.Head() || h.Seq != uint64(total) {
		t.Errorf("VerifyFiles(all) = %v, %v; want %v (%d lines), nil", h, err, a.Head(), total)
	}

	first := readLines(t, files[0])
	last := decode(t, first[len(first)-1])
	start := telemetry.Head{Seq: uint64(last["seq"].(float64)), Hash: last["hash"].(string)}
	h, err = telemetry.Verifier{Start: start}.VerifyFiles(files[1:]...)
	if want := total - len(first); err != nil || h != a.Head() || h.Seq-start.Seq != uint64(want) {
		t.Errorf("VerifyFiles(from %v) = %v, %v; want %v (%d lines), nil", start, h, err, a.Head(), want)
	}

	// The last line removed: its Head is gone from what is checked, and an
	// anchor at it fails.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := readLines(t, path)
	cut := len(b) - len(ls[len(ls)-1])
	if err := os.WriteFile(path, b[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	h, err = telemetry.Verifier{}.VerifyFiles(files...)
	if err != nil || h.Seq != a.Head().Seq-1 || h.Seq != uint64(total-1) {
		t.Errorf("VerifyFiles(last line removed) = %v, %v; want seq %d, %d lines", h, err, a.Head().Seq-1, total-1)
	}
	h, err = telemetry.Verifier{Anchor: a.Head()}.VerifyFiles(files...)
	var ve *telemetry.VerifyError
	if !errors.As(err, &ve) || h != (telemetry.Head{}) {
		t.Errorf("VerifyFiles(anchored past the end) = %v, %v; want no Head and a *VerifyError", h, err)
	}
}
