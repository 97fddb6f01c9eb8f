// Package breaker keeps one circuit breaker per host, and the host halts.
//
// A Set holds a circuit breaker per host key (see package hostkey): a
// gobreaker v2 TwoStepCircuitBreaker (consecutive-failure trip, open
// timeout, half-open probes), created when the host is first seen and
// dropped when it is evicted. Around it the Set keeps only what gobreaker
// does not: halts, the open-until time an OpenError reports, generations
// for tickets, and the probe lease. Before an attempt the chain calls Allow: a
// halted host is refused with *HaltError, an open circuit with *OpenError,
// and otherwise the attempt is admitted with a Ticket. After the attempt
// the chain passes the ticket and the attempt's classify.Result to Done,
// which reports the Effect:
//
//   - OK counts as a success: it resets the consecutive-failure count, and in
//     the half-open state HalfOpenProbes consecutive successes close the
//     circuit.
//   - Transient and Throttled (classify.Result.HostFailure) count as
//     failures: FailureThreshold consecutive failures open the circuit for
//     OpenTimeout, and any failure of a half-open probe reopens it. In the
//     egresskit chain a throttle is pacing's business: package hoststate
//     hands a Throttled result to the breaker only when the host's pacing
//     is already at its floor (see hoststate.Store.Record), and as a
//     neutral outcome before that.
//   - Permanent (a dead URL), Canceled (the caller gave up) and Refused are
//     neutral: they neither reset nor add to the failure count, and a
//     neutral probe frees its half-open slot for the next attempt. A
//     Refused outcome halts the host instead (below): it is the halt's
//     evidence, not a failure, so that several refusals in flight at once
//     do not also open the circuit, and a resumed host is sendable at once.
//
// A half-open probe holds its slot for at most OpenTimeout: when every
// slot is taken and a probe was admitted OpenTimeout ago or more without
// its outcome being recorded (its response body was never closed), the
// next Allow counts that probe as neutral and admits a new probe in its
// place; the late outcome, if it ever comes, is ignored. The bound is the
// same in every store: redisstore's probe lease defaults to OpenTimeout.
//
// Outcomes of attempts admitted before the circuit last changed state are
// ignored. A Refused outcome also halts the host, in the same step: Allow
// then refuses it with *HaltError until Resume. Halt halts a host by hand.
//
// State is kept small (under 1 KiB per host) and a host idle for
// IdleTTL is forgotten, except that an open circuit is kept until its open
// period has ended and a halt is kept until it is resumed. Eviction runs
// lazily, a shard at a time, on the calls that touch the shard, and on
// demand with Evict; the Set starts no goroutine.
//
// The breakers take time from time.Now, read by Allow and Done or given to
// AllowAt and DoneAt (gobreaker reads time.Now itself); test timing with
// testing/synctest. gobreaker calls its state-change hook under its own
// lock; the Set's hook only notes the change, and OnStateChange is called
// once every lock is released.
package breaker

import (
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/internal/hostmap"
	"github.com/sony/gobreaker/v2"
)

// State is the state of a host's circuit.
type State uint8

// The circuit states, in gobreaker's order.
const (
	Closed State = iota
	HalfOpen
	Open
)

var stateNames = [...]string{"closed", "half-open", "open"}

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Config configures a Set. The zero value uses every default.
type Config struct {
	// FailureThreshold is the number of consecutive host failures that
	// opens a host's circuit. Zero: 8. Negative: refused by New (the
	// breaker cannot be switched off).
	FailureThreshold int
	// OpenTimeout is how long an open circuit refuses attempts before it
	// admits a half-open probe. Zero: 300s. Negative: refused by New.
	OpenTimeout time.Duration
	// HalfOpenProbes is how many probes a half-open circuit admits, and how
	// many consecutive successes close it. Zero: 1. Negative: refused by
	// New.
	HalfOpenProbes int
	// IdleTTL is how long a host's state is kept after its last use.
	// Open circuits are kept until their open period ends, halts until
	// resumed. Default (0): 10 minutes; negative: never evict.
	IdleTTL time.Duration
	// OnStateChange, if not nil, is called after every change of a host's
	// circuit state, outside any lock of the Set (it may call the Set). It
	// may be called concurrently from several goroutines; At orders the
	// changes of one host. The change from open to half-open is noticed,
	// and reported, by the first call that looks at the host after
	// OpenTimeout.
	OnStateChange func(StateChange)
}

// DefaultConfig returns the Config with every default filled in.
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

// check refuses the settings that cannot be off, when negative. The error
// wraps egresskit.ErrInvalidConfig and names the field.
func (c Config) check() error {
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

func (c Config) withDefaults() Config {
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = 8
	}
	if c.OpenTimeout <= 0 {
		c.OpenTimeout = 300 * time.Second
	}
	if c.HalfOpenProbes <= 0 {
		c.HalfOpenProbes = 1
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = 10 * time.Minute
	}
	return c
}

// StateChange describes one change of a host's circuit state.
type StateChange struct {
	Host     string
	From, To State
	At       time.Time
}

// Ticket is the admission of one attempt, returned by Allow and passed back
// to Done. The zero Ticket admits nothing.
type Ticket struct {
	// Generation identifies the circuit state that admitted the attempt;
	// Done ignores a ticket from an older generation.
	Generation uint64
	// Probe is true when the attempt is a half-open probe.
	Probe bool

	slot uint32      // the probe's slot (see probes)
	done func(error) // gobreaker's callback recording the attempt
}

// Status is a snapshot of one host.
type Status struct {
	Host  string
	State State
	// ConsecutiveFailures counted towards opening (closed state).
	ConsecutiveFailures int
	// OpenUntil is when an open circuit admits its first probe; zero unless
	// State is Open.
	OpenUntil time.Time
	// Halted reports a halt; HaltedAt is when it began.
	Halted   bool
	HaltedAt time.Time
}

// Counts is the number of tracked hosts in each state, for a gauge. A
// halted host counts as Halted only, so the four add up to the number of
// hosts tracked. Hosts never seen or evicted are not counted (they are
// closed).
type Counts struct {
	Closed, HalfOpen, Open, Halted int
}

// Set holds the circuit breakers and halts of many hosts. It is safe for
// concurrent use.
type Set struct {
	cfg       Config
	threshold uint32 // FailureThreshold
	probes    uint32 // HalfOpenProbes
	gb        gobreaker.Settings
	hosts     *hostmap.Map[entry, shardState]
}

// New returns a Set configured by cfg, or an error wrapping
// egresskit.ErrInvalidConfig that names the field cfg cannot honour.
func New(cfg Config) (*Set, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg.withDefaults()}
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
// *HaltError (errors.Is ErrHalted) when the host is halted, and an
// *OpenError (errors.Is ErrOpen) when its circuit is open or half-open with
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
	var buf [2]StateChange
	sh.Lock()
	e := s.entry(sh, host, now)
	e.used = now
	var t Ticket
	var err error
	if !e.halted.IsZero() {
		err = &HaltError{Host: host, HaltedAt: e.halted}
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
	From, To State
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
	var buf [2]StateChange
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
	var buf [2]StateChange
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
	if st.State == Open {
		st.OpenUntil = e.openUntil
	}
	changes := take(sh, buf[:0])
	sh.Unlock()
	s.deliver(changes)
	return st
}

// Counts returns the number of tracked hosts in each state. It visits every
// host, so it suits a gauge scraped every few seconds, not the request path.
func (s *Set) Counts() Counts {
	var c Counts
	for sh := range s.hosts.Shards() {
		sh.Lock()
		for _, e := range sh.All() {
			switch {
			case !e.halted.IsZero():
				c.Halted++
			default:
				s.lapse(e)
				switch e.state {
				case Closed:
					c.Closed++
				case HalfOpen:
					c.HalfOpen++
				case Open:
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
func (s *Set) deliver(changes []StateChange) {
	for _, c := range changes {
		s.cfg.OnStateChange(c)
	}
}
