package circuits_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
)

// TestStatusSnapshots: Status reports a tracked host that is not halted as
// not halted and a halted one as halted since the refusal, as often as it
// is asked (each call leaves the host's shard as it found it), and so do
// Counts.
func TestStatusSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{})
		attempt(t, s, "ok.example", classify.Transient)
		for range 3 {
			if st := s.Status("ok.example"); st.Halted || !st.HaltedAt.IsZero() || st.ConsecutiveFailures != 1 {
				t.Fatalf("Status(ok.example) = %+v, want one failure, not halted", st)
			}
		}
		refusedAt := time.Now()
		attempt(t, s, "no.example", classify.Refused)
		time.Sleep(time.Minute)
		for range 3 {
			if st := s.Status("no.example"); !st.Halted || !st.HaltedAt.Equal(refusedAt) {
				t.Fatalf("Status(no.example) = %+v, want halted since %v", st, refusedAt)
			}
		}
		for range 3 {
			if got, want := s.Counts(), (breaker.Counts{Closed: 1, Halted: 1}); got != want {
				t.Fatalf("Counts() = %+v, want %+v", got, want)
			}
		}
	})
}
