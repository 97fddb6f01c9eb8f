package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
)

// leaseConfig is a FailClosed Config on a fake clock, every outcome
// recorded at once, for hosts paced at perMinute with bursts of burst.
func leaseConfig(t *testing.T, clk *clock, perMinute float64, burst int) redisstore.Config {
	return redisstore.Config{
		Prefix:       redistest.Prefix(t),
		HostState:    hoststate.Config{Limit: ratelimit.Config{PerMinute: perMinute, Burst: burst}},
		OnRedisError: redisstore.FailClosed,
		Timeout:      testTimeout,
		RecordDelay:  -1,
		Now:          clk.Now,
	}
}

// TestLeases: a fast host's spare tokens are leased, 16 beyond the
// admission that asks Redis, so 17 admissions cost one round trip; another
// worker's halt reaches a worker holding a lease when its window (100ms)
// ends, not before; the worker's own failure ends its lease at once; a
// host whose rate gives fewer than 2 tokens in the window is never leased.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	clk := newClock()
	cfg := leaseConfig(t, clk, 60000, 100) // 100 tokens in the window
	hook := newCounter()
	c := redistest.Dial(t, addr)
	c.AddHook(hook)
	w, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := mustState(t, addr, cfg)
	admit := func(st *redisstore.Store, host string) (hoststate.Admission, error) {
		t.Helper()
		a, err := st.Admit(ctx, host)
		if err == nil && a.Wait != 0 {
			t.Fatalf("Admit(%s) waits %v, want none (the bucket is full)", host, a.Wait)
		}
		return a, err
	}
	// A new host's bucket holds one token; idle, it fills in 100ms.
	for _, h := range []string{"fast.example", "own.example"} {
		if _, err := admit(w, h); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(200 * time.Millisecond)

	hook.reset()
	for i := range 17 {
		if _, err := admit(w, "fast.example"); err != nil {
			t.Fatalf("admission %d: %v", i+1, err)
		}
	}
	if n := hook.trips.Load(); n != 1 {
		t.Errorf("17 admissions of a fast host: %d round trips, want 1 (16 tokens leased)", n)
	}
	if _, err := admit(w, "fast.example"); err != nil || hook.trips.Load() != 2 {
		t.Errorf("18th admission: %v after %d round trips, want a new lease (2)", err, hook.trips.Load())
	}

	// Another worker halts the host: the lease admits until its window
	// ends, then the halt is seen.
	a, err := admit(other, "fast.example")
	if err != nil {
		t.Fatal(err)
	}
	if eff, err := other.Record(ctx, "fast.example", a, classify.Result{Outcome: classify.Refused}); err != nil || !eff.Halted {
		t.Fatalf("Record(Refused) = %+v, %v; want halted", eff, err)
	}
	clk.Advance(99 * time.Millisecond)
	if _, err := admit(w, "fast.example"); err != nil {
		t.Errorf("within the lease's window: %v, want admitted", err)
	}
	clk.Advance(time.Millisecond)
	var halt *breaker.HaltError
	if _, err := w.Admit(ctx, "fast.example"); !errors.As(err, &halt) {
		t.Errorf("when the window ends: %v, want a HaltError", err)
	}

	// The worker's own failure ends its lease: the next admission asks
	// Redis, and a host that failed last is not leased.
	a, err = admit(w, "own.example") // asks Redis, leases 16
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Record(ctx, "own.example", a, classify.Result{Outcome: classify.Transient}); err != nil {
		t.Fatal(err)
	}
	hook.reset()
	for range 3 {
		if _, err := admit(w, "own.example"); err != nil {
			t.Fatal(err)
		}
	}
	if n := hook.trips.Load(); n != 3 {
		t.Errorf("after its own failure: %d round trips for 3 admissions, want 3 (no lease)", n)
	}

	// 600 a minute gives 1 token in 100ms: never leased, even with a
	// burst to spare.
	slow, err := redisstore.New(c, leaseConfig(t, clk, 600, 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admit(slow, "slow.example"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	hook.reset()
	for range 5 {
		if _, err := admit(slow, "slow.example"); err != nil {
			t.Fatal(err)
		}
	}
	if n := hook.trips.Load(); n != 5 {
		t.Errorf("a host at 600 a minute: %d round trips for 5 admissions, want 5 (no lease)", n)
	}
}

// TestLeaseWindowConfig: a window over a second is refused by New.
func TestLeaseWindowConfig(t *testing.T) {
	cfg := leaseConfig(t, newClock(), 60, 1)
	cfg.LeaseWindow = 2 * time.Second
	_, err := redisstore.New(redistest.Dial(t, redistest.Addr(t)), cfg)
	if !errors.Is(err, egresskit.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), "LeaseWindow") {
		t.Errorf("New with LeaseWindow 2s: %v, want ErrInvalidConfig naming LeaseWindow", err)
	}
}
