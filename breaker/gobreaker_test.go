package breaker_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/sony/gobreaker/v2"
)

// TestSameAsGobreaker drives a host's circuit and a gobreaker v2
// TwoStepCircuitBreaker with the same settings through the same random
// runs of admissions, outcomes (some recorded twice, some late, after the
// circuit changed) and waits around the open timeout, and checks after
// every step that both admit the same attempts and agree on the state and
// the consecutive failures. The circuit is gobreaker's state machine;
// this test is what says so.
func TestSameAsGobreaker(t *testing.T) {
	outcomes := []classify.Outcome{classify.OK, classify.Transient, classify.Throttled, classify.Permanent, classify.Canceled}
	for seed := range uint64(200) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			cfg := breaker.Config{
				FailureThreshold: 1 + rng.IntN(4),
				HalfOpenProbes:   1 + rng.IntN(3),
				OpenTimeout:      time.Minute,
			}
			s := breaker.New(cfg)
			neutral := errors.New("neutral")
			gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
				MaxRequests: uint32(cfg.HalfOpenProbes),
				Timeout:     cfg.OpenTimeout,
				ReadyToTrip: func(c gobreaker.Counts) bool {
					return c.ConsecutiveFailures >= uint32(cfg.FailureThreshold)
				},
				IsSuccessful: func(err error) bool { return err == nil },
				IsExcluded:   func(err error) bool { return err == neutral },
			})
			type admitted struct {
				t    breaker.Ticket
				done func(error)
			}
			var open []admitted
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op < 4:
					tk, err := s.Allow(host)
					done, gerr := gb.Allow()
					if (err == nil) != (gerr == nil) {
						t.Fatalf("seed %d step %d: Allow = %v, gobreaker %v", seed, step, err, gerr)
					}
					if err == nil {
						open = append(open, admitted{tk, done})
					}
				case op < 8 && len(open) > 0:
					i := rng.IntN(len(open))
					a := open[i]
					if rng.IntN(8) > 0 { // else recorded again later
						open = append(open[:i], open[i+1:]...)
					}
					o := outcomes[rng.IntN(len(outcomes))]
					s.Done(host, a.t, classify.Result{Outcome: o})
					var err error
					switch o {
					case classify.Transient, classify.Throttled:
						err = errors.New("failure")
					case classify.Permanent, classify.Canceled:
						err = neutral
					}
					a.done(err)
				case op < 9:
					time.Sleep(cfg.OpenTimeout) // exactly: the open period has not passed yet
				default:
					time.Sleep(time.Duration(rng.Int64N(int64(2 * cfg.OpenTimeout))))
				}
				st := s.Status(host)
				if want := breaker.State(gb.State()); st.State != want {
					t.Fatalf("seed %d step %d: state %v, gobreaker %v", seed, step, st.State, want)
				}
				if want := int(gb.Counts().ConsecutiveFailures); st.ConsecutiveFailures != want {
					t.Fatalf("seed %d step %d: %d consecutive failures, gobreaker %d", seed, step, st.ConsecutiveFailures, want)
				}
			}
		})
	}
}
