package session

import (
	"errors"
	"net/http"

	"github.com/egresskit/egresskit/egress"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// transport is the http.RoundTripper Manager.Transport returns.
type transport struct {
	m    *Manager
	id   string
	next http.RoundTripper
}

// Transport returns an http.RoundTripper, for a crawler author's
// http.Client, that sends requests through next as session id: it adds the
// session's headers (those the request does not set itself) and its token,
// refreshed if due, and binds the request to the session's egress endpoint
// through the request context (egress.WithBinding). If next is nil,
// http.DefaultTransport is used.
//
// It never sends a request with an expired token, and never lets a bound
// session leave through another endpoint: when the bound endpoint is
// removed or quarantined, RoundTrip fails with an error wrapping
// ErrEgressLost (and egress.ErrBindingUnavailable) and the caller decides —
// Rebind, or end the session. Besides next's errors it fails, without
// sending, with ErrInvalidID, ErrNotFound, ErrTampered, a Store error, or
// an error naming a failed token refresh (see Token). If a token refresh is
// due it happens under the lease the request's context carries
// (WithLease), if any.
//
// Cookies are the http.Client's business: give the client the session's
// Jar. The RoundTripper is safe for concurrent use.
func (m *Manager) Transport(next http.RoundTripper, id string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{m: m, id: id, next: next}
}

// RoundTrip implements http.RoundTripper (see Manager.Transport).
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	s, tok, err := t.prepare(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even unsent
		}
		return nil, err
	}
	m := t.m
	ctx := req.Context()
	if s.Endpoint != "" {
		ctx = egress.WithBinding(ctx, s.Endpoint)
	}
	out := req.Clone(ctx)
	for k, vs := range s.Header {
		if _, set := out.Header[k]; !set {
			out.Header[k] = vs
		}
	}
	if tok.Value != "" {
		out.Header.Set(m.cfg.TokenHeader, tok.headerValue())
	}
	// The clone shares req.Body; next closes it.
	resp, err := t.next.RoundTrip(out)
	if err != nil && s.Endpoint != "" && errors.Is(err, egress.ErrBindingUnavailable) {
		return resp, &egressLostError{ID: t.id, Endpoint: s.Endpoint, Err: err}
	}
	return resp, err
}

// prepare reads the session and its token, refreshed if due.
func (t *transport) prepare(req *http.Request) (*Session, Token, error) {
	m := t.m
	ctx := req.Context()
	if err := sessionkit.ValidateID(t.id); err != nil {
		return nil, Token{}, err
	}
	r, err := m.store.Get(ctx, t.id, sessionstore.PartFields)
	if err != nil {
		return nil, Token{}, err
	}
	s, err := m.openFields(r)
	if err != nil {
		return nil, Token{}, err
	}
	if refreshing(ctx, t.id) {
		return s, Token{}, nil
	}
	tok, err := m.token(ctx, t.id, s.Token)
	if err != nil {
		return nil, Token{}, err
	}
	return s, tok, nil
}
