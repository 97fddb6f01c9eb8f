package circuits_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/sony/gobreaker/v2"
)

// TestSameAsGobreaker drives a Set and a plain gobreaker v2
// TwoStepCircuitBreaker with the same settings through the same random
// runs of admissions, outcomes (some recorded twice, some late, after the
// circuit changed, some never) and waits around the open timeout, and
// checks after every step that both admit the same attempts and agree on
// the state and the consecutive failures. The Set's one addition, the
// probe lease, is applied to the plain breaker by the test: when every
// half-open slot is taken, a probe of the current half-open period
// admitted OpenTimeout ago or more and not yet recorded is recorded as
// excluded, and its own outcome is then dropped. The test shows that the
// Set maps outcomes, generations and the open period onto gobreaker
// faithfully and adds nothing else.
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
			s := mustBreaker(cfg)
			neutral := errors.New("neutral")
			settings := gobreaker.Settings{
				MaxRequests: uint32(cfg.HalfOpenProbes),
				Timeout:     cfg.OpenTimeout,
				ReadyToTrip: func(c gobreaker.Counts) bool {
					return c.ConsecutiveFailures >= uint32(cfg.FailureThreshold)
				},
				IsSuccessful: func(err error) bool { return err == nil },
				IsExcluded:   func(err error) bool { return err == neutral },
			}
			var period int // counts gobreaker's state changes
			settings.OnStateChange = func(string, gobreaker.State, gobreaker.State) { period++ }
			gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](settings)
			type admitted struct {
				t        circuits.Ticket
				done     func(error)
				probe    bool
				period   int
				at       time.Time
				recorded bool
				expired  bool
			}
			var open, all []*admitted
			gbAllow := func() (func(error), error) {
				done, err := gb.Allow()
				if err != gobreaker.ErrTooManyRequests {
					return done, err
				}
				freed := false
				for _, a := range all {
					if a.probe && a.period == period && !a.recorded && !a.expired && time.Since(a.at) >= cfg.OpenTimeout {
						a.expired, freed = true, true
						a.done(neutral)
					}
				}
				if freed {
					return gb.Allow()
				}
				return done, err
			}
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op < 4:
					tk, err := s.Allow(host)
					done, gerr := gbAllow()
					if (err == nil) != (gerr == nil) {
						t.Fatalf("seed %d step %d: Allow = %v, gobreaker %v", seed, step, err, gerr)
					}
					if err == nil {
						a := &admitted{t: tk, done: done, probe: gb.State() == gobreaker.StateHalfOpen, period: period, at: time.Now()}
						if tk.Probe != a.probe {
							t.Fatalf("seed %d step %d: Probe = %v, gobreaker state %v", seed, step, tk.Probe, gb.State())
						}
						all = append(all, a)
						if rng.IntN(10) > 0 { // else never recorded: its body leaked
							open = append(open, a)
						}
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
					if !a.expired {
						a.recorded = true
						a.done(err)
					}
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
