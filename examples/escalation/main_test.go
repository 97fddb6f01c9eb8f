package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/telemetry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), &out, dir); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"partner  /members?session=REDACTED  403 halted=true\n",
		"ticket 1 filed as ticket-0001.json: partner refused /members?session=REDACTED (status 403, agent named)\n",
		"partner  /members/1                 not sent: host halted\n",
		"news     /sport                     200 halted=false\n",
		"partner  /members/2                 not sent: host halted\n",
		"news     /weather                   200 halted=false\n",
		"while halted: partner received 0 more requests; halted=true\n",
		"ticket 1 settled: partner resumed by the operator\n",
		"partner  /members/3                 200 halted=false\n",
		"audit log verified: attempt 7, close 1, escalation 1, halt 1, open 1, resume 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}

	// The ticket is JSON carrying the evidence, and no credential.
	b, err := os.ReadFile(filepath.Join(dir, "tickets", "ticket-0001.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ticket Ticket
	if err := json.Unmarshal(b, &ticket); err != nil {
		t.Fatalf("ticket is not JSON: %v\n%s", err, b)
	}
	if ticket.Status != 403 || !strings.Contains(ticket.Evidence, "EscalationBot is not allowed") || ticket.Time.IsZero() {
		t.Errorf("ticket = %+v, want status 403, the refusal as evidence and a time", ticket)
	}
	audit, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"output": got, "ticket": string(b), "audit log": string(audit)} {
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("the session value leaks into the %s", name)
		}
	}

	// The log is tamper-evident: editing one line breaks verification at
	// that line.
	lines := strings.SplitAfter(string(audit), "\n")
	edited := strings.Replace(lines[3], `"kind":"`, `"kind":"x`, 1)
	if edited == lines[3] {
		t.Fatalf("line 4 has no kind: %q", lines[3])
	}
	lines[3] = edited
	var verr *telemetry.VerifyError
	if _, err := (telemetry.Verifier{}).Verify(strings.NewReader(strings.Join(lines, ""))); !errors.As(err, &verr) || verr.Line != 4 {
		t.Errorf("Verify(log with line 4 edited) = %v, want a *VerifyError at line 4", err)
	}
}

func TestClearAfterClose(t *testing.T) {
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: filepath.Join(t.TempDir(), "audit.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	op, err := startOperator(mustChain(egresskit.Config{}), audit, t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	op.Close()
	op.Close() // harmless
	if err := op.Clear(context.Background(), "a.example"); !errors.Is(err, errStopped) {
		t.Errorf("Clear after Close = %v, want errStopped", err)
	}
}

// TestFullInboxNeverBlocks shows that the chain's hook never waits for the
// operator: with the inbox full, an escalation is counted as dropped and
// still recorded in the audit log.
func TestFullInboxNeverBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{audit: audit, inbox: make(chan egresskit.Escalation)} // no goroutine, no room
	op.Escalate(egresskit.Escalation{Host: "a.example", Status: 403, Reason: "agent named"})
	if got := op.dropped.Load(); got != 1 {
		t.Errorf("dropped = %d, want 1", got)
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	kinds, err := countKinds(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "close 1, escalation 1, halt 1, open 1"; kinds != want {
		t.Errorf("audit kinds = %q, want %q", kinds, want)
	}
}
