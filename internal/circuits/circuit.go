package circuits

import (
	"errors"
	"slices"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/sony/gobreaker/v2"
)

// circuit is one host's circuit breaker: a gobreaker TwoStepCircuitBreaker
// (consecutive-failure trip, open timeout, half-open probes, no counting
// interval), created with the host's entry and dropped with it, and what
// the chain needs beside it. gobreaker keeps the state machine and the
// counts it decides on; the circuit keeps a copy of the state and the
// open-until time (for breaker.OpenError and eviction, both written by the
// state-change hook), the generation of the Set's tickets, whether the
// closed state counts a failure, and the half-open probes in flight with
// their admission times, for the probe lease. On the hot path, a closed
// circuit's admission and a success that follows a success, gobreaker is
// not called (see allow and done): its answer there is known, and what it
// would count there decides nothing.
//
// Every call into cb is made with the host's shard locked, so that the
// hook gobreaker calls under its own lock runs on the goroutine that holds
// the shard, and may update the entry without locking anything; it never
// calls back into cb.
type circuit struct {
	cb    *gobreaker.TwoStepCircuitBreaker[struct{}]
	gen   uint64        // the generation: a shard-wide counter, never 0
	state breaker.State // cb's state, as of its last change
	// failing is set while cb's closed state counts a failure since its
	// last success: a success must then be told to cb (see done).
	failing   bool
	openUntil time.Time
	probes    *probes // the half-open probes in flight; nil when none
}

// probes are the half-open probes of one generation still in flight.
type probes struct {
	seq    uint32 // last slot handed out
	flight []probe
}

// probe is one half-open probe in flight: its slot, when it was admitted,
// and gobreaker's callback that records it (nil once its lease expired).
type probe struct {
	slot uint32
	at   time.Time
	done func(error)
}

// The errors a circuit gives gobreaker's callbacks: a host failure, and a
// neutral outcome (excluded, counted neither way). A success is nil.
var (
	errFailure = errors.New("breaker: host failure")
	errNeutral = errors.New("breaker: neutral outcome")
)

// settings returns the gobreaker settings of every host of s.
func (s *Set) settings() gobreaker.Settings {
	threshold := s.threshold
	return gobreaker.Settings{
		MaxRequests:   s.probes,
		Timeout:       s.cfg.OpenTimeout,
		ReadyToTrip:   func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful:  func(err error) bool { return err == nil },
		IsExcluded:    func(err error) bool { return err == errNeutral },
		OnStateChange: s.changed,
	}
}

// allow admits one attempt to e's circuit or refuses it with an
// *breaker.OpenError. A half-open circuit whose probe slots are all taken first
// frees the slots of probes admitted at least OpenTimeout ago (their
// outcome is counted neutral, and ignored when it comes). sh must be
// locked.
//
// A closed circuit admits every attempt: gobreaker's Allow admits in the
// closed state unconditionally, and with no counting interval (the
// Settings set none) the closed state has one generation, which ends only
// when an outcome gobreaker is told trips it, through the state-change hook
// that moves e.gen. So the attempt is admitted on e's state alone, without
// the callback Allow would allocate; done asks gobreaker for it and records
// the outcome in one step, once it is known and if the generation that
// admitted it still holds (a success that finds no failure to reset is
// not told). gobreaker still decides: it counts the failures and trips the
// circuit (TestSameAsGobreaker checks both agree step by step).
func (s *Set) allow(host string, e *entry, now time.Time) (Ticket, error) {
	if e.state == breaker.Closed {
		return Ticket{Generation: e.gen, closed: true}, nil
	}
	done, err := e.cb.Allow()
	if err == gobreaker.ErrTooManyRequests && s.expire(e, now) {
		done, err = e.cb.Allow()
	}
	switch err {
	case nil:
	case gobreaker.ErrOpenState:
		return Ticket{}, &breaker.OpenError{Host: host, Until: e.openUntil}
	default: // ErrTooManyRequests
		return Ticket{}, &breaker.OpenError{Host: host}
	}
	t := Ticket{Generation: e.gen, done: done}
	if e.state == breaker.HalfOpen {
		if e.probes == nil {
			e.probes = &probes{}
		}
		p := e.probes
		p.seq++
		p.flight = append(p.flight, probe{slot: p.seq, at: now, done: done})
		t.Probe, t.slot = true, p.seq
	}
	return t, nil
}

// expire frees the slots of e's probes admitted at least OpenTimeout
// before now, recording them as neutral, and reports whether it freed
// any. An expired probe stays in the list, marked, so that its late
// outcome is ignored. sh must be locked.
func (s *Set) expire(e *entry, now time.Time) bool {
	p := e.probes
	if p == nil {
		return false
	}
	freed := false
	for i := range p.flight {
		q := &p.flight[i]
		if q.done == nil || now.Sub(q.at) < s.cfg.OpenTimeout {
			continue
		}
		done := q.done
		q.done, freed = nil, true
		done(errNeutral)
	}
	return freed
}

// done records r, the outcome of the attempt t admitted, unless t is from
// an older generation or is a probe whose lease expired. sh must be
// locked.
func (s *Set) done(e *entry, t Ticket, r classify.Result) {
	if (t.done == nil && !t.closed) || t.Generation != e.gen {
		return
	}
	var outcome error // nil: a success
	switch {
	case r.Outcome == classify.OK:
	case HostFailure(r):
		outcome = errFailure
	default: // Permanent, Canceled, Refused (it halts), and any unknown outcome
		outcome = errNeutral
	}
	if t.closed {
		// Admitted by the closed circuit of this generation (see allow).
		// A success with no failure counted since gobreaker's last
		// success changes nothing gobreaker decides on (the consecutive
		// failures stay 0; its other counts are statistics it clears on
		// the next state change), so the hot path skips gobreaker's lock,
		// clock read and callback. Any other outcome is told to gobreaker:
		// it admits the attempt now and records the outcome, and may trip
		// the circuit (the hook then clears failing).
		if outcome == nil && !e.failing {
			return
		}
		if outcome != errNeutral {
			e.failing = outcome == errFailure
		}
		if done, err := e.cb.Allow(); err == nil {
			done(outcome)
		}
		return
	}
	if p := e.probes; t.Probe && p != nil {
		if i := slices.IndexFunc(p.flight, func(q probe) bool { return q.slot == t.slot }); i >= 0 {
			if p.flight[i].done == nil {
				return // its lease expired: it was counted neutral
			}
			p.flight = slices.Delete(p.flight, i, i+1)
		}
	}
	t.done(outcome)
}

// lapse turns e's open circuit half-open once its open period has passed:
// gobreaker notices it when asked for the state. sh must be locked.
func (s *Set) lapse(e *entry) {
	if e.state == breaker.Open {
		e.cb.State()
	}
}

// changed is gobreaker's state-change hook. gobreaker calls it under its
// own lock, from a call the Set made with host's shard locked: it updates
// the entry and queues the change for OnStateChange, delivered once the
// shard is unlocked, and never calls into the breaker.
func (s *Set) changed(host string, from, to gobreaker.State) {
	sh := s.hosts.Shard(host)
	e := sh.Get(host)
	if e == nil {
		return
	}
	now := time.Now()
	sh.Local.gen++
	e.gen, e.state, e.probes, e.failing = sh.Local.gen, breaker.State(to), nil, false
	e.openUntil = time.Time{}
	if e.state == breaker.Open {
		e.openUntil = now.Add(s.cfg.OpenTimeout)
	}
	if s.cfg.OnStateChange != nil {
		sh.Local.pending = append(sh.Local.pending, breaker.StateChange{Host: host, From: breaker.State(from), To: breaker.State(to), At: now})
	}
}

// HostFailure reports whether the attempt counts against the host's circuit
// breaker: Transient and Throttled do; OK, Permanent and Canceled do not,
// and neither does a failure of the egress route (Result.Egress). Refused
// does not either: a refusal halts the host, and is the halt's evidence
// rather than a failure, so that a host an operator resumes is sendable at
// once.
func HostFailure(r classify.Result) bool {
	if r.Egress {
		return false
	}
	return r.Outcome == classify.Transient || r.Outcome == classify.Throttled
}
