package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/telemetry"
)

// A crawler writes the audit log with telemetry.NewAudit; an auditor checks
// it with "egressaudit verify" and reads it with "egressaudit show".
func Example() {
	dir, err := os.MkdirTemp("", "egressaudit-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.jsonl")

	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{
		Path:      path,
		Now:       func() time.Time { at = at.Add(time.Minute); return at },
		SyncEvery: -1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	audit.Observe(context.Background(), &telemetry.Event{Host: "shop.example", Method: "GET", Attempt: 1, Final: true, Status: 200, Outcome: classify.OK})
	auditrec.Halt(audit, "shop.example", classify.Result{Outcome: classify.Refused, Status: 403, Reason: "challenge marker"})
	audit.Close()

	fmt.Println("verify: exit", run([]string{"verify", path}, new(strings.Builder), os.Stdout))
	fmt.Println("show: exit", run([]string{"show", "-kind", "halt", path}, os.Stdout, os.Stdout))

	// An edited line breaks the chain: verify exits 1.
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), `"status":403`, `"status":404`, 1)), 0o600)
	fmt.Println("verify after an edit: exit", run([]string{"verify", path}, new(strings.Builder), new(strings.Builder)))
	// Output:
	// verify: exit 0
	// 2026-03-01T10:03:00Z      3 halt         host="shop.example" outcome="refused" status=403 markers=[] reason="challenge marker"
	// show: exit 0
	// verify after an edit: exit 3
}
