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

// NewHandlerTransport returns a Transport that serves each request by
// calling h directly, in the caller's goroutine, with the response
// recorded in memory (httptest.ResponseRecorder). A server-like handler
// thus runs inside a testing/synctest bubble with fake time; a handler that
// waits should select on the request's context. A nil h answers every
// request with 404, like an empty http.ServeMux.
func NewHandlerTransport(h http.Handler) *Transport {
	if h == nil {
		h = http.NotFoundHandler()
	}
	return &Transport{h: h}
}

// serve hands the handler a server-side copy of req, recorded as call, and
// returns the recorded response.
func (t *Transport) serve(req *http.Request, call Call) (resp *http.Response, err error) {
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
