// Package inflight holds the chain's per-host cap on attempts in flight.
//
// The cap follows what the host serves, not the rate it is paced at. Each
// host has a window, the most attempts let in at once:
//
//   - A host met for the first time starts at InitialWindow (2): what the
//     pacing allows at first contact is no measure of what the host serves.
//   - While the cap binds (every slot taken within the last round trip,
//     or attempts waiting) and an answer comes at about the host's base
//     latency (under 1.25 times it), the window grows: by one an answer
//     at first (slow start: it doubles each round trip), by one a round
//     trip once the host's latency has risen (or the window was cut) once;
//     never past twice what the host served in a base latency lately, as
//     the answers that show a queue come a round trip late.
//   - When the host's latency rises under our load (its fast average at
//     least 1.5 times its base, with more than one attempt in flight),
//     the window falls, at most once a round trip, to Little's law on what
//     the host serves: Headroom × served rate × base latency, at least 1.
//     A server that queues what it cannot serve yet thus keeps about
//     Headroom times the attempts it serves at once, and answers at about
//     Headroom times its service time, at its full throughput. Several
//     processes crawling it each count their own share of what it serves,
//     so their windows add up to about the same. A process that first
//     meets the host already queued by others would take that queue for
//     the host's base latency: the base the store learnt from every
//     worker's answers (SetRate) bounds its own from above.
//
// The cap in force is the window, at most Max, and at most Little's law on
// the host's pacing rate: ceil(rate × latency × Headroom), so a slowly
// paced host needs no more slots than its pace fills. A host that is simply
// far away, with a steady latency, is never cut: its answers come at its
// base latency, and its cap grows to rate × latency × Headroom.
//
// The base latency is the lowest time to headers seen, followed up over
// minutes (SlowTau) by a slow average, so that a host that became slower
// for good is not held to its old latency; the fast average takes a fifth
// of each answer. The served rate counts the answers of about the last two
// base latencies (an exponentially decaying count). An attempt that finds
// its host at its limit waits, first come first served, until one in
// flight ends or its context ends. A Limits starts no goroutine.
package inflight

import (
	"context"
	"math"
	"time"

	"github.com/egresskit/egresskit/internal/hostmap"
)

// Defaults of Config.
const (
	DefaultHeadroom = 1.5
	DefaultSlowTau  = 5 * time.Minute
	// InitialWindow is a new host's window.
	InitialWindow = 2
	// fastWeight is the weight of a sample in the fast EWMA.
	fastWeight = 0.2
	// rateTTL is how long a host's pacing rate is taken as known.
	rateTTL = time.Second
	// idleTTL is how long an idle host's estimates are kept.
	idleTTL = 30 * time.Minute
	// grow: an answer under grow times the base latency waited for no
	// queue at the host, and may grow the window.
	grow = 1.25
	// rise: the fast EWMA at rise times the base latency or more, with
	// more than one attempt in flight, is a queue of ours at the host.
	rise = 1.5
	// probeGain: the window grows to at most probeGain times what the
	// host served in a base latency lately.
	probeGain = 2
)

// Config configures a Limits.
type Config struct {
	Max      int              // the most attempts in flight per host; at least 1
	Headroom float64          // over Little's law; <= 0: DefaultHeadroom
	SlowTau  time.Duration    // how fast the base latency follows a slower host up; <= 0: DefaultSlowTau
	Now      func() time.Time // the clock; nil: time.Now
}

// Limits caps the attempts in flight per host. It is safe for concurrent
// use.
type Limits struct {
	cfg   Config
	hosts *hostmap.Map[entry, struct{}]
}

// entry is one host's state, guarded by its shard's lock.
type entry struct {
	n       int             // attempts in flight
	waiters []chan struct{} // FIFO; a closed channel holds a slot handed over
	win     float64         // the window, at least 1
	avoid   bool            // past slow start: the window grows by one a round trip
	fast    float64         // seconds; 0 before the first sample
	base    float64         // seconds
	sampled time.Time       // when base was last moved
	acks    float64         // answers, decaying over servedRounds base latencies
	ackAt   time.Time       // the last answer
	first   time.Time       // the first slot taken: the served rate's start
	cutAt   time.Time       // the window's last cut
	fullAt  time.Time       // when the last slot under the limit was taken
	perSec  float64         // the host's pacing rate; 0: unknown
	shared  float64         // seconds: the store's base latency for the host; 0: unknown
	rateAt  time.Time       // when perSec was set
	used    time.Time
	peak    int // the highest limit in force so far
	// rel gives back a slot of this entry: made once with the entry, so
	// that taking a slot allocates nothing.
	rel func()
}

// New returns a Limits configured by cfg.
func New(cfg Config) *Limits {
	if cfg.Max < 1 {
		cfg.Max = 1
	}
	if !(cfg.Headroom > 0) {
		cfg.Headroom = DefaultHeadroom
	}
	if cfg.SlowTau <= 0 {
		cfg.SlowTau = DefaultSlowTau
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limits{cfg: cfg, hosts: hostmap.New[entry, struct{}](hostmap.Config[entry]{
		IdleTTL: idleTTL,
		Used:    func(e *entry) time.Time { return e.used },
		Keep:    func(e *entry, _ time.Time) bool { return e.n > 0 || len(e.waiters) > 0 },
	})}
}

// Limit is Little's law with headroom: ceil(perSec × latency × headroom),
// at most max and at least 1. An unknown rate or latency (zero) gives 1.
func Limit(max int, perSec float64, latency time.Duration, headroom float64) int {
	x := perSec * latency.Seconds() * headroom
	if !(x > 1) {
		return 1
	}
	if x >= float64(max) {
		return max
	}
	return int(math.Ceil(x))
}

// limit is e's limit in force: the window, at most Max and at most what
// the host's pace needs at its latency. The shard is locked.
func (l *Limits) limit(e *entry) int {
	n := min(l.cfg.Max, max(int(e.win), 1))
	if e.fast > 0 && e.perSec > 0 {
		lat := min(e.fast, e.base)
		n = min(n, Limit(l.cfg.Max, e.perSec, time.Duration(lat*float64(time.Second)), l.cfg.Headroom))
	}
	e.peak = max(e.peak, n)
	return n
}

func (l *Limits) entry(sh *hostmap.Shard[entry, struct{}], key string, now time.Time) *entry {
	e := sh.Get(key)
	if e == nil {
		e = &entry{win: min(InitialWindow, float64(l.cfg.Max))}
		e.rel = func() {
			sh.Lock()
			l.release(e)
			sh.Unlock()
		}
		sh.Put(key, e)
	}
	e.used = now
	return e
}

// Acquire takes a slot for an attempt to key, waiting while the host is
// at its limit, and returns the func that gives it back (call it exactly
// once, when the attempt has ended; it is the host's, shared by its slots) and whether it waited, or ctx's error when
// ctx ends first.
func (l *Limits) Acquire(ctx context.Context, key string) (release func(), waited bool, err error) {
	now := l.cfg.Now()
	sh := l.hosts.Shard(key)
	sh.Lock()
	l.hosts.MaybeSweep(sh, now)
	e := l.entry(sh, key, now)
	if e.first.IsZero() {
		e.first = now
	}
	if lim := l.limit(e); len(e.waiters) == 0 && e.n < lim {
		if e.n++; e.n >= lim {
			e.fullAt = now
		}
		sh.Unlock()
		return e.rel, false, nil
	}
	ch := make(chan struct{})
	e.waiters = append(e.waiters, ch)
	sh.Unlock()
	select {
	case <-ch:
		return e.rel, true, nil
	case <-ctx.Done():
	}
	sh.Lock()
	defer sh.Unlock()
	select {
	case <-ch: // handed a slot meanwhile: give it on
		l.release(e)
	default:
		for i, w := range e.waiters {
			if w == ch {
				e.waiters = append(e.waiters[:i], e.waiters[i+1:]...)
				break
			}
		}
	}
	return nil, true, ctx.Err()
}

// release gives back a slot of e, handing it to waiters while e is
// under its limit. The shard is locked.
func (l *Limits) release(e *entry) {
	e.n--
	l.wake(e)
}

// wake hands slots to the first waiters while e is under its limit. The
// shard is locked.
func (l *Limits) wake(e *entry) {
	woke := false
	for len(e.waiters) > 0 && e.n < l.limit(e) {
		close(e.waiters[0])
		e.waiters[0] = nil
		e.waiters = e.waiters[1:]
		e.n++
		woke = true
	}
	if woke && e.n >= l.limit(e) {
		e.fullAt = l.cfg.Now()
	}
	if len(e.waiters) == 0 {
		e.waiters = nil
	}
}

// Observe feeds the time to headers of an answer of key (an attempt that
// still holds its slot: call it before the slot's release) to its latency
// estimates, its served rate and its window.
func (l *Limits) Observe(key string, ttfb time.Duration) {
	if ttfb <= 0 {
		return
	}
	now := l.cfg.Now()
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := l.entry(sh, key, now)
	l.observe(e, ttfb.Seconds(), now)
	l.wake(e)
}

// observe is Observe of a sample of s seconds at now. The shard is locked.
func (l *Limits) observe(e *entry, s float64, now time.Time) {
	// Whether the cap binds: it was reached within the last round trip
	// (the fast latency; this answer's, for the host's first), or
	// attempts wait.
	bound := len(e.waiters) > 0 || (!e.fullAt.IsZero() && now.Sub(e.fullAt) <= time.Duration(max(e.fast, s)*float64(time.Second)))
	if e.first.IsZero() {
		e.first = now
	}
	if e.fast == 0 {
		e.fast, e.base, e.sampled = s, s, now
	}
	if e.ackAt.IsZero() {
		e.acks = 1
	} else {
		e.acks = e.acks*math.Exp(-now.Sub(e.ackAt).Seconds()/tau(e)) + 1
	}
	e.ackAt = now
	e.fast += fastWeight * (s - e.fast)
	if s < e.base {
		e.base = s
	} else {
		w := 1 - math.Exp(-float64(now.Sub(e.sampled))/float64(l.cfg.SlowTau))
		e.base += w * (s - e.base)
	}
	e.boundBase()
	e.sampled = now
	switch {
	case e.fast >= rise*e.base && e.n > 1:
		// Our attempts queue at the host: down to what it serves, once
		// a round trip.
		if !e.cutAt.IsZero() && now.Sub(e.cutAt) < time.Duration(e.fast*float64(time.Second)) {
			return
		}
		e.cutAt, e.avoid = now, true
		if w := max(l.cfg.Headroom*served(e, now)*e.base, 1); w < e.win {
			e.win = w
		}
	case bound && s < grow*e.base:
		old := e.win
		if e.fast >= grow*e.base {
			e.avoid = true
		}
		if e.avoid {
			e.win += 1 / e.win
		} else {
			e.win++
		}
		// Never past probeGain times what the host served in a base
		// latency lately: the answers that show a queue come a round
		// trip late.
		e.win = max(min(e.win, float64(l.cfg.Max), probeGain*served(e, now)*e.base), old)
	}
}

// servedRounds is the time constant of the served rate, in base
// latencies.
const servedRounds = 2

// tau is the time constant of e's served rate, in seconds.
func tau(e *entry) float64 {
	return max(servedRounds*e.base, 1e-3)
}

// served is e's served rate, answers a second, at now: the decaying count
// of answers over its time constant, or over the time since the first slot
// was taken while that is shorter.
func served(e *entry, now time.Time) float64 {
	if e.ackAt.IsZero() {
		return 0
	}
	tau := tau(e)
	span := min(now.Sub(e.first).Seconds(), 5*tau)
	if span <= 0 {
		return 0
	}
	acks := e.acks * math.Exp(-now.Sub(e.ackAt).Seconds()/tau)
	return acks / (tau * -math.Expm1(-span/tau))
}

// NeedRate reports whether key's pacing rate is unknown or stale: the
// caller then reads it from the host's state and passes it to SetRate.
func (l *Limits) NeedRate(key string) bool {
	now := l.cfg.Now()
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := sh.Get(key)
	return e == nil || e.rateAt.IsZero() || now.Sub(e.rateAt) >= rateTTL
}

// SetRate sets key's pacing rate, in requests a minute, and the base
// latency the store learnt for it (0: the store does not say): the host's
// base latency is at most that, whatever this process saw behind others'
// attempts.
func (l *Limits) SetRate(key string, perMinute float64, base time.Duration) {
	now := l.cfg.Now()
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := l.entry(sh, key, now)
	e.perSec, e.rateAt = max(perMinute/60, 0), now
	if base > 0 {
		e.shared = base.Seconds()
		if e.fast > 0 {
			e.boundBase()
		}
	}
	l.wake(e)
}

// boundBase holds e's base latency to at most the store's (e.shared),
// once either is known.
func (e *entry) boundBase() {
	if e.shared > 0 && e.shared < e.base {
		e.base = e.shared
	}
}

// State is what Limits holds of one host, for tests and diagnostics.
type State struct {
	InFlight, Waiting int
	Limit             int     // in force now
	Peak              int     // the highest limit in force so far
	Window            float64 // the host's window (see the package doc)
	Latency           time.Duration
	Base              time.Duration // the base latency
	Served            float64       // answers a second, lately
}

// Of returns key's state.
func (l *Limits) Of(key string) State {
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := sh.Get(key)
	if e == nil {
		return State{Limit: min(l.cfg.Max, InitialWindow), Window: min(InitialWindow, float64(l.cfg.Max))}
	}
	n := l.limit(e)
	return State{InFlight: e.n, Waiting: len(e.waiters), Limit: n, Peak: e.peak, Window: e.win,
		Latency: time.Duration(min(e.fast, e.base) * float64(time.Second)),
		Base:    time.Duration(e.base * float64(time.Second)),
		Served:  served(e, l.cfg.Now())}
}
