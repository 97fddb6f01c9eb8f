package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
)

// leakOpenFor is the open timeout of TestLeakedProbeBody, and so the
// bound of a probe's lease in every store.
const leakOpenFor = 100 * time.Millisecond

var leakConfig = hoststate.Config{
	Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: leakOpenFor},
	Limit:   ratelimit.Config{PerMinute: 600000, Burst: 100},
}

// TestLeakedProbeBody: through the whole chain, a half-open probe whose
// 200 page is never read nor closed holds the host's probe slot for
// exactly the open timeout from its admission — the bound of every store
// — and then the next request is the new probe, whose success closes
// the breaker; in the in-memory store and in Redis alike.
func TestLeakedProbeBody(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			leakedProbeBody(t, mustMemory(leakConfig), time.Sleep)
		})
	})
	t.Run("redis", func(t *testing.T) {
		clk := newClock()
		st, err := redisstore.New(redistest.Client(t), redisstore.Config{
			Prefix:       redistest.Prefix(t),
			HostState:    leakConfig,
			OnRedisError: redisstore.FailClosed,
			Timeout:      testTimeout,
			Now:          clk.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		leakedProbeBody(t, st, clk.Advance)
	})
}

func leakedProbeBody(t *testing.T, st hoststate.Store, advance func(time.Duration)) {
	var down atomic.Bool
	down.Store(true)
	site := egresstest.NewHandlerTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>a page</body></html>")
	}))
	c := &http.Client{Transport: mustChain(egresskit.Config{
		Base: site, Store: st, IgnoreRobots: true, UserAgent: "TestBot/1.0",
		Retry: retry.Policy{MaxRetries: -1},
	})}
	const url = "http://leak.example/"
	get := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
		return c.Do(req)
	}
	read := func(what string) {
		t.Helper()
		resp, err := get()
		if err != nil {
			t.Fatalf("%s: %v, want 200", what, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d, want 200", what, resp.StatusCode)
		}
	}
	wantOpen := func(what string) {
		t.Helper()
		if resp, err := get(); !errors.Is(err, egresskit.ErrOpen) {
			if resp != nil {
				resp.Body.Close()
			}
			t.Fatalf("%s: err = %v, want ErrOpen", what, err)
		}
	}

	if resp, err := get(); err != nil || resp.StatusCode != 503 {
		t.Fatalf("first request: %v, %v; want 503", resp, err)
	} else {
		resp.Body.Close()
	}
	wantOpen("request while open")
	advance(leakOpenFor + time.Millisecond) // past the open period
	down.Store(false)
	leaked, err := get() // the probe; its body is never read nor closed
	if err != nil || leaked.StatusCode != 200 {
		t.Fatalf("probe: %v, %v; want 200", leaked, err)
	}
	wantOpen("request with the probe in flight")
	advance(leakOpenFor - time.Millisecond)
	wantOpen("request 1ms before the probe's lease ends")
	advance(time.Millisecond)
	read("request once the probe's lease ended (the new probe)")
	read("request after the new probe succeeded")
	if s, err := st.Status(context.Background(), "leak.example"); err != nil || s.Breaker != breaker.Closed {
		t.Errorf("breaker = %v, %v; want closed", s.Breaker, err)
	}
	_ = leaked // never closed, on purpose
}
