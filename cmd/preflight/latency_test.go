package main

import (
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/probe"
)

// TestLatencyText: the text summary shows real percentiles, to three
// significant digits, even under a millisecond; n/a without a response.
func TestLatencyText(t *testing.T) {
	for _, tt := range []struct {
		d       time.Duration
		samples int
		want    string
	}{
		{412345 * time.Nanosecond, 3, "412µs"},
		{1234567 * time.Nanosecond, 3, "1.23ms"},
		{2500 * time.Millisecond, 3, "2.5s"},
		{850 * time.Nanosecond, 1, "850ns"},
		{0, 0, "n/a"},
		{90 * time.Minute, 1, "1h30m0s"},
	} {
		if got := latency(tt.d, tt.samples); got != tt.want {
			t.Errorf("latency(%v, %d) = %q, want %q", tt.d, tt.samples, got, tt.want)
		}
	}
}

// TestSummaryCountsAgree: the summary's success rate is over the measured
// probes and says which probes were not measured, so that its numbers add
// up: 2 of 3 measured succeeded (66.7%), 1 of 4 disallowed by robots.txt.
func TestSummaryCountsAgree(t *testing.T) {
	var b strings.Builder
	writeSummary(&b, &probe.Report{Diagnosis: probe.Diagnosis{
		Status: probe.Degraded, Total: 4, Measured: 3, Succeeded: 2, SuccessRate: 2.0 / 3, Disallowed: 1, Blocked: 1,
	}})
	first, _, _ := strings.Cut(b.String(), "\n")
	for _, want := range []string{"2 of 3 measured probes succeeded (66.7%)", "1 of 4 not measured: 1 disallowed by robots.txt, 0 canceled", "1 blocked"} {
		if !strings.Contains(first, want) {
			t.Errorf("summary %q does not say %q", first, want)
		}
	}
}
