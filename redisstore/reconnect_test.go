package redisstore_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// countingClient returns a client of addr, closed when t ends, whose
// dials (the pool's and the Store's own reconnect check, which dials with
// the client's dialer) are counted in dials.
func countingClient(t *testing.T, addr string) (*redis.Client, *atomic.Int64) {
	t.Helper()
	opt, err := redistest.Options(addr)
	if err != nil {
		t.Fatal(err)
	}
	dials := new(atomic.Int64)
	d := &net.Dialer{Timeout: opt.DialTimeout, KeepAlive: 5 * time.Minute}
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c, dials
}

// TestFailClosedReconnect: a FailClosed Store whose Redis was killed fails
// every operation, and its own reconnect check, on the Store's clock,
// decides when operations reach Redis again. While the Store's clock
// stands still, a hundred operations (more than go-redis's PoolSize, which
// would make its pool answer with its last dial error and wait for its
// once-a-second probe) fail without dialling Redis at all; each time the
// clock passes ReconnectInterval, one operation dials once; and once
// Redis accepts connections again, the first operation after the next
// interval succeeds. The errors end one check interval of the Store's
// clock after Redis's return, whatever the real time.
func TestFailClosedReconnect(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	client, dials := countingClient(t, srv.Addr)
	clk := newClock()
	st, err := redisstore.New(client, redisstore.Config{
		Prefix: redistest.Prefix(t), OnRedisError: redisstore.FailClosed, Timeout: time.Second, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	const host = "lag.example"
	if _, err := st.Admit(ctx, host); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("first Admit with Redis down = %v, want ErrUnavailable", err)
	}
	// The first failed call dialled (go-redis's retries); from here on the
	// Store's check decides.
	base := dials.Load()
	for i := range 100 {
		if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("Admit %d with Redis down = %v, want ErrUnavailable", i+2, err)
		}
	}
	if got := dials.Load() - base; got != 0 {
		t.Errorf("100 Admits within one check interval dialled Redis %d times, want 0", got)
	}
	for i := range 3 {
		clk.Advance(redisstore.ReconnectInterval)
		for range 10 {
			if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
				t.Fatalf("Admit with Redis down after %d check intervals = %v, want ErrUnavailable", i+1, err)
			}
		}
		if got := dials.Load() - base; got != int64(i+1) {
			t.Errorf("after %d check intervals with Redis down: %d dials, want %d (one a check)", i+1, got, i+1)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("Admit after Redis returned, within the check interval = %v, want ErrUnavailable (no dial before the check is due)", err)
	}
	clk.Advance(redisstore.ReconnectInterval)
	if _, err := st.Admit(ctx, host); err != nil {
		t.Errorf("first Admit one check interval after Redis returned = %v, want admitted", err)
	}
	if _, err := st.Admit(ctx, host); err != nil {
		t.Errorf("second Admit after Redis returned = %v, want admitted", err)
	}
}

// TestFailClosedReconnectAfterFaults: for each kind of outage (killed and
// restarted empty, paused with SIGSTOP and SIGCONT, asleep in DEBUG
// SLEEP), three times over on one FailClosed Store (default Timeout): the
// first operation during the fault fails with ErrUnavailable, and once
// Redis answers again and the Store's clock has passed one reconnect
// check interval, the first operation succeeds. The Store's clock is a
// fake one, so the test asserts what ends the errors (the check, on the
// Store's clock), not how long a loaded machine takes to get there.
//
// The client's PoolSize is set to 20 (go-redis's default on two cores):
// the first call of each outage costs go-redis's pool up to four failed
// dials, which it never forgets but from its own once-a-second probe, so
// a pool of 10 could reach its limit by the third outage and wait for
// that probe (the documented exception, in reconnect.go); 20 keeps the
// three outages clear of it on any machine.
func TestFailClosedReconnectAfterFaults(t *testing.T) {
	for _, f := range redisFaults {
		t.Run(f.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.StartWith(t, f.args...)
			opt, err := redistest.Options(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			opt.PoolSize = 20
			client := redis.NewClient(opt)
			t.Cleanup(func() { client.Close() })
			clk := newClock()
			st, err := redisstore.New(client, redisstore.Config{Prefix: redistest.Prefix(t), OnRedisError: redisstore.FailClosed, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			const host = "lag.example"
			for i := range 3 {
				clk.Advance(time.Minute) // a fresh token: pacing plays no part
				if _, err := st.Admit(ctx, host); err != nil {
					t.Fatalf("outage %d: Admit before the fault = %v", i+1, err)
				}
				back := f.stop(t, srv)
				if _, err := st.Admit(ctx, host); !errors.Is(err, redisstore.ErrUnavailable) {
					t.Fatalf("outage %d: Admit with Redis failing = %v, want ErrUnavailable", i+1, err)
				}
				for range 3 {
					st.Admit(ctx, host) // fails, unless a DEBUG SLEEP ended already
				}
				back()
				clk.Advance(redisstore.ReconnectInterval)
				if _, err := st.Admit(ctx, host); err != nil {
					t.Errorf("outage %d: first Admit once Redis answered again and one check interval passed = %v, want admitted", i+1, err)
				}
			}
		})
	}
}
