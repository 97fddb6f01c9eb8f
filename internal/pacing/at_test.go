package pacing_test

import (
	"context"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/ratelimit"
)

// TestReserveAtObserveAt: ReserveAt and ObserveAt pace at the time they
// are given, not at a reading of the Set's clock (which stands still
// here): a token refills by the given time, and a throttle's pause runs
// from it.
func TestReserveAtObserveAt(t *testing.T) {
	c := newClock()
	t0 := c.Now()
	s := newSet(c, ratelimit.Config{}) // 60/min, burst 1
	for i, st := range []struct {
		at   time.Duration // after t0
		want time.Duration
	}{
		{0, 0},
		{0, time.Second},
		{3 * time.Second, 0}, // a token has refilled by then
		{3 * time.Second, time.Second},
	} {
		r, err := s.ReserveAt(context.Background(), host, t0.Add(st.at))
		if err != nil {
			t.Fatalf("ReserveAt #%d = %v", i+1, err)
		}
		if r.Wait != st.want {
			t.Errorf("ReserveAt #%d at t0+%v: wait %v, want %v", i+1, st.at, r.Wait, st.want)
		}
	}

	at := t0.Add(time.Hour)
	s.ObserveAt("other.example", classify.Result{Outcome: classify.Throttled, RetryAfter: 5 * time.Second}, at)
	if got := s.Status("other.example").PausedUntil; got.Before(at.Add(5 * time.Second)) {
		t.Errorf("after ObserveAt of a 429 with Retry-After 5s at t0+1h: paused until %v, want at least %v", got, at.Add(5*time.Second))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ReserveAt(ctx, host, t0); err != context.Canceled {
		t.Errorf("ReserveAt with an ended context = %v, want %v", err, context.Canceled)
	}
}
