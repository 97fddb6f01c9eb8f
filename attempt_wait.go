package egresskit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/robots"
)

// readmitted is how an admission taken before a pause, or whose slot
// passed, is handed back.
var readmitted = classify.Result{Outcome: classify.Canceled, Reason: "re-admitted"}

// minSlack is the least lateness that makes an attempt miss its slot.
const minSlack = 20 * time.Millisecond

// slotSlack is how late an attempt may go out in its pacing slot: half an
// interval at perMinute, and at least minSlack.
func slotSlack(perMinute float64) time.Duration {
	if !(perMinute > 0) {
		return time.Duration(1<<63 - 1)
	}
	return max(time.Duration(30/perMinute*float64(time.Second)), minSlack)
}

// settle waits out an admission's pacing wait, then checks the host again:
// while this attempt waited, another may have halted the host, opened its
// breaker or throttled it. A halted or open host is not sent to. When a
// throttle paused the host meanwhile (its epoch moved past the
// admission's), the admission was reckoned at the old rate and is not
// honoured: it is recorded as Canceled and taken again, so that the
// attempts waiting when a pause ends go out one pacing interval apart at
// the new rate, never together. So is an admission whose slot passed
// while this process could not run (its timer fired more than half an
// interval, and at least minSlack, late): sent late, it would go out
// together with the next slot's; this is done once per attempt, so that a
// machine too busy to keep any slot cannot hold an attempt back for long.
// The wait honours ctx and ends early with its error; a wait that would
// end after limit (Config.MaxWait from the attempt's admission; zero: no
// bound) or after ctx's deadline is not begun: it ends at once with a
// *ratelimit.WaitError.
//
// settle returns the admission to send with and the host's pacing rate
// (0 when the state is unavailable). held reports whether that
// admission is still to be recorded (false only when taking it again
// failed); on an error the caller records a held admission as Canceled.
func (t *Transport) settle(ctx context.Context, key string, adm hoststate.Admission, limit time.Time) (_ hoststate.Admission, perMinute float64, held bool, _ error) {
	wait := adm.Wait
	lateOnce := true // an admission may be taken again once for lateness
	first := true    // the store checked the first wait against both bounds
	for {
		if !first {
			now := time.Now()
			if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < wait {
				return adm, 0, true, &ratelimit.WaitError{Host: key, RetryAfter: wait, Until: now.Add(wait)}
			}
			if !limit.IsZero() && limit.Sub(now) < wait {
				return adm, 0, true, &ratelimit.WaitError{Host: key, RetryAfter: wait, Until: now.Add(wait), Bound: t.maxWait}
			}
		}
		first = false
		due := time.Now().Add(wait)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return adm, 0, true, ctx.Err()
		case <-timer.C:
		}
		late := time.Since(due)
		st, err := t.state.Status(ctx, key)
		if err != nil {
			return adm, 0, true, nil // the state is unavailable: the admission stands
		}
		switch {
		case st.Halted:
			return adm, 0, true, &breaker.HaltError{Host: key, HaltedAt: st.HaltedAt}
		case st.Breaker == breaker.Open && !adm.Probe:
			return adm, 0, true, &breaker.OpenError{Host: key, Until: st.OpenUntil}
		case st.Epoch != adm.Epoch || (lateOnce && late > slotSlack(st.PerMinute)):
			lateOnce = lateOnce && st.Epoch != adm.Epoch
			t.record(ctx, key, adm, readmitted)
			next, err := t.admit(ctx, key, limit, time.Time{})
			if err != nil {
				return adm, 0, false, err
			}
			adm, wait = next, next.Wait
		default:
			wait = time.Until(st.PausedUntil)
		}
		if wait <= 0 {
			return adm, st.PerMinute, true, nil
		}
	}
}

// defaultMaxWait is what a zero Config.MaxWait means.
const defaultMaxWait = 30 * time.Second

// admitterAt is implemented by the in-memory store (hoststate.NewMemory):
// AdmitAt is its Admit deciding at a time the caller read just before.
type admitterAt interface {
	AdmitAt(ctx context.Context, host string, now time.Time) (hoststate.Admission, error)
}

// admit asks the store for an admission to key that waits until limit at
// the latest (none when limit is zero) and not past ctx's deadline: a
// longer wait reserves nothing and returns a *ratelimit.WaitError at once
// (errors.Is ErrTryLater, and context.DeadlineExceeded when the deadline
// decided). The store is handed the earlier of the two as ctx's deadline,
// the bound stores already keep. now, when not zero, is the time the
// attempt began, read just before: a store that can decide at a time it is
// given (admitterAt) decides at now rather than read the clock again.
func (t *Transport) admit(ctx context.Context, key string, limit, now time.Time) (hoststate.Admission, error) {
	at, direct := t.state.(admitterAt)
	direct = direct && !now.IsZero()
	actx := ctx
	var bc *boundedCtx
	if !limit.IsZero() {
		if dl, ok := ctx.Deadline(); !ok || dl.After(limit) {
			if direct {
				// AdmitAt keeps no reference to its context once it
				// returns: the bounded context is pooled.
				bc = boundedCtxs.Get().(*boundedCtx)
				bc.Context, bc.at = ctx, limit
			} else {
				bc = &boundedCtx{Context: ctx, at: limit}
			}
			actx = bc
		}
	}
	bounded := bc != nil
	var (
		adm hoststate.Admission
		err error
	)
	if direct {
		adm, err = at.AdmitAt(actx, key, now)
		if bc != nil {
			// Drop the request's context; a store that broke the rule
			// and kept this one would find an expired, never nil, one.
			*bc = boundedCtx{Context: context.Background()}
			boundedCtxs.Put(bc)
		}
	} else {
		adm, err = t.state.Admit(actx, key)
	}
	if err != nil {
		if de, ok := errors.AsType[*ratelimit.DeadlineError](err); ok {
			if bounded && de.Wait <= t.maxWait {
				// The store reads deadlines on a clock of its own (a
				// fake one, Config.Now) that disagrees with ours: the
				// bound cannot be read there. Ask without it.
				return t.state.Admit(ctx, key)
			}
			we := &ratelimit.WaitError{Host: key, RetryAfter: de.Wait, Until: time.Now().Add(de.Wait)}
			if bounded { // the bound decided, not the caller's deadline
				we.Bound = t.maxWait
			}
			return adm, we
		}
	}
	return adm, err
}

// boundedCtx is a request's context with an earlier deadline, the
// chain's bound on a pacing wait, for the store's Admit to reserve
// nothing past it. Only its Deadline differs (it is not canceled at
// it). Only those handed to the in-memory store's AdmitAt, which reads
// the deadline and returns, are pooled: a context another store derives
// from it (the Redis store's per-call timeout) may have a goroutine of
// package context read it after Admit has returned.
type boundedCtx struct {
	context.Context
	at time.Time
}

// Deadline returns the bound.
func (c *boundedCtx) Deadline() (time.Time, bool) { return c.at, true }

// boundedCtxs holds the boundedCtxs not in use.
var boundedCtxs = sync.Pool{New: func() any { return new(boundedCtx) }}

// notSent wraps an admission error so that every layer above reads it as
// "not sent, do not retry": Canceled when the caller's context ended,
// Permanent otherwise (halted, open, a pacing wait past the bound or the
// deadline).
func notSent(err error) error {
	r := classify.Result{Outcome: classify.Permanent, Reason: "not admitted"}
	switch {
	case errors.Is(err, ErrHalted):
		r.Reason = "host halted"
	case errors.Is(err, ErrOpen):
		r.Reason = "breaker open"
	case errors.Is(err, context.Canceled):
		r = classify.Result{Outcome: classify.Canceled, Reason: "canceled"}
	case errors.Is(err, context.DeadlineExceeded):
		r.Reason = "pacing wait exceeds deadline"
	case errors.Is(err, ErrTryLater):
		r.Reason = "pacing wait exceeds MaxWait"
	}
	return &classify.Error{Result: r, Err: err}
}

// unsentReason is Event.Unsent for err, the error of a request or attempt
// the chain did not send.
func unsentReason(err error) string {
	switch {
	case errors.Is(err, ErrHalted):
		return "halted"
	case errors.Is(err, ErrOpen):
		return "open"
	case errors.Is(err, ErrDisallowed):
		return "disallowed"
	case errors.Is(err, ErrTryLater):
		// The reasons keep their names: robots.txt decided, or a pacing
		// wait passed a deadline, the request's or the chain's own
		// (Config.MaxWait).
		if _, ok := errors.AsType[*robots.DisallowedError](err); ok {
			return "disallowed"
		}
		return "deadline"
	case errors.Is(err, ErrOutOfScope):
		return "out_of_scope"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "error"
}
