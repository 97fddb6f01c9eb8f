package main

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
)

// TestSettled: an admission that had to wait for its pacing slot is
// checked again after the wait.
func TestSettled(t *testing.T) {
	const host = "a.example"
	tests := []struct {
		name string
		// meanwhile is the outcome of the first attempt, recorded while
		// the second waits for its slot; Canceled records nothing.
		meanwhile classify.Outcome
		cancel    bool // the second attempt's caller gives up while it waits
		wantErr   error
	}{
		{name: "nothing happened", meanwhile: classify.OK},
		{name: "host halted", meanwhile: classify.Refused, wantErr: egresskit.ErrHalted},
		{name: "breaker opened", meanwhile: classify.Transient, wantErr: egresskit.ErrOpen},
		{name: "caller gave up", meanwhile: classify.OK, cancel: true, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := mustMemory(hoststate.Config{
					Breaker: breaker.Config{FailureThreshold: 1},
					Limit:   ratelimit.Config{PerMinute: 60, Burst: 1},
				})
				s := settled{mem}
				ctx := context.Background()
				first, err := s.Admit(ctx, host)
				if err != nil || first.Wait != 0 {
					t.Fatalf("first Admit = %+v, %v; want no wait", first, err)
				}
				ctx2, cancel := context.WithCancel(ctx)
				defer cancel()
				type admitted struct {
					a   hoststate.Admission
					err error
				}
				done := make(chan admitted, 1)
				start := time.Now()
				go func() {
					a, err := s.Admit(ctx2, host)
					done <- admitted{a, err}
				}()
				synctest.Wait() // the second is waiting for its slot
				if tt.cancel {
					cancel()
				}
				if _, err := mem.Record(ctx, host, first, classify.Result{Outcome: tt.meanwhile}); err != nil {
					t.Fatal(err)
				}
				got := <-done
				if !errors.Is(got.err, tt.wantErr) || (tt.wantErr == nil && got.err != nil) {
					t.Fatalf("second Admit error = %v, want %v", got.err, tt.wantErr)
				}
				if tt.wantErr != nil {
					// The admission was handed back, as Canceled.
					if st, _ := mem.Status(ctx, host); st.Recent.Canceled != 1 {
						t.Errorf("after the refused admission: recent outcomes %v, want one canceled", st.Recent)
					}
					return
				}
				if got.a.Wait != 0 || time.Since(start) != time.Second {
					t.Errorf("second Admit = %+v after %v, want no wait left after 1s", got.a, time.Since(start))
				}
				if _, err := mem.Record(ctx, host, got.a, classify.Result{Outcome: classify.OK}); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
