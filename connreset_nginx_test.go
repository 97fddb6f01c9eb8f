package egresskit_test

import (
	"context"
	"crypto/tls"
	"io"
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
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// heldUpstream is an HTTP/1.1 upstream that holds n requests until they
// are all in and the test releases them; requests after that (and
// "/warm") are answered 200 at once.
type heldUpstream struct {
	*httptest.Server
	n       int64
	arrived atomic.Int64
	all     chan struct{}
	release chan struct{}
	done    atomic.Bool
}

func newHeldUpstream(t *testing.T, n int) *heldUpstream {
	u := &heldUpstream{n: int64(n), all: make(chan struct{}), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" || u.done.Load() {
			io.WriteString(w, "ok")
			return
		}
		if u.arrived.Add(1) == u.n {
			close(u.all)
		}
		select {
		case <-u.release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

// TestConnectionResetCountsOnceNginx: through a real nginx speaking
// HTTP/2 over TLS, the client's one connection is reset (TCP RST) while 8,
// then 32, requests are in flight on it as streams: the breaker records
// one failure, stays closed, and every request ends 200 after its retry,
// on a new connection.
func TestConnectionResetCountsOnceNginx(t *testing.T) {
	for _, n := range []int{8, 32} {
		t.Run(map[int]string{8: "8", 32: "32"}[n], func(t *testing.T) {
			up := newHeldUpstream(t, n)
			ngx := testprog.HTTP2Nginx(t, up.Listener.Addr().String())
			var mu sync.Mutex // guards conns
			var conns []*net.TCPConn
			base := &http.Transport{
				TLSClientConfig:   &tls.Config{RootCAs: ngx.CA},
				ForceAttemptHTTP2: true,
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err == nil {
						mu.Lock()
						conns = append(conns, c.(*net.TCPConn))
						mu.Unlock()
					}
					return c, err
				},
			}
			t.Cleanup(base.CloseIdleConnections)
			tr := mustChain(egresskit.Config{
				Base: base, IgnoreRobots: true, UserAgent: "TestBot/1.0",
				MaxInFlight: -1, // every request in flight at once, as the test needs
				Store:       mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 600000, Burst: 100}}),
				Retry:       retry.Policy{BaseDelay: 10 * time.Millisecond},
			})
			c := &http.Client{Transport: tr}
			resp, err := c.Get(ngx.URL + "/warm")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("nginx answered over %s, want HTTP/2", resp.Proto)
			}

			status := make([]int, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					resp, err := c.Get(ngx.URL + "/")
					if err != nil {
						errs[i] = err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status[i] = resp.StatusCode
				})
			}
			select {
			case <-up.all:
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d of %d requests reached the upstream", up.arrived.Load(), n)
			}
			up.done.Store(true)
			mu.Lock()
			if len(conns) != 1 {
				t.Errorf("%d connections to nginx before the reset, want 1", len(conns))
			}
			reset := conns[0]
			mu.Unlock()
			reset.SetLinger(0)
			reset.Close()
			close(up.release)
			wg.Wait()

			for i := range n {
				if status[i] != 200 {
					t.Errorf("request %d: %d, %v; want 200", i, status[i], errs[i])
				}
			}
			key, _ := tr.HostKey(ngx.URL)
			st, err := tr.Status(context.Background(), key)
			if err != nil || st.Breaker != breaker.Closed || st.ConsecutiveFailures != 0 || st.Recent.Transient != 1 {
				t.Errorf("after the reset: %v with %d failures, %d transient recorded (%v); want closed, 0, 1",
					st.Breaker, st.ConsecutiveFailures, st.Recent.Transient, err)
			}
			// The transport may still be dialing for the retries' stream:
			// conns is read under its lock.
			mu.Lock()
			dialed := len(conns)
			mu.Unlock()
			if dialed < 2 {
				t.Errorf("%d connections to nginx in all, want the retries on a new one", dialed)
			}
			t.Logf("%s: %d requests, %d connections", ngx.Version, n, dialed)
		})
	}
}
