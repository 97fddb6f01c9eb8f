package circuits_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/internal/sentinel"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const host = "example.com"

func result(o classify.Outcome) classify.Result { return classify.Result{Outcome: o} }

// attempt admits one attempt to host and records o; it fails the test when
// the attempt is refused.
func attempt(t *testing.T, s *circuits.Set, host string, o classify.Outcome) circuits.Effect {
	t.Helper()
	tk, err := s.Allow(host)
	if err != nil {
		t.Fatalf("Allow(%q) = %v, want admitted", host, err)
	}
	return s.Done(host, tk, result(o))
}

func TestTrip(t *testing.T) {
	const (
		T = classify.Transient
		H = classify.Throttled
		P = classify.Permanent
		C = classify.Canceled
		K = classify.OK
	)
	rep := func(o classify.Outcome, n int) []classify.Outcome {
		s := make([]classify.Outcome, n)
		for i := range s {
			s[i] = o
		}
		return s
	}
	cat := func(parts ...[]classify.Outcome) []classify.Outcome {
		var s []classify.Outcome
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	tests := []struct {
		name         string
		cfg          breaker.Config
		outcomes     []classify.Outcome
		wantState    breaker.State
		wantFailures int
	}{
		{"8 transient open", breaker.Config{}, rep(T, 8), breaker.Open, 0},
		{"7 transient stay closed", breaker.Config{}, rep(T, 7), breaker.Closed, 7},
		{"8 throttled open", breaker.Config{}, rep(H, 8), breaker.Open, 0},
		{"mixed failures open", breaker.Config{}, []classify.Outcome{T, H, T, H, T, H, T, H}, breaker.Open, 0},
		{"ok resets", breaker.Config{}, cat(rep(T, 7), []classify.Outcome{K}, rep(T, 7)), breaker.Closed, 7},
		{"permanent and canceled neutral", breaker.Config{}, cat(rep(T, 7), []classify.Outcome{P, C, P}, rep(T, 1)), breaker.Open, 0},
		{"unknown outcome neutral", breaker.Config{}, cat(rep(T, 7), []classify.Outcome{classify.Outcome(99)}), breaker.Closed, 7},
		{"permanent alone never opens", breaker.Config{}, rep(P, 100), breaker.Closed, 0},
		{"threshold 3", breaker.Config{FailureThreshold: 3}, rep(T, 3), breaker.Open, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustBreaker(tt.cfg)
			for _, o := range tt.outcomes {
				attempt(t, s, host, o)
			}
			st := s.Status(host)
			if st.State != tt.wantState || st.ConsecutiveFailures != tt.wantFailures {
				t.Errorf("after %v: Status = %v with %d failures, want %v with %d",
					tt.outcomes, st.State, st.ConsecutiveFailures, tt.wantState, tt.wantFailures)
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{})
		for i := range 8 {
			eff := attempt(t, s, host, classify.Transient)
			want := circuits.Effect{From: breaker.Closed, To: breaker.Closed}
			if i == 7 {
				want.To = breaker.Open
			}
			if eff != want {
				t.Errorf("failure %d: Done = %+v, want %+v", i+1, eff, want)
			}
		}
		opened := time.Now()
		time.Sleep(299 * time.Second)
		_, err := s.Allow(host)
		var oe *breaker.OpenError
		if !errors.Is(err, sentinel.ErrOpen) || !errors.As(err, &oe) {
			t.Fatalf("Allow after trip = %v, want *OpenError", err)
		}
		if want := opened.Add(300 * time.Second); oe.Host != host || !oe.Until.Equal(want) {
			t.Errorf("OpenError = {%q, %v}, want {%q, %v}", oe.Host, oe.Until, host, want)
		}
		if got, want := err.Error(), "breaker: example.com is failing, circuit open until 2000-01-01T00:05:00Z: try it later"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
		if st := s.Status(host); st.State != breaker.Open || !st.OpenUntil.Equal(oe.Until) {
			t.Errorf("Status = %+v, want open until %v", st, oe.Until)
		}
	})
}

func TestHalfOpen(t *testing.T) {
	tests := []struct {
		name  string
		probe classify.Outcome
		want  breaker.State
	}{
		{"success closes", classify.OK, breaker.Closed},
		{"transient reopens", classify.Transient, breaker.Open},
		{"throttled reopens", classify.Throttled, breaker.Open},
		{"refused halts, leaves half-open", classify.Refused, breaker.HalfOpen},
		{"permanent leaves half-open", classify.Permanent, breaker.HalfOpen},
		{"canceled leaves half-open", classify.Canceled, breaker.HalfOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustBreaker(breaker.Config{})
				for range 8 {
					attempt(t, s, host, classify.Transient)
				}
				time.Sleep(300*time.Second + time.Millisecond)
				probe, err := s.Allow(host)
				if err != nil || !probe.Probe {
					t.Fatalf("Allow after OpenTimeout = %+v, %v, want a probe", probe, err)
				}
				_, err = s.Allow(host)
				var oe *breaker.OpenError
				if !errors.As(err, &oe) || !oe.Until.IsZero() {
					t.Fatalf("second Allow while probing = %v, want *OpenError with zero Until", err)
				}
				eff := s.Done(host, probe, result(tt.probe))
				if eff.From != breaker.HalfOpen || eff.To != tt.want {
					t.Errorf("Done(probe, %v) = %+v, want half-open→%v", tt.probe, eff, tt.want)
				}
				next, err := s.Allow(host)
				switch tt.want {
				case breaker.Closed:
					if err != nil || next.Probe {
						t.Errorf("Allow after close = %+v, %v, want admitted, not a probe", next, err)
					}
				case breaker.Open:
					if !errors.As(err, &oe) || !oe.Until.Equal(time.Now().Add(300*time.Second)) {
						t.Errorf("Allow after reopen = %v, want open until now+300s", err)
					}
				case breaker.HalfOpen:
					if tt.probe == classify.Refused {
						// The refusal halted the host, which Allow checks
						// first; once resumed, the next probe goes.
						if !errors.Is(err, sentinel.ErrHalted) {
							t.Errorf("Allow after a refused probe = %v, want ErrHalted", err)
						}
						s.Resume(host)
						next, err = s.Allow(host)
					}
					if err != nil || !next.Probe {
						t.Errorf("Allow after neutral probe = %+v, %v, want another probe", next, err)
					}
				}
			})
		})
	}
}

func TestHalfOpenProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{FailureThreshold: 1, HalfOpenProbes: 2, OpenTimeout: time.Minute})
		attempt(t, s, host, classify.Transient)
		time.Sleep(time.Minute + time.Second)
		p1, err1 := s.Allow(host)
		p2, err2 := s.Allow(host)
		_, err3 := s.Allow(host)
		if err1 != nil || err2 != nil || !errors.Is(err3, sentinel.ErrOpen) {
			t.Fatalf("three Allows while half-open = %v, %v, %v, want nil, nil, ErrOpen", err1, err2, err3)
		}
		if eff := s.Done(host, p1, result(classify.OK)); eff.To != breaker.HalfOpen {
			t.Errorf("first probe success: state %v, want half-open", eff.To)
		}
		if eff := s.Done(host, p2, result(classify.OK)); eff.To != breaker.Closed {
			t.Errorf("second probe success: state %v, want closed", eff.To)
		}
	})
}

func TestConcurrentProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{FailureThreshold: 1})
		attempt(t, s, host, classify.Transient)
		time.Sleep(301 * time.Second)
		var mu sync.Mutex // guards admitted
		admitted := 0
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				if _, err := s.Allow(host); err == nil {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if admitted != 1 {
			t.Errorf("64 concurrent Allows while half-open admitted %d, want 1", admitted)
		}
	})
}

func TestStaleTicket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{FailureThreshold: 2})
		old, _ := s.Allow(host) // in flight while the circuit opens
		attempt(t, s, host, classify.Transient)
		attempt(t, s, host, classify.Transient)
		if eff := s.Done(host, old, result(classify.OK)); eff != (circuits.Effect{From: breaker.Open, To: breaker.Open}) {
			t.Errorf("Done(old ticket, OK) = %+v, want open→open (ignored)", eff)
		}
		if eff := s.Done(host, circuits.Ticket{}, result(classify.OK)); eff.To != breaker.Open {
			t.Errorf("Done(zero ticket, OK) = %+v, want unchanged", eff)
		}
		time.Sleep(301 * time.Second)
		probe, _ := s.Allow(host)
		s.Done(host, probe, result(classify.OK))
		// A ticket of the open or half-open generation no longer counts.
		if eff := s.Done(host, probe, result(classify.Transient)); eff.To != breaker.Closed {
			t.Errorf("Done(probe ticket again, Transient) moved to %v, want closed", eff.To)
		}
		if st := s.Status(host); st.ConsecutiveFailures != 0 {
			t.Errorf("stale failure counted: %d failures", st.ConsecutiveFailures)
		}
	})
}

func TestDoneUnknownHost(t *testing.T) {
	s := mustBreaker(breaker.Config{})
	if eff := s.Done("never.example", circuits.Ticket{Generation: 1}, result(classify.Transient)); eff != (circuits.Effect{}) {
		t.Errorf("Done(unknown) = %+v, want closed→closed", eff)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("Len() = %d after Done on an unknown host, want 0", n)
	}
	if st := s.Status("never.example"); st != (circuits.Status{Host: "never.example"}) {
		t.Errorf("Status(unknown) = %+v, want closed", st)
	}
}

func TestHalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{})
		tk, _ := s.Allow(host)
		halted := time.Now()
		if !s.Halt(host) {
			t.Errorf("first Halt = false, want true")
		}
		time.Sleep(time.Second)
		if s.Halt(host) {
			t.Errorf("second Halt = true, want false")
		}
		s.Done(host, tk, result(classify.Refused))
		_, err := s.Allow(host)
		var he *breaker.HaltError
		if !errors.Is(err, sentinel.ErrHalted) || !errors.As(err, &he) || he.Host != host || !he.HaltedAt.Equal(halted) {
			t.Fatalf("Allow while halted = %v, want *HaltError{%q, %v}", err, host, halted)
		}
		if got, want := err.Error(), "egresskit: example.com refused us, halted since 2000-01-01T00:00:00Z: wait for a human to resume it"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
		if since, ok := s.Halted(host); !ok || !since.Equal(halted) {
			t.Errorf("Halted = %v, %v, want %v, true", since, ok, halted)
		}
		if _, err := s.Allow("other.example"); err != nil {
			t.Errorf("Allow(other host) = %v, want admitted", err)
		}
		if !s.Resume(host) || s.Resume(host) {
			t.Errorf("Resume twice: want true then false")
		}
		if _, ok := s.Halted(host); ok {
			t.Errorf("Halted after Resume = true")
		}
		if _, err := s.Allow(host); err != nil {
			t.Errorf("Allow after Resume = %v, want admitted", err)
		}
		if s.Resume("never.example") {
			t.Errorf("Resume(unknown) = true, want false")
		}
	})
}

func TestRefusedHalts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{})
		t1, _ := s.Allow(host)
		t2, _ := s.Allow(host)
		halted := time.Now()
		want := circuits.Effect{From: breaker.Closed, To: breaker.Closed, Halted: true}
		if eff := s.Done(host, t1, result(classify.Refused)); eff != want {
			t.Errorf("first Refused: Done = %+v, want %+v", eff, want)
		}
		want.Halted = false
		if eff := s.Done(host, t2, result(classify.Refused)); eff != want {
			t.Errorf("second Refused: Done = %+v, want %+v", eff, want)
		}
		if since, ok := s.Halted(host); !ok || !since.Equal(halted) {
			t.Errorf("Halted = %v, %v, want %v, true", since, ok, halted)
		}
		// A refusal is the halt's evidence, not a breaker failure.
		if st := s.Status(host); st.ConsecutiveFailures != 0 || st.State != breaker.Closed {
			t.Errorf("after two Refused: %d failures, %v; want 0, closed", st.ConsecutiveFailures, st.State)
		}
		// A Refused outcome halts even a host whose state was evicted.
		if eff := s.Done("gone.example", circuits.Ticket{}, result(classify.Refused)); !eff.Halted {
			t.Errorf("Refused on an unknown host: Done = %+v, want Halted", eff)
		}
		if _, err := s.Allow("gone.example"); !errors.Is(err, sentinel.ErrHalted) {
			t.Errorf("Allow after Refused on an unknown host = %v, want ErrHalted", err)
		}
	})
}

func TestOnStateChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		var s *circuits.Set
		s = mustBreaker(breaker.Config{
			FailureThreshold: 2,
			OnStateChange: func(c breaker.StateChange) {
				// Reading the Set from the hook must not deadlock.
				st := s.Status(c.Host)
				got = append(got, fmt.Sprintf("%s %v→%v %s status=%v", c.Host, c.From, c.To, c.At.Format("15:04:05"), st.State))
			},
		})
		attempt(t, s, host, classify.Transient)
		attempt(t, s, host, classify.Transient)
		time.Sleep(301 * time.Second)
		attempt(t, s, host, classify.OK)
		want := []string{
			"example.com closed→open 00:00:00 status=open",
			"example.com open→half-open 00:05:01 status=half-open",
			"example.com half-open→closed 00:05:01 status=closed",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("hook calls = %q, want %q", got, want)
		}
	})
}

func TestCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{FailureThreshold: 1, OpenTimeout: time.Minute})
		attempt(t, s, "closed.example", classify.OK)
		attempt(t, s, "open.example", classify.Transient)
		attempt(t, s, "half.example", classify.Transient)
		attempt(t, s, "halted.example", classify.Transient)
		s.Halt("halted.example")
		time.Sleep(30 * time.Second)
		attempt(t, s, "open2.example", classify.Transient)
		time.Sleep(31 * time.Second)
		want := breaker.Counts{Closed: 1, HalfOpen: 2, Open: 1, Halted: 1}
		if got := s.Counts(); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
	})
}

func TestEvict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{FailureThreshold: 1, OpenTimeout: 5 * time.Minute, IdleTTL: time.Minute})
		attempt(t, s, "idle.example", classify.OK)
		attempt(t, s, "open.example", classify.Transient)
		s.Halt("halted.example")
		time.Sleep(2 * time.Minute)
		if n := s.Evict(); n != 1 || s.Len() != 2 {
			t.Errorf("Evict() after 2m = %d, Len %d; want 1 evicted, 2 kept", n, s.Len())
		}
		if _, err := s.Allow("open.example"); !errors.Is(err, sentinel.ErrOpen) {
			t.Errorf("Allow(open host) after Evict = %v, want ErrOpen", err)
		}
		time.Sleep(time.Hour)
		if n := s.Evict(); n != 1 || s.Len() != 1 {
			t.Errorf("Evict() after the open period = %d, Len %d; want 1 evicted, 1 kept", n, s.Len())
		}
		if _, err := s.Allow("halted.example"); !errors.Is(err, sentinel.ErrHalted) {
			t.Errorf("Allow(halted host) after an hour = %v, want ErrHalted", err)
		}
	})
}

func TestEvictLazy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{IdleTTL: time.Minute})
		for i := range 1000 {
			attempt(t, s, fmt.Sprintf("old%d.example", i), classify.OK)
		}
		time.Sleep(2 * time.Minute)
		for i := range 1000 {
			attempt(t, s, fmt.Sprintf("new%d.example", i), classify.OK)
		}
		if n := s.Len(); n != 1000 {
			t.Errorf("Len() = %d after touching 1000 new hosts past IdleTTL, want 1000 (old ones evicted)", n)
		}
	})
}

func TestNoEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustBreaker(breaker.Config{IdleTTL: -1})
		attempt(t, s, host, classify.OK)
		time.Sleep(24 * time.Hour)
		attempt(t, s, "other.example", classify.OK)
		if n := s.Evict(); n != 0 || s.Len() != 2 {
			t.Errorf("Evict() with negative IdleTTL = %d, Len %d; want 0, 2", n, s.Len())
		}
	})
}

func TestDefaultConfig(t *testing.T) {
	want := breaker.Config{FailureThreshold: 8, OpenTimeout: 300 * time.Second, HalfOpenProbes: 1, IdleTTL: 10 * time.Minute}
	if got := circuits.DefaultConfig(); got.FailureThreshold != want.FailureThreshold ||
		got.OpenTimeout != want.OpenTimeout || got.HalfOpenProbes != want.HalfOpenProbes || got.IdleTTL != want.IdleTTL {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[breaker.State]string{breaker.Closed: "closed", breaker.HalfOpen: "half-open", breaker.Open: "open", 3: "unknown", 7: "unknown"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func BenchmarkAllowDone(b *testing.B) {
	s := mustBreaker(breaker.Config{})
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	ok := result(classify.OK)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h := hosts[i%len(hosts)]
		i++
		tk, err := s.Allow(h)
		if err != nil {
			b.Fatal(err)
		}
		s.Done(h, tk, ok)
	}
}
