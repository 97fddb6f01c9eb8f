package circuits_test

import (
	"testing"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
)

// TestAllowAtDoneAt: AllowAt and DoneAt admit and record as Allow and Done
// do, at the time they are given: a refusal recorded by DoneAt halts the
// host since that time.
func TestAllowAtDoneAt(t *testing.T) {
	s := mustBreaker(breaker.Config{})
	at := time.Now().Add(-time.Hour).Round(0)
	tk, err := s.AllowAt("no.example", at)
	if err != nil {
		t.Fatalf("AllowAt = %v", err)
	}
	eff := s.DoneAt("no.example", tk, classify.Result{Outcome: classify.Refused}, at)
	if !eff.Halted {
		t.Fatalf("DoneAt of a refusal = %+v, want Halted", eff)
	}
	if st := s.Status("no.example"); !st.Halted || !st.HaltedAt.Equal(at) {
		t.Errorf("Status = %+v, want halted since %v", st, at)
	}
	if _, err := s.AllowAt("no.example", at.Add(time.Second)); err == nil {
		t.Error("AllowAt of a halted host admits it")
	}
}
