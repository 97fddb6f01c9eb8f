package audittrail

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/telemetry"
)

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.audit")
	a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	a.Record("resume", slog.String("host", "a.example"), slog.String("by", "ana"), slog.String("reason", "ok\nby=root \x1b[2J\u202e"))
	a.Record("resume", slog.String("host", "b.example"), slog.String("by", "bo"), slog.String("reason", "other"))
	for i := range 5 {
		a.Record("keep_halted", slog.String("host", "a.example"), slog.Int("i", i), slog.String("big", strings.Repeat("x", 2000)))
	}
	a.Close()
	// A line longer than any read, and garbage, are skipped.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"host":"a.example","kind":"` + strings.Repeat("y", 2<<20) + "\"}\nnot json \"a.example\"\n")
	f.Close()

	got, err := Read([]string{path}, "a.example", 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("Read = %d lines, %v; want 3", len(got), err)
	}
	if got[0].Kind != "keep_halted" || !strings.Contains(got[0].Fields, "i=4") || got[0].Seq <= got[1].Seq {
		t.Errorf("newest first: %+v", got[0])
	}
	for _, l := range got {
		if len(l.Fields) > maxFields {
			t.Errorf("Fields of %d bytes", len(l.Fields))
		}
	}
	all, _ := Read([]string{path}, "a.example", 100)
	first := all[len(all)-1]
	if first.Kind != "resume" || !strings.Contains(first.Fields, `reason="ok\nby=root`) || strings.ContainsAny(first.Fields, "\x1b\u202e\n") {
		t.Errorf("a reason reads as one quoted value: %q", first.Fields)
	}
	if _, err := Read([]string{filepath.Join(t.TempDir(), "missing")}, "a.example", 3); err == nil {
		t.Error("Read of a missing file: no error")
	}
}
