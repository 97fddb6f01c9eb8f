package breaker

import (
	"time"

	"github.com/egresskit/egresskit/classify"
)

// circuit is one host's circuit breaker: gobreaker's state machine
// (TwoStepCircuitBreaker with no counting interval), for the settings of a
// Set, kept in the host's entry and run under its shard's lock with the
// time the caller read.
//
//   - Closed admits every attempt; FailureThreshold consecutive failures
//     open it, a success resets the count.
//   - Open refuses every attempt until OpenTimeout has passed since it
//     opened (strictly after openUntil), then turns half-open.
//   - HalfOpen admits HalfOpenProbes probes, less those that ended
//     neutral; that many consecutive successes close it, a failure opens
//     it again.
//
// Every change of state starts a new generation and clears the counts;
// the outcome of an attempt admitted in an older generation is ignored.
// Neutral outcomes (Permanent, Canceled) count neither way.
type circuit struct {
	gen       uint64 // the generation: a shard-wide counter, never 0
	state     State
	openUntil time.Time // when an open circuit turns half-open
	failures  uint32    // consecutive failures
	successes uint32    // consecutive successes
	// requests counts the attempts admitted in this generation, neutral
	// the neutral outcomes recorded in it: a half-open circuit has used
	// requests - neutral (at least 0) of its probe slots.
	requests, neutral uint32
}

// allow admits one attempt to e's circuit or refuses it with an
// *OpenError. sh must be locked.
func (s *Set) allow(sh *shard, host string, e *entry, now time.Time) (Ticket, error) {
	s.lapse(sh, host, e, now)
	switch e.state {
	case Open:
		return Ticket{}, &OpenError{Host: host, Until: e.openUntil}
	case HalfOpen:
		if e.requests-min(e.neutral, e.requests) >= s.probes {
			return Ticket{}, &OpenError{Host: host}
		}
	}
	e.requests++
	return Ticket{Generation: e.gen, Probe: e.state == HalfOpen}, nil
}

// done records r, the outcome of an attempt admitted in e's current
// generation. sh must be locked.
func (s *Set) done(sh *shard, host string, e *entry, r classify.Result, now time.Time) {
	switch {
	case r.Outcome == classify.OK:
		e.failures = 0
		e.successes++
		if e.state == HalfOpen && e.successes >= s.probes {
			s.change(sh, host, e, Closed, now)
		}
	case r.HostFailure():
		e.successes = 0
		e.failures++
		if e.state == HalfOpen || e.failures >= s.threshold {
			s.change(sh, host, e, Open, now)
		}
	default: // Permanent, Canceled, and any unknown outcome
		e.neutral++
	}
}

// lapse turns e's open circuit half-open once its open period has passed.
// sh must be locked.
func (s *Set) lapse(sh *shard, host string, e *entry, now time.Time) {
	if e.state == Open && e.openUntil.Before(now) {
		s.change(sh, host, e, HalfOpen, now)
	}
}

// change moves e's circuit to state to at now, in a new generation, and
// queues the change for OnStateChange. sh must be locked.
func (s *Set) change(sh *shard, host string, e *entry, to State, now time.Time) {
	from := e.state
	sh.Local.gen++
	e.circuit = circuit{gen: sh.Local.gen, state: to}
	if to == Open {
		e.openUntil = now.Add(s.cfg.OpenTimeout)
	}
	if s.cfg.OnStateChange != nil {
		sh.Local.pending = append(sh.Local.pending, StateChange{Host: host, From: from, To: to, At: now})
	}
}
