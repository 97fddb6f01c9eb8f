// Package firstsend lets the RoundTripper under a retrier.Transport take a
// request's first attempt as the caller made it, when that RoundTripper
// belongs to this module and needs nothing from the attempt's context.
//
// A retrier.Transport gives every attempt a request whose context carries the
// attempt (retrier.AttemptFrom, KeyFrom, HoldAttemptTimer): a
// copy of the request, and an allocation, per request. A Sender is told
// the key and the attempt number directly instead, so the first attempt,
// when it needs no timer of its own, goes out with the caller's request
// unchanged; retries are made as before. The type of Attempt is what keeps
// the interface this module's: a RoundTripper of another module cannot
// name it, so it never implements Sender by accident.
package firstsend

import (
	"context"
	"net/http"
	"time"
)

// Attempt is the first attempt of a request.
type Attempt struct {
	// Req is the caller's request, unchanged: its context carries no
	// attempt (retrier.AttemptFrom reports 0, KeyFrom nothing, and
	// there is no attempt timer to hold). It has a non-nil Header and no
	// userinfo in its URL. A Sender must not modify it.
	Req *http.Request
	// Key is the key the caller gave RoundTripKey; "" for
	// none.
	Key string
	// Now is when the retry layer took the request, as time.Now read it
	// (with its monotonic reading), so that the Sender need not read the
	// clock again for the attempt's start; the zero Time when the retry
	// layer read no clock (no retry budget).
	Now time.Time
}

// Sender is implemented by a RoundTripper under a retrier.Transport that
// sends a first attempt given as an Attempt, with the outcome its
// RoundTrip would give the same attempt made through an attempt context.
type Sender interface {
	http.RoundTripper
	SendFirst(a Attempt) (*http.Response, error)
}

// The retry layer's plumbing for this module's chain, installed by package
// retry when it is initialised, so that none of it is part of retry's
// public API:
//
//   - KeyFrom returns the key given to RoundTripKey for the request whose
//     attempt's context is ctx, and whether there is one (an empty key is
//     none): a layer below the retry layer reads the per-host key its
//     caller derived once per request instead of deriving it again for
//     every attempt.
//   - HoldAttemptTimer stops the AttemptTimeout of the attempt whose
//     context is ctx and returns the function that starts it again with the
//     time that was left; the chain holds it while an attempt waits for its
//     pacing token. Outside an attempt with an AttemptTimeout it does
//     nothing.
//   - RoundTripKey is rt.RoundTrip (rt a *retrier.Transport) for a request
//     whose caller already derived its key.
var (
	KeyFrom          func(ctx context.Context) (string, bool)
	HoldAttemptTimer func(ctx context.Context) (resume func())
	RoundTripKey     func(rt http.RoundTripper, req *http.Request, key string) (*http.Response, error)
)
