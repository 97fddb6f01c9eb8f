// Package circuits is the engine of the in-memory store's per-host circuit
// breakers and halts (see package breaker for what they do): a Set of
// gobreaker v2 TwoStepCircuitBreakers, one per host key, with the halts,
// the open-until time, generations for tickets and the probe lease kept
// around them. Before an attempt the store calls Allow; after it, Done
// with the Ticket and the attempt's classify.Result, which reports the
// Effect.
//
// State is kept small (under 1 KiB per host). Eviction runs lazily, a
// shard at a time, on the calls that touch the shard, and on demand with
// Evict; the Set starts no goroutine. The breakers take time from
// time.Now, read by Allow and Done or given to AllowAt and DoneAt
// (gobreaker reads time.Now itself); test timing with testing/synctest.
// gobreaker calls its state-change hook under its own lock; the Set's hook
// only notes the change, and OnStateChange is called once every lock is
// released.
package circuits

import (
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/internal/hostmap"
	"github.com/sony/gobreaker/v2"
)

// Ticket is the admission of one attempt, returned by Allow and passed back
// to Done. The zero Ticket admits nothing.
type Ticket struct {
	// Generation identifies the circuit state that admitted the attempt;
	// Done ignores a ticket from an older generation.
	Generation uint64
	// Probe is true when the attempt is a half-open probe.
	Probe bool

	slot uint32      // the probe's slot (see probes)
	done func(error) // gobreaker's callback recording a half-open probe
	// closed is set for an attempt admitted by a closed circuit, which
	// gobreaker is asked about when its outcome is recorded (see allow).
	closed bool
}

// Status is a snapshot of one host.
type Status struct {
	Host  string
	State breaker.State
	// ConsecutiveFailures counted towards opening (closed state).
	ConsecutiveFailures int
	// OpenUntil is when an open circuit admits its first probe; zero unless
	// State is breaker.Open.
	OpenUntil time.Time
	// Halted reports a halt; HaltedAt is when it began.
	Halted   bool
	HaltedAt time.Time
}

// Set holds the circuit breakers and halts of many hosts. It is safe for
// concurrent use.
type Set struct {
	cfg       breaker.Config
	threshold uint32 // FailureThreshold
	probes    uint32 // HalfOpenProbes
	gb        gobreaker.Settings
	hosts     *hostmap.Map[entry, shardState]
}

// New returns a Set configured by cfg, or an error wrapping
// egresskit.ErrInvalidConfig that names the field cfg cannot honour.
func New(cfg breaker.Config) (*Set, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	s := &Set{cfg: withDefaults(cfg)}
	s.threshold = uint32(min(s.cfg.FailureThreshold, 1<<31))
	s.probes = uint32(min(s.cfg.HalfOpenProbes, 1<<31))
	s.gb = s.settings()
	s.hosts = newHosts(s.cfg.IdleTTL)
	return s, nil
}

// entry is one host's state; its fields are guarded by its shard's lock.
type entry struct {
	circuit
	halted time.Time // zero: not halted
	used   time.Time
}

// Allow decides whether one attempt to host may be sent. It returns a
// *breaker.HaltError (errors.Is egresskit.ErrHalted) when the host is halted, and an
// *breaker.OpenError (errors.Is egresskit.ErrOpen) when its circuit is open or half-open with
// every probe slot taken. Otherwise it admits the attempt; the caller must
// pass the Ticket to Done once the attempt's outcome is known (a Canceled
// result when it is not sent after all).
func (s *Set) Allow(host string) (Ticket, error) {
	return s.AllowAt(host, time.Now())
}

// AllowAt is Allow with the time already read: now must come from
// time.Now, the breakers' clock, so that a caller that also needs the time
// of the attempt (hoststate.Memory, for its pacing) reads the clock once.
func (s *Set) AllowAt(host string, now time.Time) (Ticket, error) {
	sh := s.hosts.Shard(host)
	var buf [2]breaker.StateChange
	sh.Lock()
	e := s.entry(sh, host, now)
	e.used = now
	var t Ticket
	var err error
	if !e.halted.IsZero() {
		err = &breaker.HaltError{Host: host, HaltedAt: e.halted}
	} else {
		t, err = s.allow(host, e, now)
	}
	s.hosts.MaybeSweep(sh, now)
	changes := take(sh, buf[:0])
	sh.Unlock()
	s.deliver(changes)
	return t, err
}

// Effect is what Done changed.
type Effect struct {
	// From and To are the circuit states before and after.
	From, To breaker.State
	// Halted is true when this Done halted the host (a Refused outcome on a
	// host not yet halted): the caller escalates exactly when it is true.
	Halted bool
}

// Done records the outcome of an attempt admitted by Allow and reports the
// change. A Refused outcome also halts the host, in the same step, whatever
// the ticket. Otherwise a ticket from an older generation, a zero ticket, or
// a host whose state was evicted changes nothing.
func (s *Set) Done(host string, t Ticket, r classify.Result) Effect {
	return s.DoneAt(host, t, r, time.Now())
}

// DoneAt is Done with the time already read: now must come from time.Now,
// as for AllowAt.
func (s *Set) DoneAt(host string, t Ticket, r classify.Result, now time.Time) Effect {
	sh := s.hosts.Shard(host)
	var buf [2]breaker.StateChange
	sh.Lock()
	e := sh.Get(host)
	if e == nil {
		if r.Outcome != classify.Refused {
			sh.Unlock()
			return Effect{}
		}
		e = s.entry(sh, host, now)
	}
	e.used = now
	s.lapse(e)
	eff := Effect{From: e.state}
	s.done(e, t, r)
	eff.To = e.state
	if r.Outcome == classify.Refused && e.halted.IsZero() {
		e.halted, eff.Halted = now, true
	}
	changes := take(sh, buf[:0])
	sh.Unlock()
	s.deliver(changes)
	return eff
}

// Status returns a snapshot of host. A host with no state is closed.
func (s *Set) Status(host string) Status {
	sh := s.hosts.Shard(host)
	var buf [2]breaker.StateChange
	sh.Lock()
	e := sh.Get(host)
	if e == nil {
		sh.Unlock()
		return Status{Host: host}
	}
	s.lapse(e)
	st := Status{
		Host:                host,
		State:               e.state,
		ConsecutiveFailures: int(e.cb.Counts().ConsecutiveFailures),
		Halted:              !e.halted.IsZero(),
		HaltedAt:            e.halted,
	}
	if st.State == breaker.Open {
		st.OpenUntil = e.openUntil
	}
	changes := take(sh, buf[:0])
	sh.Unlock()
	s.deliver(changes)
	return st
}

// Counts returns the number of tracked hosts in each state. It visits every
// host, so it suits a gauge scraped every few seconds, not the request path.
func (s *Set) Counts() breaker.Counts {
	var c breaker.Counts
	for sh := range s.hosts.Shards() {
		sh.Lock()
		for _, e := range sh.All() {
			switch {
			case !e.halted.IsZero():
				c.Halted++
			default:
				s.lapse(e)
				switch e.state {
				case breaker.Closed:
					c.Closed++
				case breaker.HalfOpen:
					c.HalfOpen++
				case breaker.Open:
					c.Open++
				}
			}
		}
		changes := take(sh, nil)
		sh.Unlock()
		s.deliver(changes)
	}
	return c
}

// deliver calls the hook with changes; no lock is held.
func (s *Set) deliver(changes []breaker.StateChange) {
	for _, c := range changes {
		s.cfg.OnStateChange(c)
	}
}

// check refuses the settings that cannot be off, when negative. The error
// wraps egresskit.ErrInvalidConfig and names the field.
func check(c breaker.Config) error {
	switch {
	case c.FailureThreshold < 0:
		return configerr.Field("FailureThreshold", "is %d: the breaker cannot be off (0 means 8)", c.FailureThreshold)
	case c.OpenTimeout < 0:
		return configerr.Field("OpenTimeout", "is %v, negative (0 means 300s)", c.OpenTimeout)
	case c.HalfOpenProbes < 0:
		return configerr.Field("HalfOpenProbes", "is %d, negative (0 means 1)", c.HalfOpenProbes)
	}
	return nil
}

// DefaultConfig returns the breaker.Config with every default filled in:
// what its zero value means (the stores fill a zero field from it).
func DefaultConfig() breaker.Config {
	return breaker.Config{FailureThreshold: 8, OpenTimeout: 300 * time.Second, HalfOpenProbes: 1, IdleTTL: 10 * time.Minute}
}

func withDefaults(c breaker.Config) breaker.Config {
	d := DefaultConfig()
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = d.FailureThreshold
	}
	if c.OpenTimeout <= 0 {
		c.OpenTimeout = d.OpenTimeout
	}
	if c.HalfOpenProbes <= 0 {
		c.HalfOpenProbes = d.HalfOpenProbes
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = d.IdleTTL
	}
	return c
}
