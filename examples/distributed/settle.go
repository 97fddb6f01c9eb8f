package main

import (
	"context"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
)

// settled is a hoststate.Store that waits out an admission's pacing wait
// itself and then looks at the host again, so that an attempt admitted
// before another worker halted the host, or opened its breaker, is not sent
// after all. The chain does not look again after the wait: without this, a
// worker queued for its turn at a host sends once more to a host that
// another worker's previous attempt has just halted or tripped.
//
// It costs one more round trip to Redis for each admission that had to
// wait.
type settled struct {
	hoststate.Store
}

// releaseTimeout bounds the Record that hands back an unused admission.
const releaseTimeout = time.Second

// Admit admits an attempt as the wrapped Store does, then waits out the
// pacing wait and returns an Admission without one, or a
// *breaker.HaltError or *breaker.OpenError when the host was halted or its
// circuit opened meanwhile, or ctx.Err().
func (s settled) Admit(ctx context.Context, host string) (hoststate.Admission, error) {
	adm, err := s.Store.Admit(ctx, host)
	if err != nil || adm.Wait <= 0 {
		return adm, err
	}
	timer := time.NewTimer(adm.Wait)
	select {
	case <-ctx.Done():
		timer.Stop()
		s.release(ctx, host, adm)
		return hoststate.Admission{}, ctx.Err()
	case <-timer.C:
	}
	st, err := s.Store.Status(ctx, host)
	switch {
	case err != nil:
		s.release(ctx, host, adm)
		return hoststate.Admission{}, err
	case st.Halted:
		s.release(ctx, host, adm)
		return hoststate.Admission{}, &breaker.HaltError{Host: host, HaltedAt: st.HaltedAt}
	case st.Breaker == breaker.Open:
		s.release(ctx, host, adm)
		return hoststate.Admission{}, &breaker.OpenError{Host: host, Until: st.OpenUntil}
	case st.Breaker == breaker.HalfOpen && !adm.Probe:
		// Admitted while closed; the circuit has opened and is probing.
		s.release(ctx, host, adm)
		return hoststate.Admission{}, &breaker.OpenError{Host: host}
	}
	adm.Wait = 0
	return adm, nil
}

// release hands an admission that will not be sent back to the Store, as a
// Canceled outcome, even when ctx has ended.
func (s settled) release(ctx context.Context, host string, adm hoststate.Admission) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	s.Store.Record(ctx, host, adm, classify.Result{Outcome: classify.Canceled, Reason: "not sent"})
}
