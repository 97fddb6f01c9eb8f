package pacing_test

import (
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/ratelimit"
)

// TestLearntCeiling: a throttle at rate r teaches the Set that the host's
// limit is below r. With few OKs since the last throttle (r was far too
// fast) the rate halves; with n OKs over a time d it settles 3 % below
// (n-1)/d, the most a limiter with a burst of one allows; refused again
// within 15 % below the learnt ceiling, it is cut by 10 % and the 3 %. The rate stays
// there — no climb back into the limit — until the probe's backoff (2
// minutes) has passed; then it probes above, slowly at first.
func TestLearntCeiling(t *testing.T) {
	type step struct {
		oks      int           // OKs to observe, each after its Reserve
		advance  time.Duration // then the clock moves
		throttle bool          // then a 429
		rate     float64       // and the rate is
	}
	tests := []struct {
		name  string
		cfg   ratelimit.Config
		steps []step
	}{
		{"few OKs: halve, settle", ratelimit.Config{}, []step{
			{oks: 2, throttle: true, rate: 30},
			{oks: 40, rate: 30},
		}},
		{"overshoot from the run of OKs", ratelimit.Config{PerMinute: 120}, []step{
			{oks: 21, throttle: true, rate: r21},
			{oks: 50, rate: r21},
		}},
		{"a refusal at the settled rate ratchets down", ratelimit.Config{PerMinute: 120}, []step{
			{oks: 21, throttle: true, rate: r21},
			{oks: 41, throttle: true, rate: r21 * 0.9 * 0.97},
		}},
		{"probe after the backoff", ratelimit.Config{PerMinute: 120}, []step{
			{oks: 21, throttle: true, rate: r21},
			{oks: 20, advance: 2 * time.Minute, rate: r21},
			{oks: 1, rate: r21},               // the probe starts at the first OK past the backoff
			{oks: 5, rate: r21 * (1 + 0.1/8)}, // halfway: (1/2)^3 of the step
			{oks: 5, rate: 120},               // the step, capped at the configured rate
		}},
		{"a refused probe goes back to the target", ratelimit.Config{PerMinute: 120}, []step{
			{oks: 21, throttle: true, rate: r21},
			{oks: 10, advance: 2 * time.Minute},
			{oks: 30, throttle: true, rate: r21},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			s := newSet(c, tt.cfg)
			for i, st := range tt.steps {
				okRun(t, c, s, st.oks)
				c.Advance(st.advance)
				if st.throttle { // sent when its slot came, like the OKs
					c.Advance(reserve(t, s, host))
					observe(s, host, classify.Throttled, 0)
				}
				if got := s.Status(host).PerMinute; st.rate > 0 && !nearPct(got, st.rate) {
					t.Errorf("step %d: rate %v, want %v", i+1, got, st.rate)
				}
			}
		})
	}
}

// r21 is where a 429 after 21 OKs at 120/min settles: the host allowed
// fewer than 20 requests in the 21 intervals to the refused one, 3 % below.
const r21 = 120.0 * 20 / 21 * 0.97

// nearPct reports whether two rates agree within 0.1 %.
func nearPct(a, b float64) bool { return a >= b*0.999 && a <= b*1.001 }
