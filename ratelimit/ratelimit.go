// Package ratelimit paces requests per host, adaptively.
//
// A Set holds a token bucket (x/time/rate's arithmetic, see bucket.go) per
// host key (see package hostkey), filled at the host's current rate in requests per
// minute, and adapts that rate to what the host says:
//
//   - A host never contacted gets one request at first, not a burst: its
//     bucket starts with one token and fills to Burst while it is idle.
//   - Throttled (a 429, or any Retry-After) starts a pause episode, and
//     teaches the Set that the host's sustained limit is below the rate r
//     it was sent at, whatever the spacing of earlier OKs suggested (a
//     limiter's burst allowance hides an excess for a while). The learnt
//     ceiling drops to r, and the rate settles below the limit the
//     throttle shows: a limiter with a burst of one request that let n
//     OKs through since the last pause ended, over a time d, and refuses
//     now allows fewer than n-1 requests in d; the rate is set to that
//     ((n-1)/d, at most r, at least r/2), and 3 % below. Fewer than 3 OKs
//     since the last pause ended say only that r was far too fast: the
//     rate halves. Refused again within 15 % below the
//     learnt ceiling (a limiter counting over a window lets many requests
//     through before it refuses, whatever their rate), the rate is cut by
//     10 % and the 3 %. It never goes below Floor.
//   - The host is paused until now + RetryAfter (capped at MaxPause; one
//     interval at the new rate when the host gave no RetryAfter). When
//     the host answered no OK since the previous pause ended, it is still
//     shut (a limiter counting over a window, refused requests too): the
//     pause is four times the previous one, at least, and the rate drops
//     to a quarter. The
//     throttle drains the bucket, and from then on the host gets no bursts
//     (its bucket holds one token): when the pause ends (and no sooner
//     than one interval of the new rate after the throttle), the attempts
//     waiting for it go out one interval apart at the new rate, never
//     together. A Throttled outcome that arrives while the host is already
//     paused (another attempt answered by the same episode) extends the
//     pause, draining the bucket again, but teaches nothing new.
//   - Every pause that starts or grows bumps the host's epoch (Status.Epoch,
//     Reservation.Epoch): a reservation taken in an earlier epoch was
//     computed before the latest throttle, and its holder must reserve
//     again rather than send at the time it was given.
//   - The rate stays where the throttle settled it (Status.Target): it
//     does not climb back into the limit. A backoff after the throttle (2
//     minutes, doubling after every probe the host refused, up to 8) the
//     rate probes above it, slowly at first: RecoverStep faster after
//     RecoverAfter OKs, growing with the cube of their number, up to the
//     configured rate, so that a raised limit is found within minutes
//     while a fixed one is probed ever more rarely. A throttle during the
//     probe sends the rate back to where the probe started.
//   - An OK answer whose rate-limit fields leave a quota below the current
//     rate (classify.Result.Quota: remaining requests over the time to the
//     reset) sets the rate to that quota at once; it stays there until
//     the probe's backoff has passed.
//   - The rate never exceeds the host's configured rate nor its ceiling
//     (SetCeiling, robots.txt Crawl-delay).
//   - Transient, Refused, Permanent and Canceled outcomes leave the rate
//     alone.
//
// Observe reports whether a Throttled outcome came when pacing could no
// longer slow down — the rate already at its floor —, which is when
// package hoststate lets a throttle count toward opening the breaker.
//
// Reserve takes a token and returns how long the caller must wait before
// sending: the rest of any pause plus the token's delay. It never sleeps,
// and it fails fast, taking nothing, when that wait would pass the
// context's deadline.
//
// A host idle for IdleTTL is forgotten (so it starts again at its configured
// rate, without its ceiling) unless it is still paused. Eviction runs lazily
// on the calls that touch a host's shard, and on demand with Evict; the Set
// starts no goroutine.
package ratelimit

import (
	"context"
	"strconv"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/hostmap"
)

// Outcomes counts outcomes by class.
type Outcomes struct {
	OK, Transient, Throttled, Refused, Permanent, Canceled int
}

// Reservation is one token of a host's budget.
type Reservation struct {
	// Wait is how long the caller must wait before sending.
	Wait time.Duration
	// Epoch is the host's epoch when the token was taken. When Status's
	// Epoch has moved past it, a throttle has paused the host since, and
	// the token must not be used: reserve again.
	Epoch uint64
}

// Status is a snapshot of one host's pacing.
type Status struct {
	// PerMinute is the current rate; Configured the rate it recovers to
	// (Config.PerMinute or the host's override); Ceiling the cap set by
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
	Recent      Outcomes
	RecentSince time.Time
}

// Set paces many hosts. It is safe for concurrent use.
type Set struct {
	cfg   Config
	hosts *hostmap.Map[entry, struct{}]
}

// New returns a Set configured by cfg, or an error wrapping
// egresskit.ErrInvalidConfig that names the field cfg cannot honour.
func New(cfg Config) (*Set, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg.withDefaults()}
	s.hosts = newHosts(s.cfg.IdleTTL)
	return s, nil
}

// Reserve takes one token of host's budget and returns how long the caller
// must wait before sending: the rest of any pause, then the token's delay.
// It returns ctx.Err() when ctx is already done, and a *DeadlineError
// (errors.Is context.DeadlineExceeded) when the wait would pass ctx's
// deadline; in both cases it takes no token.
func (s *Set) Reserve(ctx context.Context, host string) (Reservation, error) {
	return s.ReserveAt(ctx, host, s.cfg.Now())
}

// ReserveAt is Reserve with the time already read: now must come from the
// Set's clock (Config.Now), so that a caller that also needs the time of
// the attempt (hoststate.Memory, for its breakers, when Config.Now is
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
			return Reservation{}, &DeadlineError{Host: host, Wait: wait}
		}
	}
	send := e.lim.reserve(at)
	s.hosts.MaybeSweep(sh, now)
	return Reservation{Wait: max(send.Sub(now), 0), Epoch: e.epoch}, nil
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
		st.Recent = Outcomes{
			OK: int(c[classify.OK]), Transient: int(c[classify.Transient]),
			Throttled: int(c[classify.Throttled]), Refused: int(c[classify.Refused]),
			Permanent: int(c[classify.Permanent]), Canceled: int(c[classify.Canceled]),
		}
		st.RecentSince = e.since
	}
	return st
}

// String formats o as "ok=1 transient=0 ...", for logs.
func (o Outcomes) String() string {
	b := make([]byte, 0, 80)
	for i, n := range [...]int{o.OK, o.Transient, o.Throttled, o.Refused, o.Permanent, o.Canceled} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, classify.Outcome(i).String()...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b)
}
