package egresskit_test

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
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// TestProbeCancelledWhileWaitingIsReleased: a half-open host's probe whose
// caller cancels it while it waits for its pacing token is handed back, so
// the next request can probe the host instead of finding it open.
func TestProbeCancelledWhileWaitingIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		var healthy atomic.Bool
		s.handle("flaky.test", func(w http.ResponseWriter, r *http.Request) {
			if healthy.Load() {
				io.WriteString(w, "ok")
				return
			}
			http.Error(w, "down", http.StatusBadGateway)
		})
		cfg := fastConfig(s)
		cfg.Retry = retry.Policy{MaxRetries: -1}
		cfg.Store = mustMemory(hoststate.Config{
			Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: 10 * time.Second},
			Limit:   ratelimit.Config{PerMinute: 1, Burst: 1},
		})
		c := &http.Client{Transport: mustChain(cfg)}
		if status, _ := get(c, "http://flaky.test/1"); status != 502 {
			t.Fatalf("first request: status %d, want 502", status)
		}
		time.Sleep(10*time.Second + time.Millisecond) // half-open; the next token is 50s away
		healthy.Store(true)

		// The caller gives up 5s into the wait (a cancellation, not a
		// deadline the admission could have seen coming).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(5*time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://flaky.test/2", nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("the cancelled probe was sent, want it to give up waiting for its token")
		}
		status, err := get(c, "http://flaky.test/3")
		if errors.Is(err, egresskit.ErrOpen) {
			t.Fatalf("next request: %v; the abandoned probe was not handed back", err)
		}
		if status != 200 || s.requests("flaky.test") != 2 {
			t.Errorf("next request: status %d, err %v, host saw %d requests; want 200 and 2", status, err, s.requests("flaky.test"))
		}
	})
}
