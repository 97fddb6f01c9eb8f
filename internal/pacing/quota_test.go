package pacing_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
)

// TestQuota: an OK answer stating a quota sets the host's rate to it at
// once, below or above the rate a throttle settled (the quota is what the
// host accepts until its window ends), never above the configured 60, and
// the rate stays there while no OK says otherwise.
func TestQuota(t *testing.T) {
	okQuota := func(s *pacing.Set, q float64) {
		s.Observe(host, classify.Result{Outcome: classify.OK, Quota: q})
	}
	for _, tt := range []struct {
		name  string
		quota float64 // stated by the first OK after the throttle (0: none)
		after float64 // the rate right after it
		final float64 // 20 OKs later
	}{
		{"no quota", 0, 30, 30},
		{"quota at the current rate", 30, 30, 30},
		{"quota above the current rate", 45, 45, 45},
		// OKs without a quota then settle below the ceiling the throttle
		// taught, by its margin.
		{"quota above the configured rate", 90, 60, 60 * 0.97},
		{"quota below the current rate", 12, 12, 12},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			s := newSet(c, ratelimit.Config{})
			observe(s, host, classify.Throttled, 0)
			c.Advance(reserve(t, s, host)) // the pause
			if got := s.Status(host).PerMinute; got != 30 {
				t.Fatalf("rate after the throttle = %v, want 30", got)
			}
			c.Advance(reserve(t, s, host))
			okQuota(s, tt.quota)
			if got := s.Status(host).PerMinute; !near(got, tt.after) {
				t.Errorf("rate after an OK with quota %v = %v, want %v", tt.quota, got, tt.after)
			}
			okRun(t, c, s, 20)
			if got := s.Status(host).PerMinute; !near(got, tt.final) {
				t.Errorf("rate 20 OKs later = %v, want %v", got, tt.final)
			}
		})
	}
}

// TestDeadlinePartialToken: the wait checked against a deadline counts the
// part of a token already refilled: half a second after a token was taken
// at 60/min, the next is half a second away.
func TestDeadlinePartialToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustLimit(ratelimit.Config{})
		reserve(t, s, host)
		time.Sleep(500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if got, err := s.Reserve(ctx, host); err != nil || got.Wait != 500*time.Millisecond {
			t.Errorf("Reserve with a deadline at the slot = %v, %v; want 500ms, nil", got, err)
		}
	})
}
