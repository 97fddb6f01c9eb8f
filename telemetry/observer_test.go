package telemetry_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/egresskit/egresskit/telemetry"
)

type counter struct{ n atomic.Int64 }

func (c *counter) Observe(context.Context, *telemetry.Event) { c.n.Add(1) }

func TestFanout(t *testing.T) {
	a, b := &counter{}, &counter{}
	tests := []struct {
		name    string
		obs     telemetry.Observer
		enabled bool
		wantA   int64
		wantB   int64
	}{
		{"none", telemetry.Fanout(), false, 0, 0},
		{"nils", telemetry.Fanout(nil, nil), false, 0, 0},
		{"empty nested", telemetry.Fanout(telemetry.Observers{}), false, 0, 0},
		{"one", telemetry.Fanout(nil, a), true, 1, 0},
		{"two", telemetry.Fanout(a, b), true, 1, 1},
		{"nested", telemetry.Fanout(telemetry.Observers{a, nil}, telemetry.Fanout(b, a)), true, 2, 1},
	}
	for _, tt := range tests {
		a.n.Store(0)
		b.n.Store(0)
		if got := telemetry.Enabled(tt.obs); got != tt.enabled {
			t.Errorf("%s: Enabled() = %v, want %v", tt.name, got, tt.enabled)
		}
		tt.obs.Observe(context.Background(), &telemetry.Event{})
		if a.n.Load() != tt.wantA || b.n.Load() != tt.wantB {
			t.Errorf("%s: observed a=%d b=%d, want a=%d b=%d", tt.name, a.n.Load(), b.n.Load(), tt.wantA, tt.wantB)
		}
	}
	if telemetry.Enabled(nil) {
		t.Errorf("Enabled(nil) = true, want false")
	}
}

func TestFanoutNoObserverAllocatesNothing(t *testing.T) {
	obs := telemetry.Fanout()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if telemetry.Enabled(obs) {
			obs.Observe(ctx, &telemetry.Event{Host: "example.com"})
		}
	})
	if allocs != 0 {
		t.Errorf("allocs with no observer = %v, want 0", allocs)
	}
}

func TestSafeRecoversPanics(t *testing.T) {
	after := &counter{}
	s := telemetry.NewSafe(telemetry.ObserverFunc(func(context.Context, *telemetry.Event) {
		panic("observer bug")
	}))
	obs := telemetry.Fanout(s, after)
	for range 3 {
		obs.Observe(context.Background(), &telemetry.Event{})
	}
	if got := s.Panics(); got != 3 {
		t.Errorf("Panics() = %d, want 3", got)
	}
	if got := after.n.Load(); got != 3 {
		t.Errorf("observer after the panicking one saw %d events, want 3", got)
	}
	telemetry.NewSafe(nil).Observe(context.Background(), &telemetry.Event{})
}

func TestAsyncDoesNotStallAndCountsDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var got []int
		slow := telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
			<-release
			mu.Lock()
			got = append(got, e.Attempt)
			mu.Unlock()
		})
		a := telemetry.NewAsync(slow, 4)
		ev := &telemetry.Event{Markers: []string{"m"}}
		for i := 1; i <= 10; i++ {
			ev.Attempt = i
			a.Observe(context.Background(), ev) // must never block
			if i == 1 {
				synctest.Wait() // the goroutine now holds event 1
			}
		}
		ev.Markers[0] = "changed" // the caller may reuse its event
		synctest.Wait()
		// The goroutine holds one event, the buffer four: five dropped.
		if d := a.Dropped(); d != 5 {
			t.Errorf("Dropped() = %d, want 5", d)
		}
		close(release)
		if err := a.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		want := []int{1, 2, 3, 4, 5}
		if len(got) != len(want) {
			t.Fatalf("delivered %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("delivered %v, want %v", got, want)
				break
			}
		}
		a.Observe(context.Background(), ev)
		if d := a.Dropped(); d != 6 {
			t.Errorf("Dropped() after Close = %d, want 6", d)
		}
		if err := a.Close(); err != nil {
			t.Errorf("second Close() = %v", err)
		}
	})
}

func TestAsyncCopiesEvent(t *testing.T) {
	var mu sync.Mutex
	var markers []string
	a := telemetry.NewAsync(telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
		mu.Lock()
		markers = append(markers, e.Markers...)
		mu.Unlock()
	}), 8)
	ev := &telemetry.Event{Markers: []string{"first"}}
	a.Observe(context.Background(), ev)
	ev.Markers[0] = "second"
	a.Close()
	if len(markers) != 1 || markers[0] != "first" {
		t.Errorf("async observer saw markers %v, want [first]", markers)
	}
}

func TestAsyncRecoversPanics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var sawCanceled atomic.Bool
	a := telemetry.NewAsync(telemetry.ObserverFunc(func(ctx context.Context, e *telemetry.Event) {
		if ctx.Err() != nil {
			sawCanceled.Store(true)
		}
		if e.Attempt == 1 {
			panic("boom")
		}
	}), 8)
	cancel()
	a.Observe(ctx, &telemetry.Event{Attempt: 1})
	a.Observe(ctx, &telemetry.Event{Attempt: 2})
	a.Close()
	if got := a.Panics(); got != 1 {
		t.Errorf("Panics() = %d, want 1", got)
	}
	if sawCanceled.Load() {
		t.Errorf("async observer saw the caller's cancellation")
	}
}
