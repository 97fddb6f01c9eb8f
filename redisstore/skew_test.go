package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/redisstore"
)

const skewHost = "skew.example"

// skewConfig opens after 3 failures for 5 minutes.
func skewConfig(prefix string, now func() time.Time) redisstore.Config {
	return redisstore.Config{
		Prefix:       prefix,
		HostState:    hoststate.Config{Breaker: breaker.Config{FailureThreshold: 3, OpenTimeout: 5 * time.Minute}},
		OnRedisError: redisstore.FailClosed,
		Timeout:      testTimeout,
		Now:          now,
	}
}

func mustState(t *testing.T, addr string, cfg redisstore.Config) *redisstore.Store {
	t.Helper()
	st, err := redisstore.New(redistest.Dial(t, addr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func tripBreaker(t *testing.T, st *redisstore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		a, err := st.Admit(ctx, skewHost)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Record(ctx, skewHost, a, classify.Result{Outcome: classify.Transient}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSkewedWorkersAgree: worker A runs on the real clock; worker B runs in
// a synctest bubble, whose clock reads 2000-01-01, decades behind A. With
// Config.Now nil every decision takes its time from the Redis server, and
// the local clock serves only to turn a context deadline into a remaining
// budget (a difference of two local readings, so skew cancels out): both
// see the same open circuit with the same reopening time, and B's request
// is refused as A's is.
func TestSkewedWorkersAgree(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	a := mustState(t, addr, skewConfig(prefix, nil))
	tripBreaker(t, a, 3)
	stA, err := a.Status(context.Background(), skewHost)
	if err != nil || stA.Breaker != breaker.Open {
		t.Fatalf("worker A: State = %+v, %v; want open", stA, err)
	}
	if d := time.Until(stA.OpenUntil); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("worker A: open until %v, %v from now; want about 5m on the server's clock", stA.OpenUntil, d)
	}

	synctest.Test(t, func(t *testing.T) {
		if skew := time.Since(stA.OpenUntil); skew > -20*365*24*time.Hour {
			t.Fatalf("worker B's clock reads %v, want decades behind", time.Now())
		}
		b := mustState(t, addr, skewConfig(prefix, nil))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stB, err := b.Status(ctx, skewHost)
		if err != nil || stB.Breaker != breaker.Open || !stB.OpenUntil.Equal(stA.OpenUntil) {
			t.Errorf("worker B: State = %v until %v, %v; want open until %v as A sees it", stB.Breaker, stB.OpenUntil, err, stA.OpenUntil)
		}
		_, err = b.Admit(ctx, skewHost)
		var oe *breaker.OpenError
		if !errors.As(err, &oe) || !oe.Until.Equal(stA.OpenUntil) {
			t.Errorf("worker B: Admit = %v, want *breaker.OpenError until %v", err, stA.OpenUntil)
		}
	})

	if _, err := a.Admit(context.Background(), skewHost); !errors.Is(err, sentinel.ErrOpen) {
		t.Errorf("worker A: Admit = %v, want sentinel.ErrOpen", err)
	}
}

// TestSkewedLocalClocksDisagree shows why Config.Now must stay nil in a
// fleet: two workers that bring their own clocks, seven minutes apart, read
// the same Redis state differently — for the one ahead, the five-minute
// open period has already ended.
func TestSkewedLocalClocksDisagree(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	now := time.Now()
	a := mustState(t, addr, skewConfig(prefix, func() time.Time { return now }))
	b := mustState(t, addr, skewConfig(prefix, func() time.Time { return now.Add(7 * time.Minute) }))
	tripBreaker(t, a, 3)
	ctx := context.Background()
	stA, errA := a.Status(ctx, skewHost)
	stB, errB := b.Status(ctx, skewHost)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if stA.Breaker != breaker.Open || stB.Breaker != breaker.HalfOpen {
		t.Errorf("with local clocks 7m apart: A sees %v, B sees %v; want open and half-open", stA.Breaker, stB.Breaker)
	}
}
