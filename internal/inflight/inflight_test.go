package inflight_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/inflight"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int
		perSec   float64
		latency  time.Duration
		headroom float64
		want     int
	}{
		{"unknown rate", 16, 0, time.Second, 1.5, 1},
		{"unknown latency", 16, 10, 0, 1.5, 1},
		{"below one", 16, 1, 100 * time.Millisecond, 1.5, 1},
		{"rounds up", 16, 10, time.Second, 1.25, 13},
		{"exact", 16, 10, time.Second, 1, 10},
		{"capped", 16, 10, 10 * time.Second, 1.5, 16},
		{"max one", 1, 100, time.Second, 1.5, 1},
		{"default pace, fast host", 16, 1, 50 * time.Millisecond, 1.5, 1},
		{"default pace, 2s host", 16, 1, 2 * time.Second, 1.5, 3},
		{"NaN rate", 16, nanRate(), time.Second, 1.5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inflight.Limit(tc.max, tc.perSec, tc.latency, tc.headroom); got != tc.want {
				t.Errorf("Limit(%d, %v, %v, %v) = %d, want %d", tc.max, tc.perSec, tc.latency, tc.headroom, got, tc.want)
			}
		})
	}
}

func nanRate() float64 {
	var zero float64
	return zero / zero
}

// server answers a round of n attempts sent together: the i-th (from 0)
// after latency(i, n).
type server func(i, n int) time.Duration

// steady answers every attempt after d, whatever the load: a far host.
func steady(d time.Duration) server { return func(int, int) time.Duration { return d } }

// queueing serves workers attempts at once, each in service, first come
// first served: the i-th waits for the i/workers before it.
func queueing(workers int, service time.Duration) server {
	return func(i, _ int) time.Duration { return time.Duration(i/workers+1) * service }
}

// round is rounds round trips of up to demand attempts sent together to
// a host served by srv; then the limit in force must be in [lo, hi].
type round struct {
	rounds, demand int
	srv            server
	lo, hi         int
}

// TestWindow sends rounds of attempts, all at once, up to the limit in
// force, to hosts on a fake clock, and checks the limit after each step.
func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		perMin float64 // the host's pacing rate
		steps  []round
	}{
		{"new host", 16, 6000, []round{{0, 0, nil, 2, 2}}},
		{"new host, max 1", 1, 6000, []round{{0, 0, nil, 1, 1}}},
		// Up to twice a round trip: by one an answer, but never past
		// twice what the host served in a base latency lately, which lags.
		{"slow start: half as much again or more each round trip", 16, 6000, []round{
			{1, 32, steady(100 * time.Millisecond), 3, 4},
			{1, 32, steady(100 * time.Millisecond), 5, 8},
			{1, 32, steady(100 * time.Millisecond), 8, 15},
			{1, 32, steady(100 * time.Millisecond), 12, 15},
			{1, 32, steady(100 * time.Millisecond), 15, 15}, // 100/s × 0.1s × 1.5
		}},
		{"one at a time: no growth", 16, 6000, []round{{50, 1, steady(100 * time.Millisecond), 2, 2}}},
		{"far steady host: rate × latency × 1.5", 16, 600, []round{
			{10, 32, steady(time.Second), 15, 15},
			{100, 32, steady(time.Second), 15, 15},
		}},
		{"queueing server: workers to twice the workers", 16, 6000, []round{
			{5, 32, queueing(4, 100*time.Millisecond), 4, 8},
			{100, 32, queueing(4, 100*time.Millisecond), 4, 8},
		}},
		{"queueing server, 2 workers", 16, 6000, []round{{100, 32, queueing(2, 100*time.Millisecond), 2, 4}}},
		{"queueing server, 1 worker", 16, 6000, []round{{100, 32, queueing(1, 100*time.Millisecond), 1, 2}}},
		{"grows back by one a round trip once the queue is gone", 16, 6000, []round{
			{50, 32, queueing(4, 100*time.Millisecond), 4, 8},
			{4, 32, steady(100 * time.Millisecond), 6, 12},
			{12, 32, steady(100 * time.Millisecond), 15, 15},
		}},
		{"a host slower for good under one attempt is not cut", 16, 600, []round{
			{10, 1, steady(time.Second), 2, 2},
			{50, 1, steady(3 * time.Second), 2, 2},
		}},
		{"a slow pace needs few slots", 16, 60, []round{{20, 32, steady(time.Second), 2, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			l := inflight.New(inflight.Config{Max: tc.max, Now: c.Now})
			l.SetRate("h", tc.perMin, 0)
			for i, s := range tc.steps {
				for range s.rounds {
					start := c.Now()
					var held []func()
					for len(held) < s.demand && len(held) < l.Of("h").Limit {
						rel, waited, err := l.Acquire(t.Context(), "h")
						if err != nil || waited {
							t.Fatalf("Acquire under the limit: waited %v, err %v", waited, err)
						}
						held = append(held, rel)
					}
					for j, rel := range held {
						d := s.srv(j, len(held))
						c.Add(start.Add(d).Sub(c.Now()))
						l.Observe("h", d)
						rel()
					}
					l.SetRate("h", tc.perMin, 0)
				}
				if st := l.Of("h"); st.Limit < s.lo || st.Limit > s.hi {
					t.Errorf("step %d: limit %d, want %d..%d (%+v)", i, st.Limit, s.lo, s.hi, st)
				}
			}
		})
	}
}

// acquire starts Acquire on its own goroutine and returns its result.
func acquire(ctx context.Context, l *inflight.Limits, key string) <-chan func() {
	ch := make(chan func(), 1)
	go func() {
		rel, _, err := l.Acquire(ctx, key)
		if err != nil {
			rel = nil
		}
		ch <- rel
	}()
	return ch
}

func waitWaiting(t *testing.T, l *inflight.Limits, key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); l.Of(key).Waiting != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", l.Of(key).Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAcquireWaits(t *testing.T) {
	c := newClock()
	l := inflight.New(inflight.Config{Max: 16, Now: c.Now})
	ctx := t.Context()
	// A new host: up to the initial window.
	var early []func()
	for range inflight.InitialWindow {
		rel, waited, err := l.Acquire(ctx, "h")
		if waited {
			t.Error("waited under the limit")
		}
		if err != nil {
			t.Fatal(err)
		}
		early = append(early, rel)
	}
	// Known at 10/s and 50ms: 1.
	l.SetRate("h", 600, 0)
	l.Observe("h", 50*time.Millisecond)
	for _, rel := range early[1:] {
		rel()
	}
	first := early[0]
	second := acquire(ctx, l, "h")
	waitWaiting(t, l, "h", 1)
	third := acquire(ctx, l, "h")
	waitWaiting(t, l, "h", 2)
	if st := l.Of("h"); st.InFlight != 1 || st.Limit != 1 {
		t.Fatalf("state %+v, want 1 in flight, limit 1", st)
	}
	// Other hosts are not held.
	if rel, _, err := l.Acquire(ctx, "other"); err != nil {
		t.Fatal(err)
	} else {
		rel()
	}
	// A faster pace raises the limit to the window, 2: the first waiter
	// goes.
	l.SetRate("h", 2000, 0) // 33.3/s × 0.05s × 1.5 = 2.5 → 3, over the window
	rel2 := <-second
	if st := l.Of("h"); st.InFlight != 2 || st.Waiting != 1 || st.Limit != 2 || st.Peak != 2 {
		t.Fatalf("state %+v, want 2 in flight, 1 waiting, limit 2, peak 2", st)
	}
	// A slot given back goes to the next waiter.
	first()
	rel3 := <-third
	if st := l.Of("h"); st.InFlight != 2 || st.Waiting != 0 {
		t.Fatalf("state %+v, want 2 in flight, none waiting", st)
	}
	rel2()
	rel3()
	if st := l.Of("h"); st.InFlight != 0 {
		t.Fatalf("state %+v after release, want none in flight", st)
	}
}

func TestAcquireFIFOAndCancel(t *testing.T) {
	l := inflight.New(inflight.Config{Max: 1})
	hold, _, err := l.Acquire(t.Context(), "h")
	if err != nil {
		t.Fatal(err)
	}
	ctxA, cancelA := context.WithCancel(t.Context())
	a := acquire(ctxA, l, "h")
	waitWaiting(t, l, "h", 1)
	b := acquire(t.Context(), l, "h")
	waitWaiting(t, l, "h", 2)
	cancelA()
	if rel := <-a; rel != nil {
		t.Fatal("a canceled waiter got a slot")
	}
	waitWaiting(t, l, "h", 1)
	hold()
	rel := <-b
	if rel == nil {
		t.Fatal("b did not get the slot")
	}
	rel()
	if st := l.Of("h"); st.InFlight != 0 || st.Waiting != 0 {
		t.Fatalf("state %+v, want empty", st)
	}
	// A deadline that ends the wait returns its error.
	hold, _, _ = l.Acquire(t.Context(), "h")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := l.Acquire(ctx, "h"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	hold()
}

// TestNeverAboveLimit runs many acquirers against a limit of 2 and checks
// no more than 2 are in flight at once.
func TestNeverAboveLimit(t *testing.T) {
	l := inflight.New(inflight.Config{Max: 2})
	l.SetRate("h", 6000, 0)
	l.Observe("h", time.Second)
	var (
		mu      sync.Mutex
		in, top int
		wg      sync.WaitGroup
	)
	for range 20 {
		wg.Go(func() {
			for range 50 {
				rel, _, err := l.Acquire(t.Context(), "h")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				in++
				top = max(top, in)
				mu.Unlock()
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				in--
				mu.Unlock()
				rel()
			}
		})
	}
	wg.Wait()
	if top != 2 {
		t.Errorf("at most %d in flight, want 2", top)
	}
}

// TestNoAllocations: taking a slot under the limit, feeding its answer and
// giving it back allocate nothing, once the host is known.
func TestNoAllocations(t *testing.T) {
	c := newClock()
	l := inflight.New(inflight.Config{Max: 16, Now: c.Now})
	l.SetRate("h", 6000, 0)
	ctx := t.Context()
	step := func() {
		rel, _, err := l.Acquire(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		c.Add(100 * time.Millisecond)
		l.Observe("h", 100*time.Millisecond)
		rel()
	}
	step()
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Errorf("%v allocations an attempt, want 0", n)
	}
}
