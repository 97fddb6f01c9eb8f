package egresstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
)

// Errors returned by the in-memory transport.
var (
	// errInvalidRequest is returned (wrapped) for a nil request or a
	// request without a URL.
	errInvalidRequest = errors.New("egresstest: invalid request")
	// errBodyClosed is returned by Read on a response body after Close.
	errBodyClosed = errors.New("egresstest: read on closed response body")
)

// Call is one request received by a [Transport].
type Call struct {
	// Method is the request method; "GET" when the request left it empty.
	Method string
	// URL is a copy of the request URL.
	URL *url.URL
	// Header is a copy of the request header.
	Header http.Header
	// Body holds the bytes of the request body; nil when there was none.
	Body []byte
}

// recorder counts and records requests and open response bodies. It is
// shared by both kinds of Transport and is safe for concurrent use.
type recorder struct {
	mu    sync.Mutex // guards calls and open
	calls []Call
	open  int
}

// receive validates req, reads and closes its body, and records it. It
// returns the 0-based index of the call and the call. A request whose
// context has already ended is not recorded: receive returns the context's
// cause.
func (r *recorder) receive(req *http.Request) (int, Call, error) {
	if req == nil {
		return 0, Call{}, fmt.Errorf("%w: nil request", errInvalidRequest)
	}
	if req.URL == nil {
		closeBody(req)
		return 0, Call{}, fmt.Errorf("%w: nil URL", errInvalidRequest)
	}
	if ctx := req.Context(); ctx.Err() != nil {
		// Like a real transport, nothing is sent for an ended context.
		closeBody(req)
		return 0, Call{}, context.Cause(ctx)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return 0, Call{}, fmt.Errorf("egresstest: read request body: %w", err)
		}
		body = b
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	u := *req.URL
	if u.User != nil {
		user := *u.User
		u.User = &user
	}
	c := Call{Method: method, URL: &u, Header: req.Header.Clone(), Body: body}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return len(r.calls) - 1, c, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func (r *recorder) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) snapshot() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Call, len(r.calls))
	copy(out, r.calls)
	return out
}

func (r *recorder) openBodies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}

// track wraps rd as a response body counted as open until it is closed.
// When bodyErr is non-nil, it is returned by Read in place of io.EOF.
func (r *recorder) track(rd io.Reader, bodyErr error) io.ReadCloser {
	r.mu.Lock()
	r.open++
	r.mu.Unlock()
	return &body{r: rd, err: bodyErr, rec: r}
}

// body is a response body handed out by the in-memory transports.
// Close may be called concurrently with Read, as with net/http bodies.
type body struct {
	r      io.Reader
	err    error
	rec    *recorder
	closed atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *body) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.rec.mu.Lock()
		b.rec.open--
		b.rec.mu.Unlock()
	}
	return nil
}
