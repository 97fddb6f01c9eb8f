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
		name  string
		obs   telemetry.Observer
		wantA int64
		wantB int64
	}{
		{"none", telemetry.Fanout(), 0, 0},
		{"nils", telemetry.Fanout(nil, nil), 0, 0},
		{"empty nested", telemetry.Fanout(telemetry.Fanout()), 0, 0},
		{"one", telemetry.Fanout(nil, a), 1, 0},
		{"two", telemetry.Fanout(a, b), 1, 1},
		{"nested", telemetry.Fanout(telemetry.Fanout(a, nil, b), telemetry.Fanout(b, a)), 2, 2},
	}
	for _, tt := range tests {
		a.n.Store(0)
		b.n.Store(0)
		tt.obs.Observe(context.Background(), &telemetry.Event{})
		if a.n.Load() != tt.wantA || b.n.Load() != tt.wantB {
			t.Errorf("%s: observed a=%d b=%d, want a=%d b=%d", tt.name, a.n.Load(), b.n.Load(), tt.wantA, tt.wantB)
		}
	}
}

func TestFanoutNoObserverAllocatesNothing(t *testing.T) {
	obs := telemetry.Fanout()
	ctx := context.Background()
	e := &telemetry.Event{Host: "example.com"}
	allocs := testing.AllocsPerRun(100, func() {
		obs.Observe(ctx, e)
	})
	if allocs != 0 {
		t.Errorf("allocs with no observer = %v, want 0", allocs)
	}
}

// TestAsyncWithoutBufferRecoversPanics: with no buffer, Async delivers on
// the caller's goroutine, with the caller's context, and recovers panics.
func TestAsyncWithoutBufferRecoversPanics(t *testing.T) {
	after := &counter{}
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cancel()
	var sawCaller atomic.Int64
	s := telemetry.NewAsync(telemetry.ObserverFunc(func(ctx context.Context, _ *telemetry.Event) {
		if ctx.Value(key{}) == "v" && ctx.Err() != nil {
			sawCaller.Add(1)
		}
		panic("observer bug")
	}), -1)
	obs := telemetry.Fanout(s, after)
	for range 3 {
		obs.Observe(ctx, &telemetry.Event{})
		// Delivered before Observe returned.
		if int64(s.Panics()) != after.n.Load() {
			t.Fatalf("Panics() = %d after %d events: not delivered at once", s.Panics(), after.n.Load())
		}
	}
	if got := s.Panics(); got != 3 {
		t.Errorf("Panics() = %d, want 3", got)
	}
	if got := after.n.Load(); got != 3 {
		t.Errorf("observer after the panicking one saw %d events, want 3", got)
	}
	if got := sawCaller.Load(); got != 3 {
		t.Errorf("observer saw the caller's context %d times, want 3", got)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	obs.Observe(ctx, &telemetry.Event{})
	if s.Panics() != 3 || s.Dropped() != 1 {
		t.Errorf("after Close: Panics() = %d, Dropped() = %d, want 3 and 1", s.Panics(), s.Dropped())
	}
	nop := telemetry.NewAsync(nil, -1)
	nop.Observe(context.Background(), &telemetry.Event{})
	nop.Close()
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
