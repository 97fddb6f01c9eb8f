package pacing

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestBucketSameAsRateLimiter drives a bucket and an x/time/rate Limiter
// with the same rate and burst through the same random runs of
// reservations and clock steps (zero included), and checks that every
// reservation is granted at exactly the same time and that both hold the
// same tokens after every step. Rate changes come only while no token is
// owed, where the two agree as well; with tokens owed they differ by
// design (see bucket, and TestBucketDiffersWhenOwed).
func TestBucketSameAsRateLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 41))
		perMinute := 0.5 + rng.Float64()*600
		burst := 1 + rng.IntN(5)
		b := newBucket(perMinute, burst, t0, float64(burst))
		lim := rate.NewLimiter(rate.Limit(perMinute/60), burst)
		now := t0
		for step := range 200 {
			switch op := rng.IntN(10); {
			case op < 5:
				got := b.reserve(b.clock(now))
				want := now.Add(lim.ReserveN(now, 1).DelayFrom(now))
				if !got.Equal(want) {
					t.Fatalf("seed %d step %d: reservation at %v, rate.Limiter %v", seed, step, got.Sub(t0), want.Sub(t0))
				}
			case op < 6:
				if b.tokensAt(b.clock(now)) >= 0 {
					perMinute = 0.5 + rng.Float64()*600
					b.setRate(b.clock(now), perMinute)
					lim.SetLimitAt(now, rate.Limit(perMinute/60))
				}
			case op < 7:
				// no step: several reservations at one instant
			default:
				now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Minute / time.Duration(max(perMinute, 1))))))
			}
			if got, want := b.tokensAt(b.clock(now)), lim.TokensAt(now); got != want {
				t.Fatalf("seed %d step %d: %v tokens, rate.Limiter %v", seed, step, got, want)
			}
		}
	}
}

// TestBucketDiffersWhenOwed pins where the bucket parts from rate.Limiter:
// at 60/min with five reservations taken at once (four owed), doubling the
// rate puts the next reservation 0.5s after the last one in the bucket,
// but rate.Limiter, which keeps the count owed, slots it among them.
func TestBucketDiffersWhenOwed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBucket(60, 1, t0, 1)
	lim := rate.NewLimiter(1, 1)
	var last time.Time
	for range 5 {
		last = b.reserve(t0)
		lim.ReserveN(t0, 1)
	}
	b.setRate(t0, 120)
	lim.SetLimitAt(t0, 2)
	got := b.reserve(t0)
	want := t0.Add(lim.ReserveN(t0, 1).DelayFrom(t0))
	if got.Sub(last) != 500*time.Millisecond {
		t.Errorf("bucket: next reservation %v after the last, want 500ms", got.Sub(last))
	}
	if !want.Before(last) {
		t.Errorf("rate.Limiter: next reservation at %v, want before the last one owed (%v): the difference the bucket exists for", want.Sub(t0), last.Sub(t0))
	}
}
