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

// Script is an http.RoundTripper that replays a declared sequence of
// steps: the n-th request receives the n-th step and, once the steps run
// out, the last step again. It records every request it receives.
//
// A Script starts no goroutines and opens no sockets, so it works inside a
// testing/synctest bubble, where a Step's Delay passes in fake time. It is
// safe for concurrent use; concurrent requests take steps in the order
// they arrive.
type Script struct {
	steps []Step // immutable after NewScript
	rec   recorder
}

var _ http.RoundTripper = (*Script)(nil)

// NewScript returns a Script replaying steps. With no steps, every request
// receives an empty 200 response.
func NewScript(steps ...Step) *Script {
	s := &Script{steps: make([]Step, len(steps))}
	for i, st := range steps {
		st.Header = st.Header.Clone()
		s.steps[i] = st
	}
	if len(s.steps) == 0 {
		s.steps = []Step{{}}
	}
	return s
}

// RoundTrip records req, reads and closes its body, and answers with the
// next step. It returns an error wrapping [ErrInvalidRequest] for a nil
// request or a nil URL, the step's Err, or context.Cause of the request's
// context when that ends before the step answers. A request whose context
// has already ended is neither recorded nor given a step.
func (s *Script) RoundTrip(req *http.Request) (*http.Response, error) {
	i, _, err := s.rec.receive(req)
	if err != nil {
		return nil, err
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
func (s *Script) Requests() int { return s.rec.requests() }

// HostRequests returns the number of requests received so far whose URL
// host (host or host:port, exactly as in the URL) is host.
func (s *Script) HostRequests(host string) int { return s.rec.hostRequests(host) }

// Calls returns a copy of the requests received so far, in order.
func (s *Script) Calls() []Call { return s.rec.snapshot() }

// OpenBodies returns the number of response bodies handed out and not yet
// closed. A test that ends with a non-zero count has leaked a body.
func (s *Script) OpenBodies() int { return s.rec.openBodies() }
