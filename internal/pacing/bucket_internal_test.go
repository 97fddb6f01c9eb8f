package pacing

import (
	"testing"
	"time"
)

// TestBucketRateChangeKeepsSpacing: when the rate changes while tokens are
// owed, the reservation after the change comes one interval of the new
// rate after the last one, and never earlier than the bucket's own time.
func TestBucketRateChangeKeepsSpacing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		newRate float64 // per minute, set at t0 after three reservations
		want    time.Duration
	}{
		{"halved", 30, 3 * time.Second},           // last at 1s, then 2s apart
		{"doubled", 120, 1500 * time.Millisecond}, // last at 1s, then 0.5s apart
		{"unchanged", 60, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBucket(60, 2, t0, 2)
			for i, want := range []time.Duration{0, 0, time.Second} { // burst 2, then 1/s
				if got := b.reserve(t0).Sub(t0); got != want {
					t.Fatalf("reservation %d at %v, want %v", i+1, got, want)
				}
			}
			b.setRate(t0, tt.newRate)
			if got := b.reserve(t0).Sub(t0); got != tt.want {
				t.Errorf("reservation after the rate became %v/min at %v, want %v", tt.newRate, got, tt.want)
			}
		})
	}
	// Tokens in hand are not re-valued, and never exceed the burst.
	b := newBucket(60, 2, t0, 2)
	b.setRate(t0, 6)
	if got := b.tokensAt(t0.Add(time.Hour)); got != 2 {
		t.Errorf("tokens after an hour at burst 2 = %v, want 2", got)
	}
	if got := b.clock(t0.Add(-time.Second)); !got.Equal(t0) {
		t.Errorf("clock(earlier) = %v, want the bucket's own time %v", got, t0)
	}
}

// TestClimbAndProbe: the recovery curve starts at base and reaches
// target after k OKs, concave; a probe starts at target and climbs by
// step per k OKs, cubed.
func TestClimbAndProbe(t *testing.T) {
	const base, target, step = 10.0, 100.0, 20.0
	for _, tt := range []struct {
		n          int
		climb, pro float64
	}{
		{0, base, target},
		{2, target - (target-base)/8, target + step/8}, // halfway: (1/2)^3 of the gap
		{4, target, target + step},
		{8, target, target + 8*step},
	} {
		if got := climb(base, target, tt.n, 4); got != tt.climb {
			t.Errorf("climb(n=%d) = %v, want %v", tt.n, got, tt.climb)
		}
		if got := probe(target, step, tt.n, 4); got != tt.pro {
			t.Errorf("probe(n=%d) = %v, want %v", tt.n, got, tt.pro)
		}
	}
}
