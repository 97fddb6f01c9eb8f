package egresskit

import (
	"sync"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// When a connection is lost, every attempt in flight on it fails at once:
// the streams of one HTTP/2 connection (a site may allow 100 or more), or
// the requests queued on one HTTP/1.1 connection. That is one piece of
// evidence about the host, not one per attempt, so the chain counts only
// the first transport failure of each connection toward the host's
// breaker; the others are recorded as neither success nor failure (their
// events still say what happened). The transport marks a failed
// connection dead, so their retries go out on a new one. An attempt learns
// its connection from the classifying transport (settle.Transport's
// RoundTripConn, from net/http's httptrace GotConn).

// connFailWindow is how long the first failure of a connection is
// remembered: the attempts in flight on it fail within it.
const connFailWindow = 10 * time.Second

// maxConnFails bounds the connections remembered; past it, entries
// older than connFailWindow are dropped, and if none is, all are.
const maxConnFails = 4096

// connFails remembers the connections whose failure was counted. The zero
// value is ready to use; it is safe for concurrent use.
type connFails struct {
	mu sync.Mutex // guards m
	m  map[any]time.Time
}

// first reports whether a transport failure of an attempt sent on conn at
// now is the first of conn within connFailWindow, and notes it.
func (f *connFails) first(conn any, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at, ok := f.m[conn]; ok && now.Sub(at) < connFailWindow {
		return false
	}
	if f.m == nil {
		f.m = make(map[any]time.Time)
	}
	if len(f.m) >= maxConnFails {
		for c, at := range f.m {
			if now.Sub(at) >= connFailWindow {
				delete(f.m, c)
			}
		}
		if len(f.m) >= maxConnFails {
			clear(f.m)
		}
	}
	f.m[conn] = now
	return true
}

// sharedConnError is the error of an attempt that failed with a
// connection whose failure was counted already. Its SharedFailure method
// tells the retry layer, which does not import this package, not to spend
// the host's retry budget on it: the connection's first failure did.
type sharedConnError struct{ err error }

// Error returns the attempt's error.
func (e *sharedConnError) Error() string { return e.err.Error() }

// Unwrap returns the attempt's error.
func (e *sharedConnError) Unwrap() error { return e.err }

// SharedFailure reports true.
func (e *sharedConnError) SharedFailure() bool { return true }

// sameConnFailure is what the host's state records for a transport
// failure of a connection whose failure was counted already.
var sameConnFailure = classify.Result{Outcome: classify.Canceled, Reason: "failed with its connection"}

// countable returns what the host's state records for r, the Result of an
// attempt sent on conn that ended with the transport error err: r itself,
// unless r is a transport failure of a connection whose failure was
// counted already, and then sameConnFailure and true. The clock is read
// only for a transport failure on a connection.
func (f *connFails) countable(r classify.Result, err error, conn any) (classify.Result, bool) {
	if err == nil || conn == nil || r.Outcome != classify.Transient || f.first(conn, time.Now()) {
		return r, false
	}
	return sameConnFailure, true
}
