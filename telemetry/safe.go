package telemetry

import (
	"context"
	"sync/atomic"
)

// Safe wraps an Observer so that a panic inside it is recovered and counted
// instead of taking the request, or the process, down. The zero Safe is not
// usable; use NewSafe. Safe is safe for concurrent use.
type Safe struct {
	next   Observer
	panics atomic.Uint64
}

var _ Observer = (*Safe)(nil)

// NewSafe returns a Safe around o. A nil o observes nothing.
func NewSafe(o Observer) *Safe {
	if o == nil {
		o = Observers(nil)
	}
	return &Safe{next: o}
}

// Observe passes e to the wrapped observer and recovers any panic.
func (s *Safe) Observe(ctx context.Context, e *Event) {
	defer func() {
		if recover() != nil {
			s.panics.Add(1)
		}
	}()
	s.next.Observe(ctx, e)
}

// Panics returns how many panics were recovered so far. The panic values
// are dropped: they may carry text the observer should not have printed.
func (s *Safe) Panics() uint64 { return s.panics.Load() }
