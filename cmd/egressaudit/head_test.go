package main

import (
	"bytes"
	"testing"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/telemetry"
)

// TestHeadIsOfTheVerifiedLines: on a log appended to while it is checked,
// head and verify print the head of the last line they verified, not of a
// line written after: an anchor vouches only for lines that were checked.
func TestHeadIsOfTheVerifiedLines(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want func(telemetry.Head) string
	}{
		{"head", func(h telemetry.Head) string { return formatHead(h) + "\n" }},
		{"verify", func(h telemetry.Head) string { return "OK 12 lines in 1 files, head " + formatHead(h) + "\n" }},
	} {
		t.Run(tt.cmd, func(t *testing.T) {
			path, head := writeLog(t, telemetry.AuditConfig{})
			appended := false
			testHookVerified = func() {
				a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path, Now: clock(), SyncEvery: -1})
				if err != nil {
					t.Fatal(err)
				}
				if err := auditrec.Halt(a, "d.example", classify.Result{Outcome: classify.Refused, Status: 403}); err != nil {
					t.Fatal(err)
				}
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				appended = a.Head().Seq > head.Seq
			}
			t.Cleanup(func() { testHookVerified = nil })
			var out, errb bytes.Buffer
			if code := run([]string{tt.cmd, path}, &out, &errb); code != exitOK {
				t.Fatalf("%s: exit %d, stderr %q", tt.cmd, code, errb.String())
			}
			if !appended {
				t.Fatal("no line was appended after the log was verified")
			}
			if got, want := out.String(), tt.want(head); got != want {
				t.Errorf("%s printed %q, want %q (the head before the line appended after verifying)", tt.cmd, got, want)
			}
		})
	}
}
