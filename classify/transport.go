package classify

import (
	"context"
	"net/http"
)

// Transport is an http.RoundTripper that classifies every attempt exactly
// once and attaches the Result: to a response through resp.Request (see
// Classify and Of), to a failure by returning an *Error. The zero value
// uses http.DefaultTransport and the default Classifier. It is safe for
// concurrent use.
type Transport struct {
	next http.RoundTripper
	c    *Classifier
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends requests through next and
// classifies them with c. A nil next means http.DefaultTransport; a nil c
// means New(Config{}).
func NewTransport(next http.RoundTripper, c *Classifier) *Transport {
	return &Transport{next: next, c: c}
}

// RoundTrip sends req through the next RoundTripper and classifies the
// outcome with the request's context (see Classify). A response that
// already carries a Result (an inner Transport classified it) is returned
// as it is. Errors are returned as *Error wrapping the next RoundTripper's
// error; a nil request or URL yields ErrNilRequest and a next RoundTripper
// returning neither response nor error yields ErrNoResponse, both wrapped
// the same way.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next, c := http.DefaultTransport, defaultClassifier
	if t != nil {
		if t.next != nil {
			next = t.next
		}
		if t.c != nil {
			c = t.c
		}
	}
	if req == nil || req.URL == nil {
		if req != nil && req.Body != nil {
			req.Body.Close()
		}
		return nil, &Error{Result: Result{Outcome: Permanent, Reason: "invalid request"}, Err: ErrNilRequest}
	}
	ctx := req.Context()
	resp, err := next.RoundTrip(req)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, &Error{Result: c.classifyError(ctx, err), Err: err}
	}
	if resp == nil {
		return nil, &Error{Result: noResponse, Err: ErrNoResponse}
	}
	if o := outcomeOf(resp); o != nil && context.Context(o) != ctx {
		return resp, nil // an inner Transport classified it
	}
	c.classifyResponse(req, resp, true)
	return resp, nil
}
