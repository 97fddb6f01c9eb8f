// Package hoststate defines the per-host state the egresskit chain consults
// around every attempt — halts, the circuit breaker and the pacing budget —
// and provides its in-memory implementation. The redisstore package provides
// a Redis implementation shared across a fleet; both follow the same
// semantics and are tested with the same scenarios.
package hoststate

import (
	"context"
	"errors"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/ratelimit"
)

// Store is the per-host state of the chain. Implementations are safe for
// concurrent use. Hosts are keys from hostkey.Of. Every Admission that Admit
// grants must be passed to Record exactly once, with a Canceled result when
// the attempt is not sent after all (that frees a half-open probe slot).
//
// The semantics are those of packages breaker and ratelimit, and the
// scenarios of package hoststatetest pin them down for every
// implementation.
type Store interface {
	// Admit decides whether one attempt to host may be sent. In order it
	// checks the halt (*breaker.HaltError, errors.Is egresskit.ErrHalted), the
	// circuit breaker (*breaker.OpenError, errors.Is egresskit.ErrOpen), and
	// only then reserves a pacing token; an open or halted host spends no
	// token. The returned Admission says how long the caller must wait
	// before sending. When that wait would pass ctx's deadline, Admit
	// returns an error wrapping context.DeadlineExceeded and reserves nothing.
	Admit(ctx context.Context, host string) (Admission, error)

	// Record feeds the classification of an attempt admitted by Admit back
	// into the host's state: the limiter adapts (Throttled halves the rate,
	// drains the bucket and pauses the host for RetryAfter; OKs recover
	// the rate), the breaker counts it, and Refused halts the host.
	//
	// Throttling is pacing's business: a Throttled result counts toward
	// opening the breaker (as a failure, like Transient) only when the
	// host's rate was already at its floor when it came (ratelimit.Config.Floor,
	// or a lower configured rate or ceiling), so that pacing could not slow
	// down any further. Before that it is neutral for the breaker: it
	// neither adds to nor resets the failure count, and a throttled
	// half-open probe frees its slot. A host answering nothing but 429s is
	// thus slowed to its floor first, and its breaker opens only after
	// FailureThreshold further throttles at the floor.
	//
	// A halt is never lost to an error: when a Refused result cannot be
	// written to the shared state, an implementation that can keeps the
	// halt in the process — Admit refuses the host — writes it to the
	// shared state when that answers again, and reports Effect.Halted
	// together with the error. The chain holds a halt itself when Record
	// fails without reporting it (offering it to the store again, as a
	// Refused Record with a zero Admission, until the store takes it), so
	// a Refused Record must halt the host whatever its Admission.
	Record(ctx context.Context, host string, a Admission, r classify.Result) (Effect, error)

	// Resume lifts a halt on host; it is the operator's action. host may
	// be a key or what hostkey.Parse takes (a host, host:port or URL,
	// keyed by host). The breaker keeps its state; since a refusal is
	// the halt's evidence and not a breaker failure, a host halted by
	// refusals is sendable at once, at the pace it had. Resume returns
	// an error wrapping ErrNotHalted, and changes nothing, when host is
	// not halted, and one of package hostkey's errors when host is not
	// a host.
	Resume(ctx context.Context, host string) error

	// SetCeiling caps host's pacing rate at perMinute requests per minute
	// (robots.txt Crawl-delay). A perMinute <= 0 removes the cap.
	SetCeiling(ctx context.Context, host string, perMinute float64) error

	// Status returns a snapshot of host's state.
	Status(ctx context.Context, host string) (Status, error)

	// HaltLog keeps the evidence of each halt and the operators' notes
	// on it, for the review console (package console) and egressctl.
	HaltLog
}

// ErrNotHalted: Resume was asked to lift a halt that does not exist.
var ErrNotHalted = errors.New("hoststate: host is not halted")

// Admission is the permission to send one attempt.
type Admission struct {
	// Wait is how long the caller must wait before sending.
	Wait time.Duration
	// Probe is true when the attempt is a half-open breaker probe.
	Probe bool
	// Generation identifies the breaker generation that admitted the
	// attempt; a Record from an older generation is ignored by the breaker.
	Generation uint64
	// Epoch is the host's pacing epoch when the attempt was admitted. When
	// Status.Epoch has moved past it by the time the wait is over, a
	// throttle paused the host meanwhile: the admission must not be sent
	// as it is but recorded as Canceled and taken again, so that attempts
	// waiting when a pause ends go out one interval apart.
	Epoch uint64
	// PerMinute is the host's pacing rate, in requests a minute, when the
	// attempt was admitted (the Status.PerMinute of that moment), so that
	// a caller sizing its concurrency by the rate need not ask Status; 0
	// when the store does not say.
	PerMinute float64
	// BaseLatency is the host's base latency (time to headers, following
	// the lowest) that the store learnt from the answers recorded — with
	// a shared store, every worker's — when the attempt was admitted; 0
	// when the store does not say. A caller sizing its concurrency by
	// Little's law takes it over a latency it saw only behind others'
	// queue.
	BaseLatency time.Duration
	// At is when the store admitted the attempt, by the local clock
	// (time.Now, with its monotonic reading), when it read that clock
	// for the decision; zero when it did not (the Redis store decides by
	// Redis's clock). A caller that sends at once, without a Wait, may
	// take it for the time the attempt was sent instead of reading the
	// clock again.
	At time.Time

	// ticket is the in-memory breaker's admission (Memory only).
	ticket circuits.Ticket
}

// Effect reports what Record changed.
type Effect struct {
	// Halted is true when this Record halted the host (only the first
	// Record that halts it; later ones report false). The chain calls the
	// escalation hook exactly when Halted is true.
	Halted bool
	// From and To are the breaker states before and after; equal when
	// nothing changed.
	From, To breaker.State
}

// Status is a snapshot of one host.
type Status struct {
	Host    string
	Breaker breaker.State
	// Halted is true while the host is halted; HaltedAt is when.
	Halted   bool
	HaltedAt time.Time
	// ConsecutiveFailures counted by the breaker.
	ConsecutiveFailures int
	// OpenUntil is when an open breaker lets a probe through.
	OpenUntil time.Time
	// PerMinute is the current pacing rate; Ceiling the cap (0: none).
	PerMinute float64
	Ceiling   float64
	// PausedUntil is when a Retry-After pause ends (zero: not paused).
	PausedUntil time.Time
	// Epoch counts the pauses that started or grew (see Admission.Epoch).
	Epoch uint64
	// Recent counts the outcomes recorded since RecentSince, at most
	// ratelimit.Config.Window ago (zero when none was).
	Recent      ratelimit.Outcomes
	RecentSince time.Time
}
