package egresstest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
)

// HandlerTransport is an http.RoundTripper that serves each request by
// calling an http.Handler directly, in the caller's goroutine, with the
// response recorded in memory (httptest.ResponseRecorder); streaming is not
// supported: the caller receives the response once the handler returns.
//
// It starts no goroutines and opens no sockets, so a server-like handler
// can run inside a testing/synctest bubble with fake time; a handler that
// waits should select on the request's context. It records every request.
// It is safe for concurrent use if the handler is.
type HandlerTransport struct {
	h   http.Handler // immutable
	rec recorder
}

var _ http.RoundTripper = (*HandlerTransport)(nil)

// NewHandlerTransport returns a HandlerTransport serving requests with h.
// A nil h answers every request with 404, like an empty http.ServeMux.
func NewHandlerTransport(h http.Handler) *HandlerTransport {
	if h == nil {
		h = http.NotFoundHandler()
	}
	return &HandlerTransport{h: h}
}

// RoundTrip records req, hands the handler a server-side copy of it and
// returns the recorded response. It returns an error wrapping
// [ErrInvalidRequest] for a nil request or a nil URL, and an error when the
// handler panics (the panic does not reach the caller, as with
// http.Server).
func (t *HandlerTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	_, call, err := t.rec.receive(req)
	if err != nil {
		return nil, err
	}

	sreq := req.Clone(req.Context())
	sreq.Method = call.Method
	sreq.Body = http.NoBody
	sreq.ContentLength = 0
	if call.Body != nil {
		sreq.Body = io.NopCloser(bytes.NewReader(call.Body))
		sreq.ContentLength = int64(len(call.Body))
	}
	sreq.GetBody = nil
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:1234"
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1
	if req.URL.Scheme == "https" {
		sreq.TLS = &tls.ConnectionState{
			Version:           tls.VersionTLS13,
			HandshakeComplete: true,
			ServerName:        req.URL.Hostname(),
		}
	}

	rw := httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("egresstest: handler panicked: %v", p)
		}
	}()
	t.h.ServeHTTP(rw, sreq)
	if ctx := req.Context(); ctx.Err() != nil {
		// A real client gives up when its context ends, whatever the
		// handler writes afterwards.
		return nil, context.Cause(ctx)
	}

	resp = rw.Result()
	resp.Request = req
	if req.Method == http.MethodHead {
		resp.Body = http.NoBody
	} else {
		resp.Body = t.rec.track(resp.Body, nil)
	}
	return resp, nil
}

// Requests returns the number of requests received so far.
func (t *HandlerTransport) Requests() int { return t.rec.requests() }

// HostRequests returns the number of requests received so far whose URL
// host (host or host:port, exactly as in the URL) is host.
func (t *HandlerTransport) HostRequests(host string) int { return t.rec.hostRequests(host) }

// Calls returns a copy of the requests received so far, in order.
func (t *HandlerTransport) Calls() []Call { return t.rec.snapshot() }

// OpenBodies returns the number of response bodies handed out and not yet
// closed.
func (t *HandlerTransport) OpenBodies() int { return t.rec.openBodies() }
