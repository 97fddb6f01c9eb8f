// Package ratelimit paces requests per host, adaptively.
//
// A Set holds a token bucket (x/time/rate's arithmetic, see bucket.go) per
// host key (see package hostkey), filled at the host's current rate in requests per
// minute, and adapts that rate to what the host says:
//
//   - Throttled (a 429, or any Retry-After) starts a pause episode: the rate
//     is halved (never below Floor) — or, when the host was seen to accept
//     clearly less than the rate (at most 0.9 of it, see below), set to
//     that accepted rate at once — and the host is paused until now +
//     RetryAfter (capped at MaxPause; one interval at the new rate when
//     the host gave no RetryAfter). The throttle drains the bucket, and
//     from then on the host gets no bursts (its bucket holds one token):
//     when the pause ends (and no sooner than one interval of the new
//     rate after the throttle), the attempts waiting for it go out one
//     interval apart at the new rate, never together. A Throttled
//     outcome that arrives while the host is already paused (another
//     attempt answered by the same episode) extends the pause, draining the
//     bucket again, but does not halve again.
//   - Every pause that starts or grows bumps the host's epoch (State.Epoch,
//     Reservation.Epoch): a reservation taken in an earlier epoch was
//     computed before the latest throttle, and its holder must reserve
//     again rather than send at the time it was given.
//   - OK outcomes drive the recovery, shaped like TCP CUBIC's window over
//     the count of OKs since the throttle: a concave climb from the cut
//     rate back to the target rate in RecoverAfter OKs (fast at first,
//     flattening as it nears the target), a plateau at the target, then
//     a convex probe above it, RecoverStep faster after RecoverAfter
//     further OKs and growing with the cube of their number. The plateau
//     lasts 2×RecoverAfter OKs, and twice as long again after each
//     throttle that a probe brought about: the better the host's limit is
//     known, the more rarely it is probed. The target is the last rate the
//     host accepted: the rate of OK answers measured from their spacing
//     (an average over the recent ones, gaps across a pause left out),
//     else the rate at which the throttle came. The accepted rate is
//     measured afresh after each throttle; while the rate climbs, answers
//     spaced clearly closer than the rate now sent at (answers to requests
//     sent before the cut) raise it at once to their rate, up to the
//     target.
//   - An OK answer whose rate-limit fields leave a quota below the current
//     rate (classify.Result.Quota: remaining requests over the time to the
//     reset) sets the rate to that quota at once, and the recovery starts
//     from there.
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
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/hostmap"
)

// Config configures a Set. The zero value uses every default.
type Config struct {
	// PerMinute is the configured rate of every host without an override,
	// in requests per minute. Default (not a positive finite number): 60.
	PerMinute float64
	// Burst is how many requests a host may receive back to back after it
	// has been idle. Default (<= 0): 1.
	Burst int
	// Floor is the lowest rate halvings reach, in requests per minute. It
	// never exceeds a host's configured rate; a ceiling below it wins.
	// Default (not a positive finite number): 1.
	Floor float64
	// RecoverAfter is the length, in OK outcomes, of the phases of the
	// recovery after a throttle: the climb back to the target rate, half
	// the first plateau there, and the first step of probing above it.
	// Default (<= 0): 10.
	RecoverAfter int
	// RecoverStep is how much faster than the target rate the probe is
	// after its first RecoverAfter OKs, in requests per minute; it grows
	// with the cube of the OKs since (2, 3 RecoverAfter: 8, 27 times).
	// Default (not a positive finite number): a tenth of the target rate.
	RecoverStep float64
	// MaxPause caps the pause a Retry-After may impose. Default (<= 0): 1h.
	MaxPause time.Duration
	// Window is the span of the recent outcome counts State reports.
	// Default (<= 0): 5 minutes.
	Window time.Duration
	// Overrides sets the configured rate of individual hosts (by host key),
	// in requests per minute. Values that are not positive finite numbers
	// are ignored. The map is copied by New.
	Overrides map[string]float64
	// IdleTTL is how long a host's state is kept after its last use; a
	// paused host is kept until its pause ends. Default (0): 10 minutes;
	// negative: never evict.
	IdleTTL time.Duration
	// Now is the clock. Default (nil): time.Now.
	Now func() time.Time
}

// DefaultConfig returns the Config with every default filled in (except
// RecoverStep, which depends on the host, and Overrides).
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

// minPerMinute bounds every rate from below (one request a day), so that no
// wait overflows and none is longer than a day.
const minPerMinute = 1.0 / (24 * 60)

func positive(f float64) bool { return f > 0 && !math.IsInf(f, 1) }

func (c Config) withDefaults() Config {
	if !positive(c.PerMinute) {
		c.PerMinute = 60
	}
	c.PerMinute = max(c.PerMinute, minPerMinute)
	if c.Burst <= 0 {
		c.Burst = 1
	}
	if !positive(c.Floor) {
		c.Floor = 1
	}
	c.Floor = max(c.Floor, minPerMinute)
	if c.RecoverAfter <= 0 {
		c.RecoverAfter = 10
	}
	if !positive(c.RecoverStep) {
		c.RecoverStep = 0
	}
	if c.MaxPause <= 0 {
		c.MaxPause = time.Hour
	}
	if c.Window <= 0 {
		c.Window = 5 * time.Minute
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = 10 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	overrides := make(map[string]float64, len(c.Overrides))
	for host, pm := range c.Overrides {
		if positive(pm) {
			overrides[host] = max(pm, minPerMinute)
		}
	}
	c.Overrides = overrides
	return c
}

// ErrInvalidRate: a rate that is not a number.
var ErrInvalidRate = errors.New("ratelimit: invalid rate")

// DeadlineError reports that the wait for a host's next slot would pass the
// context's deadline. errors.Is(err, context.DeadlineExceeded) is true.
type DeadlineError struct {
	// Host is the host key.
	Host string
	// Wait is how long the caller would have had to wait.
	Wait time.Duration
}

// Error returns "ratelimit: wait of D for HOST exceeds the context deadline".
func (e *DeadlineError) Error() string {
	return "ratelimit: wait of " + e.Wait.String() + " for " + e.Host + " exceeds the context deadline"
}

// Unwrap returns context.DeadlineExceeded.
func (e *DeadlineError) Unwrap() error { return context.DeadlineExceeded }

// Outcomes counts outcomes by class.
type Outcomes struct {
	OK, Transient, Throttled, Refused, Permanent, Canceled int
}

// Reservation is one token of a host's budget.
type Reservation struct {
	// Wait is how long the caller must wait before sending.
	Wait time.Duration
	// Epoch is the host's epoch when the token was taken. When State's
	// Epoch has moved past it, a throttle has paused the host since, and
	// the token must not be used: reserve again.
	Epoch uint64
}

// State is a snapshot of one host's pacing.
type State struct {
	// PerMinute is the current rate; Configured the rate it recovers to
	// (Config.PerMinute or the host's override); Ceiling the cap set by
	// SetCeiling (0: none).
	PerMinute, Configured, Ceiling float64
	// PausedUntil is when a Retry-After pause ends; zero when not paused.
	PausedUntil time.Time
	// Epoch counts the pauses that started or grew (see Reservation).
	Epoch uint64
	// Target is the rate the recovery after the latest throttle aims at
	// (the last rate the host accepted); 0 before any throttle.
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

// New returns a Set configured by cfg.
func New(cfg Config) *Set {
	s := &Set{cfg: cfg.withDefaults()}
	s.hosts = newHosts(s.cfg.IdleTTL)
	return s
}

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

// State returns a snapshot of host's pacing. A host with no state is at
// its configured rate.
func (s *Set) State(host string) State {
	now := s.cfg.Now()
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := sh.Get(host)
	if e == nil {
		pm := s.configured(host)
		return State{PerMinute: pm, Configured: pm}
	}
	st := State{PerMinute: e.perMinute, Configured: e.configured, Ceiling: e.ceiling,
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
