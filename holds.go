package egresskit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
)

// holds keeps the halts the store could not take: a Refused result whose
// Record failed without the store reporting the halt (Effect.Halted), as
// a store that keeps no local copy does. Such a host is refused by this
// Transport before anything else, and the halt is offered to the store
// again, as a Refused record, on each request to the host until the store
// takes it. A Store that keeps its own copy (the Redis store does) never
// leaves a halt here. The zero value is empty and ready to use.
type holds struct {
	n  atomic.Int64 // len(m), for a lock-free fast path
	mu sync.Mutex   // guards m
	m  map[string]time.Time
}

// maxHolds bounds the halts a Transport holds for its store.
const maxHolds = 1 << 16

// heldHalt is how a held halt is offered to the store again.
var heldHalt = classify.Result{Outcome: classify.Refused, Reason: "halt held while the store failed"}

// hold holds a halt of host that began at since, and reports whether it is
// new (not held already): the caller escalates it then.
func (h *holds) hold(host string, since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[host]; ok {
		return false
	}
	if h.m == nil {
		h.m = make(map[string]time.Time)
	}
	if len(h.m) < maxHolds {
		h.m[host] = since
		h.n.Store(int64(len(h.m)))
	}
	return true
}

// release drops a held halt of host, and reports whether there was one.
func (h *holds) release(host string) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[host]
	delete(h.m, host)
	h.n.Store(int64(len(h.m)))
	return ok
}

// check returns a *breaker.HaltError when host's halt is held, after
// offering it to s once more: when s takes it, s enforces it from then on
// and the hold is dropped.
func (h *holds) check(ctx context.Context, s hoststate.Store, host string) error {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	since, ok := h.m[host]
	h.mu.Unlock()
	if !ok {
		return nil
	}
	if _, err := s.Record(ctx, host, hoststate.Admission{}, heldHalt); err == nil {
		h.release(host)
	}
	return &breaker.HaltError{Host: host, HaltedAt: since}
}
