package telemetry

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Async guards the request path from an observer: a crawler author wraps a
// slow or untrusted observer in one. Observe copies the event into a
// bounded buffer and returns at once; one goroutine owned by the Async
// delivers buffered events in order. When the buffer is full the event is
// dropped and counted, never waited for. Panics in the wrapped observer
// are recovered and counted. Close stops accepting events, delivers what
// is buffered and waits for the goroutine.
//
// With no buffer (NewAsync with a negative size), Async only recovers and
// counts the panics of an observer that is fast but not trusted: Observe
// calls it on the caller's goroutine, with the caller's context.
//
// Async is safe for concurrent use.
type Async struct {
	next    Observer
	dropped atomic.Uint64
	panics  atomic.Uint64
	done    chan struct{}

	// mu guards closed and sending on (and closing) ch; without a buffer,
	// Observe holds it (read) while it delivers, so that Close waits for
	// deliveries in progress.
	mu     sync.RWMutex
	closed bool
	ch     chan asyncItem // nil without a buffer
}

type asyncItem struct {
	ctx context.Context
	e   Event
}

var _ Observer = (*Async)(nil)

// NewAsync starts an Async delivering to o through a buffer of the given
// number of events. Zero means 1024; a negative buffer means none: events
// are delivered at once, on the caller's goroutine, and no goroutine is
// started. A nil o observes nothing. The caller must call Close.
func NewAsync(o Observer, buffer int) *Async {
	if o == nil {
		o = observers(nil)
	}
	a := &Async{next: o, done: make(chan struct{})}
	if buffer < 0 {
		close(a.done)
		return a
	}
	if buffer == 0 {
		buffer = 1024
	}
	a.ch = make(chan asyncItem, buffer)
	go a.run()
	return a
}

// Observe queues a copy of e, or drops it when the buffer is full or the
// Async is closed. The wrapped observer later receives ctx stripped of its
// cancellation (context.WithoutCancel), so values such as trace IDs remain.
// Without a buffer, Observe passes e and ctx to the wrapped observer
// itself, unless the Async is closed (then e is dropped).
func (a *Async) Observe(ctx context.Context, e *Event) {
	if a.ch == nil {
		a.observeNow(ctx, e)
		return
	}
	item := asyncItem{ctx: context.WithoutCancel(ctx), e: *e}
	item.e.Markers = slices.Clone(e.Markers)
	a.mu.RLock()
	sent := false
	if !a.closed {
		select {
		case a.ch <- item:
			sent = true
		default:
		}
	}
	a.mu.RUnlock()
	if !sent {
		a.dropped.Add(1)
	}
}

func (a *Async) run() {
	defer close(a.done)
	for item := range a.ch {
		a.deliver(&item)
	}
}

func (a *Async) deliver(item *asyncItem) { a.call(item.ctx, &item.e) }

// observeNow delivers e on the caller's goroutine (no buffer).
func (a *Async) observeNow(ctx context.Context, e *Event) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		a.dropped.Add(1)
		return
	}
	a.call(ctx, e)
}

// call passes e to the wrapped observer and recovers any panic. The panic
// values are dropped: they may carry text the observer should not have
// printed.
func (a *Async) call(ctx context.Context, e *Event) {
	defer func() {
		if recover() != nil {
			a.panics.Add(1)
		}
	}()
	a.next.Observe(ctx, e)
}

// Dropped returns how many events were dropped because the buffer was full
// or the Async was closed.
func (a *Async) Dropped() uint64 { return a.dropped.Load() }

// Panics returns how many panics of the wrapped observer were recovered.
func (a *Async) Panics() uint64 { return a.panics.Load() }

// Close stops accepting events, waits until the buffered ones have been
// delivered and the goroutine has ended (without a buffer: until the
// deliveries in progress have returned), and returns nil. Closing twice is
// harmless. Close waits for the wrapped observer: one that blocks forever
// blocks Close.
func (a *Async) Close() error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		if a.ch != nil {
			close(a.ch)
		}
	}
	a.mu.Unlock()
	<-a.done
	return nil
}
