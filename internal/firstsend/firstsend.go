// Package firstsend lets the RoundTripper under a retry.Transport take a
// request's first attempt as the caller made it, when that RoundTripper
// belongs to this module and needs nothing from the attempt's context.
//
// A retry.Transport gives every attempt a request whose context carries the
// attempt (retry.AttemptFrom, retry.KeyFrom, retry.HoldAttemptTimer): a
// copy of the request, and an allocation, per request. A Sender is told
// the key and the attempt number directly instead, so the first attempt,
// when it needs no timer of its own, goes out with the caller's request
// unchanged; retries are made as before. The type of Attempt is what keeps
// the interface this module's: a RoundTripper of another module cannot
// name it, so it never implements Sender by accident.
package firstsend

import "net/http"

// Attempt is the first attempt of a request.
type Attempt struct {
	// Req is the caller's request, unchanged: its context carries no
	// attempt (retry.AttemptFrom reports 0, retry.KeyFrom nothing, and
	// there is no attempt timer to hold). It has a non-nil Header and no
	// userinfo in its URL. A Sender must not modify it.
	Req *http.Request
	// Key is the key the caller gave retry.Transport.RoundTripKey; "" for
	// none.
	Key string
}

// Sender is implemented by a RoundTripper under a retry.Transport that
// sends a first attempt given as an Attempt, with the outcome its
// RoundTrip would give the same attempt made through an attempt context.
type Sender interface {
	http.RoundTripper
	SendFirst(a Attempt) (*http.Response, error)
}
