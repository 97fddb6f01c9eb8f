package telemetry

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Async moves a slow observer off the request path. Observe copies the
// event into a bounded buffer and returns at once; one goroutine owned by
// the Async delivers buffered events in order. When the buffer is full the
// event is dropped and counted, never waited for. Panics in the wrapped
// observer are recovered and counted. Close stops accepting events,
// delivers what is buffered and waits for the goroutine.
//
// Async is safe for concurrent use.
type Async struct {
	next    Observer
	dropped atomic.Uint64
	panics  atomic.Uint64
	done    chan struct{}

	mu     sync.RWMutex // guards closed and sending on (and closing) ch
	closed bool
	ch     chan asyncItem
}

type asyncItem struct {
	ctx context.Context
	e   Event
}

var _ Observer = (*Async)(nil)

// NewAsync starts an Async delivering to o through a buffer of the given
// number of events. A buffer below 1 means 1024. A nil o observes nothing.
// The caller must call Close.
func NewAsync(o Observer, buffer int) *Async {
	if o == nil {
		o = Observers(nil)
	}
	if buffer < 1 {
		buffer = 1024
	}
	a := &Async{next: o, ch: make(chan asyncItem, buffer), done: make(chan struct{})}
	go a.run()
	return a
}

// Observe queues a copy of e, or drops it when the buffer is full or the
// Async is closed. The wrapped observer later receives ctx stripped of its
// cancellation (context.WithoutCancel), so values such as trace IDs remain.
func (a *Async) Observe(ctx context.Context, e *Event) {
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

func (a *Async) deliver(item *asyncItem) {
	defer func() {
		if recover() != nil {
			a.panics.Add(1)
		}
	}()
	a.next.Observe(item.ctx, &item.e)
}

// Dropped returns how many events were dropped because the buffer was full
// or the Async was closed.
func (a *Async) Dropped() uint64 { return a.dropped.Load() }

// Panics returns how many panics of the wrapped observer were recovered.
func (a *Async) Panics() uint64 { return a.panics.Load() }

// Close stops accepting events, waits until the buffered ones have been
// delivered and the goroutine has ended, and returns nil. Closing twice is
// harmless. Close waits for the wrapped observer: one that blocks forever
// blocks Close.
func (a *Async) Close() error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.ch)
	}
	a.mu.Unlock()
	<-a.done
	return nil
}
