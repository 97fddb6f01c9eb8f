package otel

import (
	"context"
	"net/http"
	"sync"

	"github.com/egresskit/egresskit/internal/settle"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

// requestKey finds a request's state in its context.
type requestKey struct{}

// requestState is what the attempt spans of one request tell its span.
type requestState struct {
	mu       sync.Mutex // guards the fields below
	attempts int
	outcome  string
	host     string
}

func (rs *requestState) attempted(e *telemetry.Event) {
	rs.mu.Lock()
	if e.Unsent == "" { // attempts sent
		rs.attempts = max(rs.attempts, e.Attempt)
	}
	rs.host = e.Host
	if e.Final {
		rs.outcome = e.Outcome.String()
	}
	rs.mu.Unlock()
}

// transport wraps the chain and opens a request span per RoundTrip.
type transport struct {
	t    *Telemetry
	next http.RoundTripper
}

// Transport returns an http.RoundTripper that opens an "egresskit.request"
// span around each RoundTrip of next (the egresskit chain; nil means
// http.DefaultTransport), so that the chain's attempt spans become its
// children. The request is passed on with the span in its context and is
// otherwise unchanged.
func (t *Telemetry) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{t: t, next: next}
}

// RoundTrip implements http.RoundTripper.
func (rt *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	rs := &requestState{}
	ctx, sp := rt.t.tracer.Start(req.Context(), "egresskit.request",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("url.full", rt.t.cfg.Redactor.RedactURL(req.URL)),
		))
	ctx = context.WithValue(ctx, requestKey{}, rs)
	resp, err := rt.next.RoundTrip(req.WithContext(ctx))
	if err == nil && resp != nil {
		// A 2xx page judged as it is read: the span ends when it is.
		if _, settled := classifyHooks.OnSettle(resp, func(r classify.Result) { rt.end(sp, rs, resp, nil, r) }); !settled {
			return resp, nil
		}
	}
	rt.end(sp, rs, resp, err, classify.Of(resp, err))
	return resp, err
}

// end sets the request span's final attributes and ends it; r is the
// Result of the request's last attempt, read when no final event came.
func (rt *transport) end(sp trace.Span, rs *requestState, resp *http.Response, err error, r classify.Result) {
	defer sp.End()
	rs.mu.Lock()
	attempts, outcome, host := rs.attempts, rs.outcome, rs.host
	rs.mu.Unlock()
	if host != "" { // the chain's host key, as the attempts name it
		sp.SetAttributes(attribute.String("egresskit.host", host))
	}
	if outcome == "" { // no final event (no observer hook): classify what came back
		outcome = r.Outcome.String()
	}
	sp.SetAttributes(attribute.Int("egresskit.attempts", attempts), attribute.String("egresskit.outcome", outcome))
	if resp != nil {
		sp.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
	switch {
	case err != nil:
		msg := rt.t.cfg.Redactor.RedactError(err)
		sp.AddEvent("exception", trace.WithAttributes(
			attribute.String("exception.type", "error"), attribute.String("exception.message", msg)))
		sp.SetStatus(codes.Error, msg)
	case outcome != classify.OK.String():
		sp.SetStatus(codes.Error, outcome)
	}
}

// CloseIdleConnections closes the idle connections of next when it has
// such a method, as http.Client.CloseIdleConnections expects of its
// Transport.
func (rt *transport) CloseIdleConnections() {
	if ci, ok := rt.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// classifyHooks reaches package classify's plumbing: reading a Result
// without making the response wait for its body.
var classifyHooks = settle.Get[classify.Result, classify.Config]()
