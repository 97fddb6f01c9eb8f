package robotstxt

import "net/http"

// Transport is an http.RoundTripper that sends a request only when its
// Checker allows the URL. A disallowed request never reaches the next
// transport: RoundTrip returns the *DisallowedError (errors.Is
// ErrDisallowed), or the Checker's other errors, and no response.
//
// Transport is for use on its own; the egresskit chain runs the same check
// in its authorisation step.
type Transport struct {
	next    http.RoundTripper
	checker *Checker
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that checks each request with c before
// passing it to next. If next is nil, http.DefaultTransport is used. The
// Checker fetches robots.txt through its own Config.Transport, not next.
func NewTransport(next http.RoundTripper, c *Checker) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{next: next, checker: c}
}

// RoundTrip checks req.URL and, if it is allowed, sends req through the next
// transport. The request is not modified.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := t.checker.Check(req.Context(), req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}
