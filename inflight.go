package egresskit

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/inflight"
)

// defaultMaxInFlight is what a zero Config.MaxInFlight means: the most
// attempts in flight to one host, whatever it serves, its pace and latency.
// Below it, the cap in force follows what the host serves (see
// internal/inflight): 2 at a host met for the first time, growing each
// round trip while its latency stays near its base, and falling to
// Little's law on its served rate when its latency rises under our load.
const defaultMaxInFlight = 16

// newInflight returns the per-host cap of Config.MaxInFlight, or nil for
// none (negative).
func newInflight(maxInFlight int) *inflight.Limits {
	switch {
	case maxInFlight < 0:
		return nil
	case maxInFlight == 0:
		maxInFlight = defaultMaxInFlight
	}
	return inflight.New(inflight.Config{Max: maxInFlight})
}

// slotWait takes an in-flight slot of the host key for one attempt, after
// the host layers and the crawl rate admitted it. A retry's wait is not
// counted against its attempt timeout (first is set for a first attempt on
// the caller's context). It returns the func that gives the slot back and
// whether it waited, or, when ctx ends first, an error wrapping ctx's: the
// attempt is not sent and spends no retry. perMinute is the host's rate
// the admission reported (0: the store did not say; Status is asked when
// the rate this process knows is stale), base the host's base latency it
// reported (0: not said).
func (t *Transport) slotWait(ctx context.Context, key string, perMinute float64, base time.Duration, first bool) (func(), bool, error) {
	if perMinute > 0 {
		t.inflight.SetRate(key, perMinute, base)
	} else if t.inflight.NeedRate(key) {
		if st, err := t.state.Status(ctx, key); err == nil {
			t.inflight.SetRate(key, st.PerMinute, base)
		}
	}
	resume := noResume
	if !first {
		resume = firstsend.HoldAttemptTimer(ctx)
	}
	done, waited, err := t.inflight.Acquire(ctx, key)
	resume()
	if err == nil {
		return done, waited, nil
	}
	r := classify.Result{Outcome: classify.Permanent, Reason: "in-flight wait exceeds deadline"}
	if err == context.Canceled {
		r = classify.Result{Outcome: classify.Canceled, Reason: "canceled"}
	}
	return nil, true, &classify.Error{Result: r, Err: fmt.Errorf("egresskit: waiting for an in-flight slot of %s: %w", key, err)}
}

// slotEnd ends the in-flight slot of an attempt whose RoundTrip returned:
// the host has answered (or the attempt failed), so the attempt no longer
// waits on the host. Reading the body is the caller's time, as in
// Little's law the host's latency is its time to headers, which a
// response feeds, with the answer itself, to the host's latency, served
// rate and window, before the slot is given back.
func (t *Transport) slotEnd(key string, done func(), resp *http.Response, err error, ttfb time.Duration) {
	if err == nil && resp != nil {
		t.inflight.Observe(key, ttfb)
	}
	done()
}
