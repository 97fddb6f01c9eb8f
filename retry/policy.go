// Package retry configures the retry layer of the egresskit chain: Policy,
// set as egresskit.Config.Retry. The layer retries an attempt only when its
// classify.Result says so (Transient and Throttled; OK, Refused, Permanent
// and Canceled are returned at once, and so are the errors that mean "do
// not send": breaker open, host halted, robots disallowed, a pacing wait
// past the deadline), with jittered exponential backoff, a capped
// Retry-After, per-attempt and overall time limits, a per-host retry
// budget, and replay of request bodies through GetBody. The caller always
// receives the real last response or error, never a synthetic "giving up"
// error; the bodies of retried responses are drained (at most 64 KiB) and
// closed.
package retry

import "time"

// Policy configures the chain's retries; a crawler author sets it as
// egresskit.Config.Retry. The zero value is the recommended policy: 3
// jittered retries of idempotent requests. As everywhere in this module,
// zero means the documented default and a negative number means "none" or
// "off"; a setting that cannot be off is refused by egresskit.New when
// negative.
//
// Every zero value, in one place:
//
//	MaxRetries          0: 3 retries (negative: none)
//	BaseDelay           0: 500ms (negative: no backoff, only Retry-After)
//	MaxDelay            0: 30s (negative: refused; a server-chosen wait is always capped)
//	AttemptTimeout      0: no per-attempt limit (negative: the same)
//	Deadline            0: no overall limit (negative: the same)
//	RetryNonIdempotent  false: POST, PATCH, ... are sent once
//	Rand                nil: math/rand/v2's Int64N
type Policy struct {
	// MaxRetries is the number of retries after the first attempt. 0
	// means 3; a negative value means none.
	MaxRetries int

	// BaseDelay is the backoff ceiling of the first retry; the ceiling
	// doubles with each retry up to MaxDelay, and the wait is drawn
	// uniformly below it (full jitter). 0 means 500ms; a negative value
	// means no backoff: only Retry-After is waited for.
	BaseDelay time.Duration

	// MaxDelay caps every single wait, Retry-After included. A response
	// asking for a longer wait is not retried: it is returned as it is, so
	// the caller sees the real 429 and the layers below can pause the
	// host. 0 means 30s; a negative value is refused by egresskit.New (a wait chosen
	// by the server is never uncapped).
	MaxDelay time.Duration

	// AttemptTimeout bounds each attempt, from sending the request to
	// closing its response body. An attempt cut by it fails with an error
	// matching classify.ErrAttemptTimeout, which classifies as Transient,
	// and so is retried. 0 or negative means no per-attempt limit.
	AttemptTimeout time.Duration

	// Deadline bounds the whole request: every attempt, every wait, and
	// reading the final response body, like http.Client.Timeout. A wait
	// that would end past it (or past the request context's deadline) is
	// not started: the last response or error is returned instead. 0 or
	// negative means no overall limit.
	Deadline time.Duration

	// RetryNonIdempotent allows retrying requests whose method is not
	// idempotent (RFC 9110 §9.2.2: POST, PATCH, CONNECT, ...). Without it,
	// only GET, HEAD, OPTIONS, TRACE, PUT and DELETE are retried, and any
	// request carrying an Idempotency-Key or X-Idempotency-Key header (the
	// same opt-in net/http honours). Default false.
	RetryNonIdempotent bool

	// Budget is the share of a host's recent requests (over about the
	// last 10 s) that retries may add: with a host failing, each request
	// is not retried MaxRetries times, and a retry over the budget is not
	// made — the last answer is returned. Whatever the share, 10 retries
	// in 10 s are allowed (a few stray refusals of a modest crawl are
	// all retried). 0 means 0.2; a negative value means no budget.
	// Hosts are told apart by their URL host (the chain's host key when
	// under egresskit's chain).
	Budget float64

	// Rand returns a uniformly distributed pseudo-random number in [0, n)
	// for n > 0; it draws the jitter and must be safe for concurrent use.
	// Tests inject a deterministic one. Nil means math/rand/v2's Int64N.
	Rand func(n int64) int64
}
