package circuits_test

import (
	"testing"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
)

// TestClosedAttemptAllocates: an attempt to a closed circuit, admitted and
// recorded, allocates nothing when it succeeds (the hot path does not call
// gobreaker, whose Allow allocates its callback), nor when it fails or is
// neutral beyond gobreaker's one callback; the circuit still opens at the
// threshold.
func TestClosedAttemptAllocates(t *testing.T) {
	cases := []struct {
		outcome classify.Outcome
		want    float64
	}{
		{classify.OK, 0},
		{classify.Permanent, 1},
		{classify.Transient, 1},
	}
	for _, c := range cases {
		s := mustBreaker(breaker.Config{FailureThreshold: 1 << 30})
		const host = "a.example"
		attempt := func() {
			tk, err := s.Allow(host)
			if err != nil {
				t.Fatal(err)
			}
			s.Done(host, tk, classify.Result{Outcome: c.outcome})
		}
		attempt() // the host's entry
		if n := testing.AllocsPerRun(100, attempt); n > c.want {
			t.Errorf("an attempt with outcome %v allocates %v times, want %v", c.outcome, n, c.want)
		}
	}
	s := mustBreaker(breaker.Config{FailureThreshold: 3})
	for i := range 3 {
		tk, err := s.Allow("b.example")
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		s.Done("b.example", tk, classify.Result{Outcome: classify.OK})
		tk, _ = s.Allow("b.example")
		s.Done("b.example", tk, classify.Result{Outcome: classify.Transient})
	}
	if st := s.Status("b.example"); st.State != breaker.Closed || st.ConsecutiveFailures != 1 {
		t.Errorf("after OK and failure thrice: %v with %d consecutive failures, want closed with 1", st.State, st.ConsecutiveFailures)
	}
	for range 2 {
		tk, _ := s.Allow("b.example")
		s.Done("b.example", tk, classify.Result{Outcome: classify.Transient})
	}
	if st := s.Status("b.example"); st.State != breaker.Open {
		t.Errorf("after 3 consecutive failures: %v, want open", st.State)
	}
}
