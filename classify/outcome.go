// Package classify decides, once per attempt, what an HTTP response or
// transport error means for a crawler: OK, Transient, Throttled, Refused,
// Permanent, or Canceled. The egresskit chain classifies every attempt as
// Config (egresskit.Config.Classify) says; every other layer reads the
// Result produced here and never classifies again, and a crawler author
// reads it with Of.
//
// A response is classified on its status, its headers and, when useful,
// the first bytes of its body: a challenge or block page (DefaultMarkers,
// Config.Markers), or a 401 or 403 naming the crawler's agent token, is
// Refused. The body is inspected without being consumed: the caller still
// reads every byte, in order. A 2xx answer is returned at once and judged
// on the caller's first read of its body (see Of). An error is classified
// on what it says: a timeout of the host is Transient, the end of the
// caller's own context Canceled, an invalid request or too many redirects
// Permanent.
package classify

import "time"

// Outcome is the class of one attempt.
type Outcome uint8

// The outcomes, from the crawler's point of view.
const (
	// OK: a 2xx (or other non-failure) response that is not a challenge.
	OK Outcome = iota
	// Transient: a failure that may succeed if retried after a backoff
	// (network errors, 408, 425, 500, 502, 503, 504).
	Transient
	// Throttled: the host asked us to slow down (429 or any Retry-After).
	Throttled
	// Refused: the host refuses us (a 401/403 naming the agent, or a
	// challenge page). The host must be halted and a human told.
	Refused
	// Permanent: this URL will not succeed (404, 410, other 4xx, TLS
	// certificate errors, too many redirects); the host is fine.
	Permanent
	// Canceled: the caller canceled the attempt. It says nothing about
	// the host and is neutral for breakers and pacing. A deadline that
	// expires while the attempt waits on the host is not a cancellation
	// but a timeout, Transient.
	Canceled
)

var outcomeNames = [...]string{"ok", "transient", "throttled", "refused", "permanent", "canceled"}

// String returns the lower-case name of o ("ok", "transient", ...).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result is the classification of one attempt.
type Result struct {
	// Outcome is the class of the attempt.
	Outcome Outcome
	// Status is the HTTP status code, or 0 when there was no response.
	Status int
	// RetryAfter is the wait the server asked for (Retry-After, else the
	// RateLimit or X-RateLimit-Reset fields); 0 when none was given.
	RetryAfter time.Duration
	// Quota is the rate, in requests a minute, that a successful
	// response's rate-limit fields leave until their reset (remaining ÷
	// seconds to reset; a reset in delay-seconds, rounded up by the
	// server, counts half a second less; a spent quota is one request at
	// the reset); 0 when they state none. Pacing takes it as the host's
	// rate at once, never above the configured rate.
	Quota float64
	// Markers names the challenge markers that matched, e.g.
	// "cloudflare-challenge". Nil when none matched.
	Markers []string
	// Reason is a short, fixed explanation such as "status 503" or
	// "challenge marker". It never contains a URL or a credential.
	Reason string
	// Uninspected is true when the body should have been inspected for
	// challenge markers but could not be: it is encoded with a
	// Content-Encoding this package does not decode (br, zstd, or a chain
	// of codings; gzip and deflate are decoded). That happens only when the
	// caller set Accept-Encoding itself. No body marker can have matched;
	// header markers and the status rules still apply.
	Uninspected bool
	// PeekCut is true when the body head was still arriving when the
	// peek's time budget (Config.PeekTimeout) passed: the Result judges
	// the part of the head that had arrived.
	PeekCut bool
	// Latency is the attempt's time to its response headers. The chain
	// sets it when it records the attempt (0: no response, or unknown);
	// a host's pacing keeps its averages, to tell a host slowing down
	// under our load from a far one, and a crawl's own low demand from a
	// limit reached.
	Latency time.Duration
	// Egress is true when the attempt failed on the egress route (the
	// proxy), not at the target: the error implemented
	// EndpointFault() bool and reported true. Such a failure is Transient,
	// so it is retried, but it says nothing about the host.
	Egress bool
}

// Retryable reports whether the attempt may be retried: Transient or
// Throttled.
func (r Result) Retryable() bool {
	return r.Outcome == Transient || r.Outcome == Throttled
}
