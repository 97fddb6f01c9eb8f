package redisstore_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// heldConfig is a FailClosed Config on a fake clock whose OKs are held
// back for delay.
func heldConfig(t *testing.T, clk *clock, delay time.Duration) redisstore.Config {
	return redisstore.Config{
		Prefix:       redistest.Prefix(t),
		HostState:    hoststate.Config{Breaker: breaker.Config{FailureThreshold: 3}},
		OnRedisError: redisstore.FailClosed,
		Timeout:      testTimeout,
		RecordDelay:  delay,
		Now:          clk.Now,
	}
}

func admitOK(t *testing.T, st *redisstore.Store, host string) {
	t.Helper()
	ctx := context.Background()
	a, err := st.Admit(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := st.Record(ctx, host, a, classify.Result{Outcome: classify.OK})
	if err != nil || eff != (hoststate.Effect{From: breaker.Closed, To: breaker.Closed}) {
		t.Fatalf("Record(OK) = %+v, %v; want closed→closed", eff, err)
	}
}

func recentOK(t *testing.T, st *redisstore.Store, host string) int {
	t.Helper()
	s, err := st.Status(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	return s.Recent.OK
}

// TestHeldOKsRideWithNextScript: an OK held back reaches Redis with the
// worker's next admission of the host (another worker sees it then), with
// its next other outcome, or with Flush; the worker's own Status sees it
// at once.
func TestHeldOKsRideWithNextScript(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	clk := newClock()
	cfg := heldConfig(t, clk, time.Minute)
	w, obs := mustState(t, addr, cfg), mustState(t, addr, cfg)
	const host = "held.example"

	admitOK(t, w, host)
	if n := recentOK(t, obs, host); n != 0 {
		t.Errorf("other worker, before the next admission: %d OKs, want 0 (held back)", n)
	}
	a, err := w.Admit(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if n := recentOK(t, obs, host); n != 1 {
		t.Errorf("other worker, after the next admission: %d OKs, want 1", n)
	}
	if _, err := w.Record(ctx, host, a, classify.Result{Outcome: classify.OK}); err != nil {
		t.Fatal(err)
	}
	if n := recentOK(t, w, host); n != 2 {
		t.Errorf("own Status: %d OKs, want 2", n)
	}
	admitOK(t, w, host)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := recentOK(t, obs, host); n != 3 {
		t.Errorf("other worker, after Flush: %d OKs, want 3", n)
	}
}

// TestQuotaOKRecordedAtOnce: an OK stating a quota is not held back:
// another worker's Status sees the rate it set before any other script.
func TestQuotaOKRecordedAtOnce(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	clk := newClock()
	cfg := heldConfig(t, clk, time.Minute)
	w, obs := mustState(t, addr, cfg), mustState(t, addr, cfg)
	const host = "quota.example"
	a, err := w.Admit(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Record(ctx, host, a, classify.Result{Outcome: classify.OK, Status: 200, Quota: 20}); err != nil {
		t.Fatal(err)
	}
	s, err := obs.Status(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if s.Recent.OK != 1 || s.PerMinute != 20 {
		t.Errorf("other worker after an OK with a quota of 20/min: %d OKs at %v/min, want 1 at 20", s.Recent.OK, s.PerMinute)
	}
}

// TestHeldOKsCountBeforeLaterOutcomes: OKs held back are applied before
// the outcome whose script carries them, in the order they came, so an
// OK does not wipe out a failure that came after it; and an OK that met
// an open breaker (as this worker last saw it) is recorded at once, with
// its true effect.
func TestHeldOKsCountBeforeLaterOutcomes(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st := mustState(t, redistest.Addr(t), heldConfig(t, clk, time.Minute))
	const host = "order.example"

	a1, _ := st.Admit(ctx, host)
	a2, _ := st.Admit(ctx, host)
	a3, _ := st.Admit(ctx, host)
	st.Record(ctx, host, a1, classify.Result{Outcome: classify.OK})
	st.Record(ctx, host, a2, classify.Result{Outcome: classify.Transient})
	s, err := st.Status(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if s.ConsecutiveFailures != 1 || s.Recent.OK != 1 {
		t.Errorf("OK then failure: %d failures, %d OKs; want 1 and 1", s.ConsecutiveFailures, s.Recent.OK)
	}
	for range 2 {
		a, _ := st.Admit(ctx, host)
		st.Record(ctx, host, a, classify.Result{Outcome: classify.Transient})
	}
	eff, err := st.Record(ctx, host, a3, classify.Result{Outcome: classify.OK})
	if err != nil || eff.From != breaker.Open || eff.To != breaker.Open {
		t.Errorf("OK after the breaker opened = %+v, %v; want open→open", eff, err)
	}
}

// TestHeldOKsAppliedAtTheirTime: an OK held back counts at the time it was
// recorded, not when it reached Redis: recorded 10s before the window of
// recent outcomes ends, it still counts there, and the window is not
// restarted by it.
func TestHeldOKsAppliedAtTheirTime(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	cfg := heldConfig(t, clk, time.Minute)
	cfg.HostState.Limit.Window = time.Minute
	w, obs := mustState(t, redistest.Addr(t), cfg), mustState(t, redistest.Addr(t), cfg)
	const host = "when.example"

	start := clk.Now()
	admitOK(t, w, host) // opens the window at start
	clk.Advance(50 * time.Second)
	admitOK(t, w, host)
	clk.Advance(20 * time.Second) // the window has ended; the OK at 50s was in it
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := obs.Status(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if !s.RecentSince.IsZero() || s.Recent.OK != 0 {
		t.Errorf("after the window: %d OKs since %v, want none (both OKs fell in the window that began at %v)", s.Recent.OK, s.RecentSince, start)
	}
}

// TestHeldOKsSentByTimer: without any further call, a held OK reaches
// Redis by RecordDelay's timer.
func TestHeldOKsSentByTimer(t *testing.T) {
	addr := redistest.Addr(t)
	cfg := redisstore.Config{Prefix: redistest.Prefix(t), OnRedisError: redisstore.FailClosed, Timeout: testTimeout, RecordDelay: 20 * time.Millisecond}
	w, obs := mustState(t, addr, cfg), mustState(t, addr, cfg)
	const host = "timer.example"
	admitOK(t, w, host)
	deadline := time.Now().Add(10 * time.Second)
	for recentOK(t, obs, host) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the held OK did not reach Redis within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHeldOKsOfManyHostsSentInOnePipeline: what the timer sends for many
// hosts goes in one round trip, and reaches every host's state.
func TestHeldOKsOfManyHostsSentInOnePipeline(t *testing.T) {
	addr := redistest.Addr(t)
	cfg := redisstore.Config{Prefix: redistest.Prefix(t), OnRedisError: redisstore.FailClosed, Timeout: testTimeout,
		RecordDelay: 200 * time.Millisecond, CheckInterval: -1}
	c := redistest.Dial(t, addr)
	hook := newCounter()
	c.AddHook(hook)
	w, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	obs := mustState(t, addr, cfg)
	hosts := make([]string, 20)
	for i := range hosts {
		hosts[i] = "many" + strconv.Itoa(i) + ".example"
	}
	ctx := context.Background()
	var admitted []hoststate.Admission
	for _, h := range hosts { // admitted together, so that their OKs are due together
		a, err := w.Admit(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		admitted = append(admitted, a)
	}
	// The flush script loaded, so that no NOSCRIPT is counted.
	admitOK(t, w, "warm.example")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	hook.reset()
	for i, h := range hosts {
		if _, err := w.Record(ctx, h, admitted[i], classify.Result{Outcome: classify.OK}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, h := range hosts {
		for recentOK(t, obs, h) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the held OK did not reach Redis within 10s", h)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Host by host, that would be 20 round trips; a new connection's
	// handshake (HELLO, CLIENT SETINFO) may add its own.
	hook.mu.Lock()
	defer hook.mu.Unlock()
	n, trips := hook.names["evalsha"], hook.trips.Load()
	if n != len(hosts) || trips > 3 {
		t.Errorf("the timer sent %d EVALSHA (all commands: %v) in %d round trips, want %d in one pipeline", n, hook.names, trips, len(hosts))
	}
}

// TestHeldOKsJoinThrottleEstimate: a fleet's OKs held back when another
// worker's throttle comes count in the throttle's estimate when they
// reach Redis, at the times they were answered. At 120/min, one worker
// records OKs at once at 0, 1 and 2s, the other holds back its OKs at 0.5
// and 1.5s (the first rides with its admission at 1.5s); the first worker
// is refused at 2.5s. Its estimate sees 4 OKs in 2.5s, 72/min, and the
// rate settles 3 % below. When the held OK arrives, the run has 5 OKs in
// 2.5s, 96/min: the rate rises to 3 % below that. The refused attempt is
// admitted at 2.1s and waits most of an interval for its slot: the pace
// binds the crawl, so the refusal is a limit reached, not a stray.
func TestHeldOKsJoinThrottleEstimate(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	now := heldConfig(t, clk, -1)
	now.HostState.Limit.PerMinute = 120
	held := now
	held.RecordDelay = time.Minute
	w, h := mustState(t, redistest.Addr(t), now), mustState(t, redistest.Addr(t), held)
	const host = "fleet.example"
	wantRate := func(what string, want float64) {
		t.Helper()
		s, err := w.Status(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(s.PerMinute-want) > 1e-6*want {
			t.Errorf("%s: rate %v, want %v", what, s.PerMinute, want)
		}
	}

	start := clk.Now()
	at := func(d time.Duration) { clk.Advance(start.Add(d).Sub(clk.Now())) }
	for i := range 5 {
		at(time.Duration(i) * 500 * time.Millisecond)
		if i%2 == 0 {
			admitOK(t, w, host)
		} else {
			admitOK(t, h, host)
		}
	}
	at(2100 * time.Millisecond)
	a, err := w.Admit(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	at(2500 * time.Millisecond)
	if _, err := w.Record(ctx, host, a, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	wantRate("429 with 4 of the 5 OKs applied", 72*0.97)
	at(3 * time.Second)
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantRate("after the held OKs arrive", 96*0.97)
}
