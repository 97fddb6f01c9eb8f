package ratelimit

import (
	"fmt"
	"math"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// Observe adapts host's pacing to the outcome of an attempt. It reports
// whether r is a throttle that pacing can no longer answer by slowing
// down: Throttled, with the rate already at its floor (Floor, or a lower
// configured rate or ceiling).
func (s *Set) Observe(host string, r classify.Result) (floored bool) {
	return s.ObserveAt(host, r, s.cfg.Now())
}

// ObserveAt is Observe with the time already read: now must come from the
// Set's clock (Config.Now), as for ReserveAt.
func (s *Set) ObserveAt(host string, r classify.Result, now time.Time) (floored bool) {
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := s.entry(sh, host, now)
	e.used = now
	if now.Sub(e.since) >= s.cfg.Window {
		e.counts, e.since = [len(e.counts)]uint32{}, now
	}
	if int(r.Outcome) < len(e.counts) && e.counts[r.Outcome] < math.MaxUint32 {
		e.counts[r.Outcome]++
	}
	switch r.Outcome {
	case classify.OK:
		s.ok(e, now, r.Quota)
	case classify.Throttled:
		floored = s.throttled(e, now, r.RetryAfter)
	}
	s.hosts.MaybeSweep(sh, now)
	return floored
}

// ok counts an OK answer: its spacing from the last, a quota it states,
// and a step of the recovery.
func (s *Set) ok(e *entry, now time.Time, quota float64) {
	// A gap across the end of a pause (when this side waited, not the
	// host) says nothing of the rate the host accepts; answers that come
	// while the host is paused were sent before, and their spacing does.
	spansEnd := e.lastOK.Before(e.pausedUntil) && !now.Before(e.pausedUntil)
	if !e.lastOK.IsZero() && now.After(e.lastOK) && !spansEnd {
		d := float64(now.Sub(e.lastOK).Microseconds())
		if e.gaps == 0 {
			e.gap = d
		} else {
			e.gap += (d - e.gap) / 4
		}
		e.gaps = min(e.gaps+1, maxOKs)
	}
	e.lastOK = now
	if positive(quota) && quota < e.perMinute {
		// The host says how fast it will go on accepting: slow to that
		// at once, and recover from there.
		q := max(quota, minPerMinute)
		e.target, e.base, e.oks = q, q, 0
		e.setRate(q, now)
		return
	}
	if e.target == 0 {
		return
	}
	// Climbing, and the host answered clearly faster than the rate now
	// sent at (answers to requests sent before the cut, spaced by the
	// host): jump to that rate, up to the target, rather than crawl there.
	// Answers closer than twice the target's rate (a burst's) say nothing.
	if e.oks < s.cfg.RecoverAfter && e.gaps > 0 {
		if a := e.accepted(); a > 1.1*e.perMinute && a <= 2*e.target {
			e.base = max(e.base, min(a, e.target))
		}
	}
	e.oks = min(e.oks+1, maxOKs)
	step := s.cfg.RecoverStep
	if step == 0 {
		step = e.target / 10
	}
	p := e.plateau
	if p == 0 { // no throttle yet
		p = 2 * s.cfg.RecoverAfter
	}
	if w := min(cubic(e.base, e.target, step, e.oks, s.cfg.RecoverAfter, p), e.top()); w != e.perMinute {
		e.setRate(w, now)
	}
}

// throttled starts or extends a pause episode; see Observe.
func (s *Set) throttled(e *entry, now time.Time, retryAfter time.Duration) (floored bool) {
	floor := min(s.cfg.Floor, e.configured)
	floored = e.perMinute <= floor
	if !now.Before(e.pausedUntil) { // a new episode: cut the rate
		if e.lastOK.Before(e.pausedUntil) {
			e.lastOK = time.Time{} // no OK since the last pause ended
		}
		k := s.cfg.RecoverAfter
		switch {
		case e.plateau == 0:
			e.plateau = 2 * k
		case e.target > 0 && e.oks >= k+e.plateau: // a probe brought it
			e.plateau = min(2*e.plateau, maxOKs/4)
		}
		r := e.perMinute
		target, next := r, r/2
		if a := e.accepted(); a > 0 && a < r {
			target = a
			if a <= 0.9*r {
				next = a
			}
		}
		next = min(max(next, floor), e.top())
		e.target, e.base, e.oks = min(max(target, next), e.top()), next, 0
		e.gaps = 0 // from now on, the rate accepted since this throttle
		e.setRate(next, now)
	}
	pause := max(retryAfter, 0)
	if pause == 0 {
		pause = interval(e.perMinute, s.cfg.MaxPause)
	}
	if until := now.Add(min(pause, s.cfg.MaxPause)); until.After(e.pausedUntil) {
		e.pausedUntil = until
		e.epoch++
		// The first token comes when the pause ends, and never sooner
		// than one interval of the new rate after the throttle.
		e.drain(maxTime(until, now.Add(interval(e.perMinute, s.cfg.MaxPause))))
	}
	return floored
}

// SetCeiling caps host's rate at perMinute requests per minute (robots.txt
// Crawl-delay): a faster current rate drops to it at once, and recovery
// stops at it. A perMinute <= 0 or +Inf removes the cap; a rate below the
// configured one then recovers toward it as after a throttle. Rates below
// one a day count as one a day. It returns an error wrapping ErrInvalidRate
// for NaN.
func (s *Set) SetCeiling(host string, perMinute float64) error {
	if math.IsNaN(perMinute) {
		return fmt.Errorf("%w: ceiling is NaN", ErrInvalidRate)
	}
	now := s.cfg.Now()
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := s.entry(sh, host, now)
	e.used = now
	if !positive(perMinute) {
		e.ceiling = 0
		if e.perMinute < e.configured {
			e.target, e.base, e.oks = e.configured, e.perMinute, 0
		}
		return nil
	}
	e.ceiling = max(perMinute, minPerMinute)
	if e.perMinute > e.ceiling {
		e.setRate(e.ceiling, now)
	}
	return nil
}
