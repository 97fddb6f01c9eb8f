package telemetry

import (
	"context"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// Event describes one attempt: one HTTP round trip made, or refused before
// it was sent, by the egresskit chain. The chain emits exactly one Event per
// attempt, and one for a request it refused before any attempt (out of
// scope, disallowed by robots.txt). Unsent tells the two kinds apart:
// count round trips from the events with Unsent "", and requests the
// chain refused itself from the others.
//
// URL and Err are redacted by the producer (see Redactor); observers may
// print them as they are.
type Event struct {
	// Time is when the attempt was sent, after its pacing wait (Wait);
	// for an attempt the chain did not send, when the chain began
	// handling it.
	Time time.Time
	// Host is the key of the target's host (hostkey.Of): lower case, in
	// punycode, without userinfo, with the port only when it is not the
	// scheme's default.
	Host string
	// Method is the HTTP method.
	Method string
	// URL is the redacted target URL.
	URL string
	// Attempt numbers the attempts of one request from 1.
	Attempt int
	// Retries is the number of attempts before this one (Attempt-1).
	Retries int
	// Final is true when no further attempt of the same request follows:
	// the request's result is this attempt's. Collectors count requests
	// from final events. An unsent event is always final.
	Final bool
	// Status is the HTTP status code, or 0 when no response arrived.
	Status int
	// Outcome is the classification of the attempt. An unsent attempt is
	// Permanent (it is not retried), or Canceled when the caller's
	// context ended before it was sent.
	Outcome classify.Outcome
	// Markers names the challenge markers that matched, if any.
	Markers []string
	// Egress is the ID of the egress endpoint used ("" when none was).
	Egress string
	// EgressReason says why that endpoint was chosen (a short fixed word),
	// "" when none was.
	EgressReason string
	// EgressRule names the egress rule that decided which endpoints were
	// eligible for the host, "" when no rule governs it.
	EgressRule string
	// Breaker is the host's breaker state after the attempt: "closed",
	// "half-open", "open", or "halted" when the host is halted. The
	// attempt that opens the breaker reports "open", and the one whose
	// result halts the host "halted"; an attempt refused because the host
	// was halted or open reports that state. It is "" when unknown: for a
	// request refused before any attempt, and for an unsent attempt whose
	// admission failed for another reason.
	Breaker string
	// Wait is the pacing wait the attempt was given: how long a sent
	// attempt waited for its token. An unsent attempt reports the wait it
	// was given when it was refused, which it may not have served (a wait
	// past the deadline is refused at once); 0 when it had none.
	Wait time.Duration
	// Duration is how long the round trip took, from the send to the
	// response's headers (or the error), excluding Wait; 0 when the
	// attempt was not sent.
	Duration time.Duration
	// Err is the redacted text of the attempt's error, "" when none; it
	// includes the state store's error when the attempt's outcome could
	// not be recorded (e.g. "redisstore: redis unavailable (record): ...").
	Err string
	// Unsent is "" when the attempt was sent, else why the chain did not
	// send it: "halted" (the host is halted), "open" (its breaker is
	// open), "disallowed" (robots.txt), "out_of_scope" (Config.Scope),
	// "deadline" (a pacing or crawl-rate wait would pass the request's
	// deadline), "canceled" (the caller's context ended first), or
	// "error" (the chain failed before sending: the host state's store,
	// robots.txt unreachable through the egress route, too many agents).
	Unsent string
}

// Observer receives events: a crawler author's own, or those of this
// package (NewSlog, Audit) and of the exporters. Observe is called synchronously on the request
// path, once per attempt, possibly from many goroutines at once; it must be
// fast and safe for concurrent use, and must not retain e or anything it
// points to after it returns (copy what it keeps). Wrap a slow or an
// untrusted observer in an Async.
type Observer interface {
	Observe(ctx context.Context, e *Event)
}

// ObserverFunc adapts a function to the Observer interface, for a crawler
// author's own observer.
type ObserverFunc func(ctx context.Context, e *Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e *Event) { f(ctx, e) }

// observers is the Observer Fanout returns for other than one observer:
// it hands each event to every observer in order. The empty (nil) list is
// valid and does nothing.
type observers []Observer

// Observe passes e to each observer in turn.
func (os observers) Observe(ctx context.Context, e *Event) {
	for _, o := range os {
		o.Observe(ctx, e)
	}
}

// Fanout returns one Observer that passes each event to every observer in
// obs, in order, for a crawler author who hands several observers to one
// wrapper (NewAsync(Fanout(a, b), 0)). Nil observers are dropped and
// observers that Fanout returned are flattened. With no observer left it
// returns one that does nothing.
func Fanout(obs ...Observer) Observer {
	var out observers
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case observers:
			for _, inner := range o {
				if inner != nil {
					out = append(out, inner)
				}
			}
		default:
			out = append(out, o)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}
