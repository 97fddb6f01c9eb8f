package ratelimit

import (
	"time"

	"github.com/egresskit/egresskit/classify"
)

// entry is one host's pacing; its fields are guarded by its shard's lock.
type entry struct {
	lim         bucket
	perMinute   float64 // current rate
	configured  float64
	ceiling     float64   // 0: none
	pausedUntil time.Time // zero: never paused
	epoch       uint64    // pauses started or grown
	// The recovery: from base toward target (0: none), oks OKs in, with a
	// plateau of plateau OKs (0: not yet set).
	target, base float64
	oks, plateau int
	// The spacing of OK answers: the last one's time, and an average of
	// the gaps (microseconds) over gaps samples.
	lastOK time.Time
	gap    float64
	gaps   int
	counts [classify.Canceled + 1]uint32
	since  time.Time // start of the counts' window
	used   time.Time
}

// minGaps is how many gaps between OK answers make an accepted rate.
const minGaps = 1

// maxOKs bounds the OK count of a recovery (far past its end).
const maxOKs = 1 << 30

func (s *Set) newEntry(host string, now time.Time) *entry {
	pm := s.configured(host)
	return &entry{
		lim:        newBucket(pm, s.cfg.Burst, now),
		perMinute:  pm,
		configured: pm,
		since:      now,
		used:       now,
	}
}

func (s *Set) configured(host string) float64 {
	if pm, ok := s.cfg.Overrides[host]; ok {
		return pm
	}
	return s.cfg.PerMinute
}

// top is the rate the host may recover to.
func (e *entry) top() float64 {
	if e.ceiling > 0 {
		return min(e.configured, e.ceiling)
	}
	return e.configured
}

func (e *entry) setRate(perMinute float64, now time.Time) {
	e.perMinute = perMinute
	e.lim.setRate(e.lim.clock(now), perMinute)
}

// drain empties the bucket as of at and leaves it a burst of one: the
// next token is available at at, the one after an interval later.
func (e *entry) drain(at time.Time) {
	at = e.lim.clock(at)
	e.lim = bucket{tokens: 1, at: at, perMinute: e.perMinute, burst: 1}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// accepted is the rate at which the host answered OK lately, per minute;
// 0 when not known.
func (e *entry) accepted() float64 {
	if e.gaps < minGaps || e.gap <= 0 {
		return 0
	}
	return 60e6 / e.gap
}

// cubic is the recovery's rate n OKs after a throttle cut the rate to
// base, aiming at target: a concave climb over k OKs, a plateau over p
// more, then a convex probe, step faster k OKs later.
func cubic(base, target, step float64, n, k, p int) float64 {
	switch {
	case n < k:
		x := 1 - float64(n)/float64(k)
		return target - (target-base)*(x*x*x)
	case n < k+p:
		return target
	}
	x := float64(n-k-p) / float64(k)
	return target + step*(x*x*x)
}
