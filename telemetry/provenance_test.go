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
		a.Consent(telemetry.Consent{Subject: "news.example", Kind: telemetry.SubjectHost, State: telemetry.ConsentGranted,
			Licence: "CC-BY-4.0", Evidence: "https://news.example/terms?token=s3cret", By: "ops"}),
		a.Minimisation(telemetry.Minimisation{Subject: "reviews-2026", Kind: telemetry.SubjectDataset,
			Fields: []string{"author_email", "ip"}, Reason: "not needed", Records: 1200}),
		a.Deletion(telemetry.Deletion{Request: "DSR-17", Stage: telemetry.DeletionReceived, Subject: "reviews-2026", Kind: telemetry.SubjectDataset, Scope: "author 42"}),
		a.Deletion(telemetry.Deletion{Request: "DSR-17", Stage: telemetry.DeletionCompleted, Subject: "reviews-2026", Kind: telemetry.SubjectDataset, Records: 3}),
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
		{"consent without subject", a.Consent(telemetry.Consent{Kind: telemetry.SubjectHost, State: telemetry.ConsentDenied})},
		{"consent with unknown kind", a.Consent(telemetry.Consent{Subject: "x", Kind: "planet", State: telemetry.ConsentDenied})},
		{"consent with unknown state", a.Consent(telemetry.Consent{Subject: "x", Kind: telemetry.SubjectHost, State: "maybe"})},
		{"minimisation without fields", a.Minimisation(telemetry.Minimisation{Subject: "x", Kind: telemetry.SubjectHost})},
		{"deletion without request", a.Deletion(telemetry.Deletion{Stage: telemetry.DeletionReceived, Subject: "x", Kind: telemetry.SubjectHost})},
		{"deletion with unknown stage", a.Deletion(telemetry.Deletion{Request: "r", Stage: "pending", Subject: "x", Kind: telemetry.SubjectHost})},
	}
	for _, b := range bad {
		if !errors.Is(b.err, telemetry.ErrProvenance) {
			t.Errorf("%s: %v, want ErrProvenance", b.name, b.err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := telemetry.VerifyFiles(path); err != nil {
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
