package retrier

import (
	"context"
	"sync"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// attemptTimer is an attempt's AttemptTimeout: it cancels the attempt's
// context with classify.ErrAttemptTimeout when it runs out, and can be held
// while a layer below waits before sending (holdAttemptTimer).
type attemptTimer struct {
	cancel context.CancelCauseFunc

	mu        sync.Mutex    // guards the fields below
	t         *time.Timer   // nil while held
	remaining time.Duration // what is left when held
	started   time.Time     // when t was started
	done      bool          // the attempt is over
}

// startAttemptTimer returns ctx bounded by d and the function that releases
// it, and makes the timer the call's current one. Unlike a context
// deadline, the bound can be held (holdAttemptTimer).
func (c *call) startAttemptTimer(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	at := &attemptTimer{cancel: cancel, remaining: d}
	at.start()
	c.timer = at
	return ctx, func() {
		at.mu.Lock()
		at.done = true
		if at.t != nil {
			at.t.Stop()
		}
		at.mu.Unlock()
		cancel(context.Canceled)
	}
}

func (at *attemptTimer) start() {
	at.started = time.Now()
	at.t = time.AfterFunc(at.remaining, func() { at.cancel(classify.ErrAttemptTimeout) })
}

// holdAttemptTimer is firstsend.HoldAttemptTimer: the chain holds the
// attempt's timer while the attempt waits for its pacing token, so that
// AttemptTimeout counts from sending, as Policy documents.
func holdAttemptTimer(ctx context.Context) (resume func()) {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil || c.timer == nil {
		return func() {}
	}
	at := c.timer
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.t == nil || at.done || !at.t.Stop() {
		return func() {} // already held, over, or fired
	}
	at.remaining -= time.Since(at.started)
	at.t = nil
	return func() {
		at.mu.Lock()
		defer at.mu.Unlock()
		if at.t == nil && !at.done {
			at.start()
		}
	}
}
