package main

import (
	"testing"
	"time"
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
