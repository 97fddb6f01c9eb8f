package classify

import (
	"context"
	"net/http"

	"github.com/egresskit/egresskit/internal/settle"
)

// transport is an http.RoundTripper that classifies every attempt exactly
// once and attaches the Result: to a response through resp.Request (see
// Classify and Of), to a failure by returning an *Error. The zero value
// uses http.DefaultTransport and the default classifier. It is safe for
// concurrent use.
type transport struct {
	next http.RoundTripper
	c    *classifier
}

var _ http.RoundTripper = (*transport)(nil)

// newTransport returns a transport that sends requests through next and
// classifies them with c. A nil next means http.DefaultTransport; a nil c
// means newClassifier(Config{}).
func newTransport(next http.RoundTripper, c *classifier) *transport {
	return &transport{next: next, c: c}
}

// Head is the Head of t's classifier (see classifier.Head).
func (t *transport) Head(ctx context.Context, resp *http.Response, n int) []byte {
	return t.c.Head(ctx, resp, n)
}

// The chain's layers reach the transport, onSettle and reattach through
// internal/settle.
func init() {
	settle.Register(&settle.Hooks[Result, Config]{
		NewTransport: func(next http.RoundTripper, cfg Config) settle.Transport {
			return newTransport(next, newClassifier(cfg))
		},
		OnSettle: onSettle,
		Attach:   reattach,
	})
}

// RoundTrip sends req through the next RoundTripper and classifies the
// outcome with the request's context (see Classify). A response that
// already carries a Result (an inner transport classified it) is returned
// as it is. Errors are returned as *Error wrapping the next RoundTripper's
// error; a nil request or URL yields errNilRequest and a next RoundTripper
// returning neither response nor error yields errNoResponse, both wrapped
// the same way.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil || req.URL == nil {
		if req != nil && req.Body != nil {
			req.Body.Close()
		}
		return nil, &Error{Result: Result{Outcome: Permanent, Reason: "invalid request"}, Err: errNilRequest}
	}
	return t.send(req, req.Context(), nil)
}

// RoundTripConn is RoundTrip, and also returns the connection the attempt
// was sent on (see roundTripConn).
func (t *transport) RoundTripConn(req *http.Request) (*http.Response, any, error) {
	return t.roundTripConn(req)
}

// send sends req and classifies the outcome with ctx, the context of the
// caller's request. pre, when not nil, is the outcome made before the
// attempt was sent (see roundTripConn): req is its request, and the
// Result of a response is attached to it when it fits (see
// classifyResponse).
func (t *transport) send(req *http.Request, ctx context.Context, pre *lazyOutcome) (*http.Response, error) {
	next, c := http.DefaultTransport, defaultClassifier
	if t != nil {
		if t.next != nil {
			next = t.next
		}
		if t.c != nil {
			c = t.c
		}
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, &Error{Result: c.classifyError(ctx, err), Err: err}
	}
	if resp == nil {
		return nil, &Error{Result: noResponse, Err: errNoResponse}
	}
	if o := outcomeOf(resp); o != nil && context.Context(o) != ctx && (pre == nil || o != &pre.outcome) {
		return resp, nil // an inner transport classified it
	}
	c.classifyResponse(req, resp, true, pre)
	return resp, nil
}
