package telemetry_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/egresskit/egresskit/telemetry"
)

func TestProvenanceRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	good := []error{
		a.Consent(telemetry.Consent{Subject: "news.example", Kind: "host", State: "granted",
			Licence: "CC-BY-4.0", Evidence: "https://news.example/terms?token=s3cret", By: "ops"}),
		a.Minimisation(telemetry.Minimisation{Subject: "reviews-2026", Kind: "dataset",
			Fields: []string{"author_email", "ip"}, Reason: "not needed", Records: 1200}),
		a.Deletion(telemetry.Deletion{Request: "DSR-17", Stage: "received", Subject: "reviews-2026", Kind: "dataset", Scope: "author 42"}),
		a.Deletion(telemetry.Deletion{Request: "DSR-17", Stage: "completed", Subject: "reviews-2026", Kind: "dataset", Records: 3}),
	}
	for i, err := range good {
		if err != nil {
			t.Errorf("record %d: %v", i, err)
		}
	}
	bad := []struct {
		name string
		err  error
	}{
		{"consent without subject", a.Consent(telemetry.Consent{Kind: "host", State: "denied"})},
		{"consent with unknown kind", a.Consent(telemetry.Consent{Subject: "x", Kind: "planet", State: "denied"})},
		{"consent with unknown state", a.Consent(telemetry.Consent{Subject: "x", Kind: "host", State: "maybe"})},
		{"minimisation without fields", a.Minimisation(telemetry.Minimisation{Subject: "x", Kind: "host"})},
		{"deletion without request", a.Deletion(telemetry.Deletion{Stage: "received", Subject: "x", Kind: "host"})},
		{"deletion with unknown stage", a.Deletion(telemetry.Deletion{Request: "r", Stage: "pending", Subject: "x", Kind: "host"})},
	}
	for _, b := range bad {
		if !errors.Is(b.err, telemetry.ErrProvenance) {
			t.Errorf("%s: %v, want ErrProvenance", b.name, b.err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := verifyFiles(path); err != nil {
		t.Fatalf("VerifyFiles: %v", err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kinds []string
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, m["kind"].(string))
		lines = append(lines, m)
	}
	if want := []string{"open", "consent", "minimisation", "deletion", "deletion", "close"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds = %v, want %v (rejected records write nothing)", kinds, want)
	}
	c := lines[1]
	if c["subject"] != "news.example" || c["subject_kind"] != "host" || c["state"] != "granted" || c["licence"] != "CC-BY-4.0" ||
		c["evidence"] != "https://news.example/terms?token=REDACTED" {
		t.Errorf("consent line = %v", c)
	}
	m := lines[2]
	if !reflect.DeepEqual(m["fields"], []any{"author_email", "ip"}) || m["action"] != "dropped" || m["records"] != 1200.0 {
		t.Errorf("minimisation line = %v", m)
	}
	if d := lines[4]; d["request"] != "DSR-17" || d["stage"] != "completed" || d["records"] != 3.0 {
		t.Errorf("deletion line = %v", d)
	}
}
