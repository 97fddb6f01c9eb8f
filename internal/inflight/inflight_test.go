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

// TestLatencyEstimate feeds a host's time to headers over fake time and
// checks the limit in force.
func TestLatencyEstimate(t *testing.T) {
	type step struct {
		every   time.Duration
		n       int
		ttfb    time.Duration
		wantMin int // limit in force after the samples
		wantMax int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"far host, steady", []step{
			{100 * time.Millisecond, 600, 800 * time.Millisecond, 12, 12}, // 10/s × 0.8s × 1.5
		}},
		{"own queue does not raise the cap", []step{
			{100 * time.Millisecond, 20, time.Second, 15, 15},
			// Our attempts queue at the server: its latency doubles within a
			// minute; the cap stays near the unloaded latency's.
			{100 * time.Millisecond, 600, 2 * time.Second, 15, 18},
		}},
		{"faster host lowers it at once", []step{
			{100 * time.Millisecond, 20, time.Second, 15, 15},
			{100 * time.Millisecond, 20, 200 * time.Millisecond, 3, 4},
		}},
		{"slower host raises it over minutes", []step{
			{100 * time.Millisecond, 20, 200 * time.Millisecond, 3, 3},
			{time.Second, 1800, time.Second, 15, 15},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			l := inflight.New(inflight.Config{Max: 16, Now: c.Now})
			l.SetRate("h", 600)
			for i, s := range tc.steps {
				for range s.n {
					c.Add(s.every)
					l.Observe("h", s.ttfb)
				}
				l.SetRate("h", 600)
				if got := l.Of("h").Limit; got < s.wantMin || got > s.wantMax {
					t.Errorf("step %d: limit %d, want %d..%d (latency %v)", i, got, s.wantMin, s.wantMax, l.Of("h").Latency)
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
	// Nothing known yet: up to Max.
	var early []func()
	for range 16 {
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
	l.SetRate("h", 600)
	l.Observe("h", 50*time.Millisecond)
	for _, rel := range early[1:] {
		rel()
	}
	first := early[0]
	second := acquire(ctx, l, "h")
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
	// A faster pace raises the limit to 3: both waiters go.
	l.SetRate("h", 2000) // 33.3/s × 0.05s × 1.5 = 2.5 → 3
	var got []func()
	for range 2 {
		select {
		case rel := <-second:
			got = append(got, rel)
		case rel := <-third:
			got = append(got, rel)
		case <-time.After(5 * time.Second):
			t.Fatal("waiters not let in when the limit rose")
		}
	}
	if st := l.Of("h"); st.InFlight != 3 || st.Waiting != 0 || st.Peak != 3 {
		t.Fatalf("state %+v, want 3 in flight, none waiting, peak 3", st)
	}
	first()
	for _, rel := range got {
		rel()
	}
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

// TestNeverAboveLimit runs many acquirers against a limit of 3 and checks
// no more than 3 are in flight at once.
func TestNeverAboveLimit(t *testing.T) {
	l := inflight.New(inflight.Config{Max: 3})
	l.SetRate("h", 6000)
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
	if top != 3 {
		t.Errorf("at most %d in flight, want 3", top)
	}
}

// TestRisenLatencyLowersLimit keeps 15 attempts in flight to a host whose
// latency doubles under them: the limit falls below the 15 that Little's
// law gives at its unloaded latency, and comes back once the latency is
// back; a host whose latency rises with one attempt in flight keeps its
// limit.
func TestRisenLatencyLowersLimit(t *testing.T) {
	c := newClock()
	l := inflight.New(inflight.Config{Max: 16, Now: c.Now})
	l.SetRate("h", 600)
	feed := func(n int, ttfb time.Duration) {
		for range n {
			c.Add(125 * time.Millisecond)
			l.Observe("h", ttfb)
		}
		l.SetRate("h", 600)
	}
	feed(40, time.Second)
	if got := l.Of("h").Limit; got != 15 {
		t.Fatalf("limit %d at 1s, want 15", got)
	}
	var held []func()
	for range 15 {
		rel, _, err := l.Acquire(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, rel)
	}
	feed(80, 2*time.Second) // 10s at twice the latency
	low := l.Of("h").Limit
	if low > 8 {
		t.Errorf("limit %d after 10s of risen latency, want at most 8", low)
	}
	feed(160, time.Second) // 20s back at 1s
	if got := l.Of("h").Limit; got < 14 {
		t.Errorf("limit %d 20s after the latency came back, want 14 or more (was %d)", got, low)
	}
	for _, rel := range held[1:] {
		rel()
	}
	// One attempt in flight: a risen latency is the host's, not our load's.
	l2 := inflight.New(inflight.Config{Max: 16, Now: c.Now})
	l2.SetRate("h", 600)
	for range 40 {
		c.Add(125 * time.Millisecond)
		l2.Observe("h", time.Second)
	}
	one, _, _ := l2.Acquire(t.Context(), "h")
	for range 80 {
		c.Add(125 * time.Millisecond)
		l2.Observe("h", 2*time.Second)
	}
	l2.SetRate("h", 600)
	if got := l2.Of("h").Limit; got < 15 {
		t.Errorf("limit %d with one attempt in flight, want 15 or more", got)
	}
	one()
	held[0]()
}
