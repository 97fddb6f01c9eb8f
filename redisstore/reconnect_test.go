package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// TestFailClosedReconnect: a FailClosed Store whose Redis was killed fails
// every operation (more than go-redis's PoolSize of them, enough to make
// its pool answer with its last dial error), and once Redis accepts
// connections again, the first operation made more than the reconnect
// check's interval (100ms) later succeeds: the errors end within one
// check interval of Redis's return, not when go-redis's pool next probes
// (once a second). The lag from Redis's return to the first success is
// logged.
func TestFailClosedReconnect(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	st := mustState(t, srv.Addr, redisstore.Config{
		Prefix: redistest.Prefix(t), OnRedisError: redisstore.FailClosed, Timeout: time.Second,
	})
	const host = "lag.example"
	if _, err := st.Admit(ctx, host); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	failed := 0
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); failed++ {
		if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("Admit with Redis down = %v, want ErrUnavailable", err)
		}
		if failed%50 == 49 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	time.Sleep(150 * time.Millisecond) // past one check interval
	if _, err := st.Admit(ctx, host); err != nil {
		t.Errorf("Admit 150ms after Redis returned = %v, want admitted", err)
	}
	t.Logf("%d operations failed during the outage; the first Admit after Redis returned succeeded %v after it", failed, time.Since(up).Round(time.Millisecond))
}

// TestFailClosedReconnectLag measures, for a caller that retries at once,
// how long after Redis answers again a FailClosed Store (default Timeout)
// keeps failing, over three outages of each kind: killed and restarted
// empty, paused (SIGSTOP, SIGCONT), asleep (DEBUG SLEEP). The lags are
// logged; each must stay under go-redis's own reconnect probe (1s) plus
// a margin for a loaded machine.
func TestFailClosedReconnectLag(t *testing.T) {
	for _, f := range redisFaults {
		t.Run(f.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.StartWith(t, f.args...)
			st := mustState(t, srv.Addr, redisstore.Config{Prefix: redistest.Prefix(t), OnRedisError: redisstore.FailClosed})
			const host = "lag.example"
			var lags []time.Duration
			for range 3 {
				if _, err := st.Admit(ctx, host); err != nil {
					t.Fatal(err)
				}
				back := f.stop(t, srv)
				if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
					t.Fatalf("Admit with Redis failing = %v, want ErrUnavailable", err)
				}
				for range 3 {
					st.Admit(ctx, host) // fails, unless a DEBUG SLEEP ended already
				}
				back()
				up := time.Now()
				for {
					if _, err := st.Admit(ctx, host); err == nil {
						break
					}
					if time.Since(up) > 5*time.Second {
						t.Fatal("Admit still fails 5s after Redis returned")
					}
					time.Sleep(time.Millisecond)
				}
				lags = append(lags, time.Since(up))
			}
			t.Logf("errors ended after Redis answered again: %v", lags)
			for _, l := range lags {
				if l > 1500*time.Millisecond {
					t.Errorf("errors went on %v after Redis returned, want about the 100ms check interval", l)
				}
			}
		})
	}
}
