// Package breaker configures the circuit breaker every host store keeps
// per host, and names its states and errors.
//
// Each host has a gobreaker v2 TwoStepCircuitBreaker (consecutive-failure
// trip, open timeout, half-open probes), created when the host is first
// seen and dropped when it is evicted; around it the store keeps halts, the
// open-until time an OpenError reports, and the probe lease. Before an
// attempt a halted host is refused with *HaltError, an open circuit with
// *OpenError. After the attempt its classify.Result counts:
//
//   - OK counts as a success: it resets the consecutive-failure count, and in
//     the half-open state HalfOpenProbes consecutive successes close the
//     circuit.
//   - Transient and Throttled (but not a failure of the egress route,
//     classify.Result.Egress) count as
//     failures: FailureThreshold consecutive failures open the circuit for
//     OpenTimeout, and any failure of a half-open probe reopens it. In the
//     egresskit chain a throttle is pacing's business: package hoststate
//     hands a Throttled result to the breaker only when the host's pacing
//     is already at its floor (see hoststate.Store.Record), and as a
//     neutral outcome before that.
//   - Permanent (a dead URL), Canceled (the caller gave up) and Refused are
//     neutral: they neither reset nor add to the failure count, and a
//     neutral probe frees its half-open slot for the next attempt. A
//     Refused outcome halts the host instead: it is the halt's evidence,
//     not a failure, so that several refusals in flight at once do not also
//     open the circuit, and a resumed host is sendable at once. A halted
//     host is refused until it is resumed.
//
// A half-open probe holds its slot for at most OpenTimeout: when every
// slot is taken and a probe was admitted OpenTimeout ago or more without
// its outcome being recorded (its response body was never closed), the
// next attempt counts that probe as neutral and is admitted as a new probe
// in its place. The bound is the same in every store: redisstore's probe
// lease defaults to OpenTimeout. Outcomes of attempts admitted before the
// circuit last changed state are ignored.
//
// A host idle for IdleTTL is forgotten, except that an open circuit is kept
// until its open period has ended and a halt is kept until it is resumed.
//
// The breakers are configured through hoststate.Config.Breaker (the
// in-memory store) or redisstore.Config.HostState.Breaker (the fleet's).
package breaker

import "time"

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

// Config configures the breakers of a host store (hoststate.Config.Breaker,
// redisstore.Config.HostState.Breaker). The zero value uses every default;
// the store's constructor refuses a setting out of range, naming it.
type Config struct {
	// FailureThreshold is the number of consecutive host failures that
	// opens a host's circuit. Zero: 8. Negative: refused (the breaker cannot
	// be switched off).
	FailureThreshold int
	// OpenTimeout is how long an open circuit refuses attempts before it
	// admits a half-open probe. Zero: 300s. Negative: refused.
	OpenTimeout time.Duration
	// HalfOpenProbes is how many probes a half-open circuit admits, and how
	// many consecutive successes close it. Zero: 1. Negative: refused.
	HalfOpenProbes int
	// IdleTTL is how long a host's state is kept after its last use.
	// Open circuits are kept until their open period ends, halts until
	// resumed. Default (0): 10 minutes; negative: never evict.
	IdleTTL time.Duration
	// OnStateChange, if not nil, is called after every change of a host's
	// circuit state, outside any lock of the store (it may call the store). It
	// may be called concurrently from several goroutines; At orders the
	// changes of one host. The change from open to half-open is noticed,
	// and reported, by the first call that looks at the host after
	// OpenTimeout.
	OnStateChange func(StateChange)
}

// StateChange describes one change of a host's circuit state.
type StateChange struct {
	Host     string
	From, To State
	At       time.Time
}

// Counts is the number of tracked hosts in each state, for a gauge. A
// halted host counts as Halted only, so the four add up to the number of
// hosts tracked. Hosts never seen or evicted are not counted (they are
// closed).
type Counts struct {
	Closed, HalfOpen, Open, Halted int
}
