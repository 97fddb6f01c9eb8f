// Package settle lends the chain's layers the plumbing of package classify
// that a crawler does not need: the classifying transport, reading a
// response's Result without waiting for its body (OnSettle), and
// replacing it (Attach). Package classify registers its implementation
// when it is initialized; the types are generic so that this package
// need not import classify (which imports it): R is classify.Result and C
// is classify.Config, as Hooks names them.
//
// Every package that uses these hooks imports classify, so its
// registration has run by the time they are called.
package settle

import (
	"context"
	"net/http"
	"time"
)

// The classifier's defaults: what a zero classify.Config field means.
const (
	// DefaultPeekSize is the number of body bytes inspected when the
	// status alone does not decide the outcome.
	DefaultPeekSize = 4096
	// DefaultOKPeekSize is the number of body bytes of a 2xx answer
	// inspected, on the caller's first read of its body.
	DefaultOKPeekSize = 1024
	// DefaultPeekTimeout is how long the body head is waited for when
	// inspected before the response is returned.
	DefaultPeekTimeout = time.Second
)

// Transport is the classifying http.RoundTripper of package classify.
type Transport interface {
	http.RoundTripper
	// RoundTripConn is RoundTrip, and also returns the connection the
	// attempt was sent on, as net/http's httptrace GotConn reports it, or
	// nil when none was (or the next RoundTripper reports none): the chain
	// counts a connection's failure once. It costs no allocation beyond
	// RoundTrip's unless the request's context carries a ClientTrace of
	// its own.
	RoundTripConn(req *http.Request) (*http.Response, any, error)
	// Head returns up to n leading bytes of resp's body, as they came on
	// the wire, and leaves resp.Body whole (see classify's head.go).
	Head(ctx context.Context, resp *http.Response, n int) []byte
}

// Hooks is what package classify registers; R is classify.Result and C
// classify.Config.
type Hooks[R, C any] struct {
	// NewTransport returns a Transport that sends requests through next
	// (nil: http.DefaultTransport) and classifies every attempt exactly
	// once with a classifier configured by cfg, attaching the Result to
	// the response (classify.Of reads it) or returning a *classify.Error.
	NewTransport func(next http.RoundTripper, cfg C) Transport
	// OnSettle reports the Result of resp without settling it: the Result
	// and true when it is settled; else false, keeping fn (unless nil) to
	// run once with the Result when it settles, before any byte of the
	// body is handed out.
	OnSettle func(resp *http.Response, fn func(R)) (R, bool)
	// Attach makes r the Result of resp (what classify.Of reports), for a
	// layer that reclassifies a response on evidence the classifier cannot
	// see.
	Attach func(resp *http.Response, r R)
}

// hooks holds the *Hooks[R, C] that Register was given.
var hooks any

// Register is called by package classify when it is initialized.
func Register[R, C any](h *Hooks[R, C]) { hooks = h }

// Get returns the hooks package classify registered; a caller keeps them
// in a package variable: var hooks = settle.Get[classify.Result,
// classify.Config]().
func Get[R, C any]() *Hooks[R, C] { return hooks.(*Hooks[R, C]) }
