package egresskit_test

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// resetServer holds n requests until they are all in, then resets (TCP
// RST) the connection of the first one while the server stays up;
// requests after the reset are answered 200 at once.
type resetServer struct {
	*httptest.Server
	n       int64
	arrived atomic.Int64
	all     chan struct{} // closed when n requests are in
	release chan struct{} // closed after the reset
	done    atomic.Bool   // the reset was made

	mu    sync.Mutex // guards the fields below
	conns map[string]net.Conn
	first string   // remote address of the first request's connection
	after []string // remote addresses of the requests after the reset
}

func newResetServer(t *testing.T, n int, h2 bool) *resetServer {
	t.Helper()
	s := &resetServer{n: int64(n), all: make(chan struct{}), release: make(chan struct{}), conns: map[string]net.Conn{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.EnableHTTP2 = h2
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns[c.RemoteAddr().String()] = c
			s.mu.Unlock()
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *resetServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/warm" {
		return
	}
	if s.done.Load() {
		s.mu.Lock()
		s.after = append(s.after, r.RemoteAddr)
		s.mu.Unlock()
		io.WriteString(w, "ok")
		return
	}
	n := s.arrived.Add(1)
	if n == 1 {
		s.mu.Lock()
		s.first = r.RemoteAddr
		s.mu.Unlock()
	}
	if n == s.n {
		close(s.all)
	}
	select {
	case <-s.release:
	case <-r.Context().Done():
	}
	io.WriteString(w, "ok") // lost when the connection was reset
}

// reset resets the first request's connection once every request is in.
func (s *resetServer) reset(t *testing.T) {
	t.Helper()
	select {
	case <-s.all:
	case <-time.After(10 * time.Second):
		t.Fatalf("only %d of %d requests arrived", s.arrived.Load(), s.n)
	}
	s.done.Store(true)
	s.mu.Lock()
	c := s.conns[s.first]
	s.mu.Unlock()
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) // close with a RST
	}
	c.Close()
	close(s.release)
}

// TestConnectionResetCountsOnce: one connection reset under 8 and under
// 32 requests in flight on it (HTTP/2 streams of one connection), or
// under one of 8 (HTTP/1.1, a connection each), adds at most one failure
// to the host's breaker: it stays closed, and every request ends 200
// after its retry, which goes out on a new connection.
func TestConnectionResetCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		h2   bool
		n    int
	}{
		{"http2/8", true, 8},
		{"http2/32", true, 32},
		{"http1/8", false, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newResetServer(t, tc.n, tc.h2)
			base := srv.Client().Transport.(*http.Transport)
			t.Cleanup(base.CloseIdleConnections)
			tr := mustChain(egresskit.Config{
				Base: base, IgnoreRobots: true, UserAgent: "TestBot/1.0",
				MaxInFlight: -1, // every request in flight at once, as the test needs
				Store: mustMemory(hoststate.Config{
					Limit: ratelimit.Config{PerMinute: 600000, Burst: 100},
				}),
				Retry: retry.Policy{BaseDelay: 10 * time.Millisecond},
			})
			c := &http.Client{Transport: tr}
			// One connection first, so that every request goes out on it
			// (HTTP/2) instead of racing to dial.
			if resp, err := c.Get(srv.URL + "/warm"); err != nil {
				t.Fatal(err)
			} else {
				resp.Body.Close()
			}
			status := make([]int, tc.n)
			errs := make([]error, tc.n)
			var wg sync.WaitGroup
			for i := range tc.n {
				wg.Go(func() {
					resp, err := c.Get(srv.URL + "/")
					if err != nil {
						errs[i] = err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status[i] = resp.StatusCode
				})
			}
			srv.reset(t)
			wg.Wait()
			for i := range tc.n {
				if status[i] != 200 {
					t.Errorf("request %d: %d, %v; want 200", i, status[i], errs[i])
				}
			}
			key, _ := tr.HostKey(srv.URL)
			st, err := tr.Status(context.Background(), key)
			if err != nil || st.Breaker != breaker.Closed || st.ConsecutiveFailures != 0 {
				t.Errorf("breaker after the reset: %v with %d failures (%v); want closed with 0", st.Breaker, st.ConsecutiveFailures, err)
			}
			if f := st.Recent.Transient; f > 1 || tc.h2 && f != 1 {
				t.Errorf("transient failures recorded = %d, want 1 (one connection; at most 1 over HTTP/1.1, which may retry it itself)", f)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for _, a := range srv.after {
				if a == srv.first {
					t.Errorf("a retry went out on the connection that was reset (%s)", a)
				}
			}
		})
	}
}
