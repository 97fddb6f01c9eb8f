// Package inflight holds the chain's per-host cap on attempts in flight.
//
// The cap in force for a host is Little's law with headroom:
//
//	limit = min(Max, ceil(rate × latency × Headroom)), at least 1
//
// where rate is the host's current pacing rate (requests a second) and
// latency the host's time to headers: the lower of a fast EWMA of it (a
// fifth of each sample) and a slow one that follows it over minutes
// (SlowTau). The slow one keeps the queue that our own attempts build at
// a slow server from raising the cap that lets them in: at such a server
// the fast EWMA rises with every attempt let in, and a cap following it
// would rise with it. A host that is simply far away, with a steady
// latency, has both at its latency and is not penalised.
//
// When a host's latency rises under our load all the same (the fast EWMA
// a quarter above the slow one, with more than one attempt in flight),
// the limit counts a lower share of the host's pace: a fifth less each
// round trip while it stays risen, a tenth of the pace back each round
// trip once it is not. So a slow server's queue of our attempts drains
// towards the requests it serves at once, at its full throughput. Until a
// host's
// rate and first latency sample are known, its limit is Max: the pacing
// alone holds it.
//
// An attempt that finds its host at its limit waits, first come first
// served, until one in flight ends or its context ends. A Limits starts
// no goroutine.
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
	// fastWeight is the weight of a sample in the fast EWMA.
	fastWeight = 0.2
	// rateTTL is how long a host's pacing rate is taken as known.
	rateTTL = time.Second
	// idleTTL is how long an idle host's estimates are kept.
	idleTTL = 30 * time.Minute
	// rise is how far above the slow EWMA the fast one must be for the
	// host's latency to count as risen under our load.
	rise = 1.25
	// cut and regain adjust the share of the pace a host is sent at while
	// its latency is risen, and after.
	cut, regain = 0.8, 0.1
)

// Config configures a Limits.
type Config struct {
	Max      int              // the most attempts in flight per host; at least 1
	Headroom float64          // over Little's law; <= 0: DefaultHeadroom
	SlowTau  time.Duration    // time constant of the slow EWMA; <= 0: DefaultSlowTau
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
	fast    float64         // seconds; 0 before the first sample
	slow    float64         // seconds
	sampled time.Time       // when slow was last moved
	perSec  float64         // the host's pacing rate; 0: unknown
	share   float64         // of perSec that the limit counts, (0, 1]; 0 means 1
	turned  time.Time       // when share was last changed
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

// limit is e's limit in force. The shard is locked.
func (l *Limits) limit(e *entry) int {
	if e.fast == 0 || e.perSec == 0 {
		return l.cfg.Max // nothing known yet: the pacing alone
	}
	lat := min(e.fast, e.slow)
	perSec := e.perSec
	if e.share > 0 {
		perSec *= e.share
	}
	n := Limit(l.cfg.Max, perSec, time.Duration(lat*float64(time.Second)), l.cfg.Headroom)
	e.peak = max(e.peak, n)
	return n
}

func (l *Limits) entry(sh *hostmap.Shard[entry, struct{}], key string, now time.Time) *entry {
	e := sh.Get(key)
	if e == nil {
		e = &entry{}
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
	if len(e.waiters) == 0 && e.n < l.limit(e) {
		e.n++
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
	for len(e.waiters) > 0 && e.n < l.limit(e) {
		close(e.waiters[0])
		e.waiters[0] = nil
		e.waiters = e.waiters[1:]
		e.n++
	}
	if len(e.waiters) == 0 {
		e.waiters = nil
	}
}

// Observe feeds a time to headers of key to its latency estimates.
func (l *Limits) Observe(key string, ttfb time.Duration) {
	if ttfb <= 0 {
		return
	}
	now := l.cfg.Now()
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := l.entry(sh, key, now)
	s := ttfb.Seconds()
	if e.fast == 0 {
		e.fast, e.slow, e.sampled = s, s, now
	} else {
		e.fast += fastWeight * (s - e.fast)
		w := 1 - math.Exp(-float64(now.Sub(e.sampled))/float64(l.cfg.SlowTau))
		e.slow += w * (s - e.slow)
		e.sampled = now
		l.adapt(e, now)
	}
	l.wake(e)
}

// adapt lowers the share of the pace that e's limit counts while e's
// latency is risen under our load (the fast EWMA above rise × the slow
// one with more than one attempt in flight), by cut once a round trip,
// and gives it back by regain a round trip once it is not. The shard is
// locked.
func (l *Limits) adapt(e *entry, now time.Time) {
	share := e.share
	if share == 0 {
		share = 1
	}
	risen := e.fast > rise*e.slow && e.n > 1
	if (!risen && share == 1) || now.Sub(e.turned) < time.Duration(e.fast*float64(time.Second)) {
		return
	}
	if risen {
		share = max(share*cut, 1/float64(l.cfg.Max))
	} else {
		share = min(share+regain, 1)
	}
	e.share, e.turned = share, now
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

// SetRate sets key's pacing rate, in requests a minute.
func (l *Limits) SetRate(key string, perMinute float64) {
	now := l.cfg.Now()
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := l.entry(sh, key, now)
	e.perSec, e.rateAt = max(perMinute/60, 0), now
	l.wake(e)
}

// State is what Limits holds of one host, for tests and diagnostics.
type State struct {
	InFlight, Waiting int
	Limit             int // in force now
	Peak              int // the highest limit computed from a known rate and latency so far
	Latency           time.Duration
}

// Of returns key's state.
func (l *Limits) Of(key string) State {
	sh := l.hosts.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	e := sh.Get(key)
	if e == nil {
		return State{Limit: l.cfg.Max}
	}
	n := l.limit(e)
	return State{InFlight: e.n, Waiting: len(e.waiters), Limit: n, Peak: e.peak,
		Latency: time.Duration(min(e.fast, e.slow) * float64(time.Second))}
}
