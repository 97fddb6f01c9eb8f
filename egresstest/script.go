package egresstest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Step is one scripted answer: a response, or an error when Err is set.
type Step struct {
	// Status is the response status code; 0 means 200.
	Status int
	// Header holds the response header fields; nil means none. The
	// transport hands every response its own copy.
	Header http.Header
	// Body is the response body.
	Body string
	// BodyErr, when set, is returned by the body's Read once Body has been
	// read, in place of io.EOF: a connection lost in the middle of the body.
	BodyErr error
	// Err, when set, is returned by RoundTrip instead of a response.
	Err error
	// Delay is how long the step takes before it answers: a slow host. The
	// wait honours the request's context: when it ends first, RoundTrip
	// returns context.Cause of it. Zero answers at once.
	Delay time.Duration
}

// Transport is an in-memory http.RoundTripper for a test author's unit
// tests: a script of steps (NewScript) or an http.Handler
// (NewHandlerTransport) answers each request. It records every request it
// receives, counts them, and counts the response bodies handed out and not
// yet closed.
//
// A Transport starts no goroutines and opens no sockets, so it works
// inside a testing/synctest bubble, where a Step's Delay (or a handler's
// wait on a timer) passes in fake time. It is safe for concurrent use (with
// a handler, if the handler is); concurrent requests take steps in the
// order they arrive.
type Transport struct {
	steps []Step       // immutable after NewScript; nil with a handler
	h     http.Handler // immutable after NewHandlerTransport; nil with steps
	rec   recorder
}

var _ http.RoundTripper = (*Transport)(nil)

// NewScript returns a Transport that replays steps: the n-th request
// receives the n-th step and, once the steps run out, the last step again.
// With no steps, every request receives an empty 200 response.
func NewScript(steps ...Step) *Transport {
	s := &Transport{steps: make([]Step, len(steps))}
	for i, st := range steps {
		st.Header = st.Header.Clone()
		s.steps[i] = st
	}
	if len(s.steps) == 0 {
		s.steps = []Step{{}}
	}
	return s
}

// RoundTrip records req, reads and closes its body, and answers it: with
// the next step of a script, or with the handler's response. It returns an
// error for a nil request or a nil URL. A request whose context has
// already ended is neither recorded nor answered: RoundTrip returns
// context.Cause of the context.
//
// A script answers with the step's Err, or with context.Cause of the
// request's context when that ends before the step answers. A handler
// receives a server-side copy of the request, and the caller the recorded
// response once the handler returns (streaming is not supported); a panic
// of the handler is returned as an error, as http.Server keeps it from the
// client.
func (s *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	i, call, err := s.rec.receive(req)
	if err != nil {
		return nil, err
	}
	if s.h != nil {
		return s.serve(req, call)
	}
	st := s.steps[min(i, len(s.steps)-1)]
	if err := wait(req.Context(), st.Delay); err != nil {
		return nil, err
	}
	if st.Err != nil {
		return nil, st.Err
	}
	status := st.Status
	if status == 0 {
		status = http.StatusOK
	}
	resp := &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        st.Header.Clone(),
		ContentLength: int64(len(st.Body)),
		Request:       req,
	}
	if resp.Header == nil {
		resp.Header = make(http.Header)
	}
	if st.BodyErr != nil {
		resp.ContentLength = -1
	}
	if req.Method == http.MethodHead {
		resp.Body = http.NoBody
	} else {
		resp.Body = s.rec.track(strings.NewReader(st.Body), st.BodyErr)
	}
	return resp, nil
}

// wait returns nil after d, or context.Cause(ctx) if ctx ends first (or
// has already ended).
func wait(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Requests returns the number of requests received so far.
func (s *Transport) Requests() int { return s.rec.requests() }

// Calls returns a copy of the requests received so far, in order: a test
// counts the requests to one host by their URL.Host.
func (s *Transport) Calls() []Call { return s.rec.snapshot() }

// OpenBodies returns the number of response bodies handed out and not yet
// closed. A test that ends with a non-zero count has leaked a body.
func (s *Transport) OpenBodies() int { return s.rec.openBodies() }
