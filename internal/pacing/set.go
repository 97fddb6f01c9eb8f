// Package pacing is the engine of the in-memory store's per-host pacing
// (see package ratelimit for what it does): a Set of token buckets, one per
// host key, whose rates adapt to what the hosts answer. Reserve takes a
// token and returns the wait; Observe feeds an outcome back; Status reads a
// host. Eviction runs lazily on the calls that touch a host's shard, and on
// demand with Evict; the Set starts no goroutine.
package pacing

import (
	"context"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/hostmap"
	"github.com/egresskit/egresskit/ratelimit"
)

// Reservation is one token of a host's budget.
type Reservation struct {
	// Wait is how long the caller must wait before sending.
	Wait time.Duration
	// Epoch is the host's epoch when the token was taken. When Status's
	// Epoch has moved past it, a throttle has paused the host since, and
	// the token must not be used: reserve again.
	Epoch uint64
	// PerMinute is the host's rate when the token was taken.
	PerMinute float64
	// BaseLatency is the host's base latency (time to headers) learnt
	// from its OK answers; 0 before the first.
	BaseLatency time.Duration
}

// Status is a snapshot of one host's pacing.
type Status struct {
	// PerMinute is the current rate; Configured the rate it recovers to
	// (ratelimit.Config.PerMinute or the host's override); Ceiling the cap set by
	// SetCeiling (0: none).
	PerMinute, Configured, Ceiling float64
	// PausedUntil is when a Retry-After pause ends; zero when not paused.
	PausedUntil time.Time
	// Epoch counts the pauses that started or grew (see Reservation).
	Epoch uint64
	// Target is the rate the latest throttle (or quota) settled the host
	// at, below the limit it showed; 0 before any.
	Target float64
	// Accepted is the rate at which the host answered OK lately, from the
	// spacing of its OK answers; 0 until a few were seen.
	Accepted float64
	// Recent counts the outcomes observed since RecentSince, which is at
	// most Window ago (zero when none was).
	Recent      ratelimit.Outcomes
	RecentSince time.Time
}

// Set paces many hosts. It is safe for concurrent use.
type Set struct {
	cfg   ratelimit.Config
	hosts *hostmap.Map[entry, struct{}]
}

// New returns a Set configured by cfg, or an error wrapping
// egresskit.ErrInvalidConfig that names the field cfg cannot honour.
func New(cfg ratelimit.Config) (*Set, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	s := &Set{cfg: withDefaults(cfg)}
	s.hosts = newHosts(s.cfg.IdleTTL)
	return s, nil
}

// Reserve takes one token of host's budget and returns how long the caller
// must wait before sending: the rest of any pause, then the token's delay.
// It returns ctx.Err() when ctx is already done, and a *ratelimit.DeadlineError
// (errors.Is context.DeadlineExceeded) when the wait would pass ctx's
// deadline; in both cases it takes no token.
func (s *Set) Reserve(ctx context.Context, host string) (Reservation, error) {
	return s.ReserveAt(ctx, host, s.cfg.Now())
}

// ReserveAt is Reserve with the time already read: now must come from the
// Set's clock (ratelimit.Config.Now), so that a caller that also needs the time of
// the attempt (hoststate.Memory, for its breakers, when ratelimit.Config.Now is
// time.Now) reads the clock once.
func (s *Set) ReserveAt(ctx context.Context, host string, now time.Time) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := s.entry(sh, host, now)
	e.used = now
	at := now
	if e.pausedUntil.After(at) {
		at = e.pausedUntil
	}
	at = e.lim.clock(at)
	if deadline, ok := ctx.Deadline(); ok {
		wait := at.Sub(now)
		if tokens := e.lim.tokensAt(at); tokens < 1 {
			wait += delay(1-tokens, e.perMinute)
		}
		if now.Add(wait).After(deadline) {
			return Reservation{}, &ratelimit.DeadlineError{Host: host, Wait: wait}
		}
	}
	send := e.lim.reserve(at)
	if !e.pausedUntil.After(now) {
		// The pace binds when attempts queue at it (each waits about an
		// interval, or more), not when one waits out a little of one: a
		// crawl whose demand is half the pace has every other admission
		// wait a little.
		e.waited = send.Sub(now) >= delay(0.5, e.perMinute)
		w := 0.0
		if e.waited {
			w = 1
		}
		e.bound += (w - e.bound) * boundWeight
	}
	s.hosts.MaybeSweep(sh, now)
	return Reservation{Wait: max(send.Sub(now), 0), Epoch: e.epoch, PerMinute: e.perMinute,
		BaseLatency: time.Duration(e.latBase) * time.Microsecond}, nil
}

// delay is the time to accumulate tokens at perMinute, computed as
// x/time/rate does.
func delay(tokens, perMinute float64) time.Duration {
	return time.Duration(tokens / (perMinute / 60) * float64(time.Second))
}

// interval is the time between two requests at perMinute, at most max.
func interval(perMinute float64, max time.Duration) time.Duration {
	d := 60 / perMinute * float64(time.Second)
	if d >= float64(max) {
		return max
	}
	return time.Duration(d)
}

// Status returns a snapshot of host's pacing. A host with no state is at
// its configured rate.
func (s *Set) Status(host string) Status {
	now := s.cfg.Now()
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := sh.Get(host)
	if e == nil {
		pm := s.configured(host)
		return Status{PerMinute: pm, Configured: pm}
	}
	st := Status{PerMinute: e.perMinute, Configured: e.configured, Ceiling: e.ceiling,
		Epoch: e.epoch, Target: e.target, Accepted: e.accepted()}
	if now.Before(e.pausedUntil) {
		st.PausedUntil = e.pausedUntil
	}
	if now.Sub(e.since) < s.cfg.Window {
		c := &e.counts
		st.Recent = ratelimit.Outcomes{
			OK: int(c[classify.OK]), Transient: int(c[classify.Transient]),
			Throttled: int(c[classify.Throttled]), Refused: int(c[classify.Refused]),
			Permanent: int(c[classify.Permanent]), Canceled: int(c[classify.Canceled]),
		}
		st.RecentSince = e.since
	}
	return st
}
