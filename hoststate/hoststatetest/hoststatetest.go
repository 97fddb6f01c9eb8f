// Package hoststatetest holds the behaviour scenarios every
// hoststate.Store must pass — breaker, halts, pacing, eviction — with exact
// expected values, so that the in-memory store and the Redis store are
// tested by one table and cannot drift apart.
//
// A store's tests supply a Harness that builds the store from a Config and
// gives the scenario a clock it can advance:
//
//	func TestScenarios(t *testing.T) {
//		hoststatetest.Run(t, func(t *testing.T, cfg hoststate.Config, body func(*testing.T, hoststatetest.Env)) {
//			synctest.Test(t, func(t *testing.T) {
//				m, err := hoststate.NewMemory(cfg)
//				if err != nil {
//					t.Fatal(err)
//				}
//				body(t, hoststatetest.Env{Store: m, Now: time.Now, Advance: time.Sleep})
//			})
//		})
//	}
//
// Times and waits are compared to within Tolerance, so that a store keeping
// time in milliseconds passes.
package hoststatetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/sentinel"
)

// Tolerance is the precision to which scenarios compare times and waits.
const Tolerance = time.Millisecond

// Env is what a scenario receives from a harness.
type Env struct {
	// Store is the store under test, built from the scenario's Config.
	Store hoststate.Store
	// Now reads the store's clock.
	Now func() time.Time
	// Advance moves the store's clock forward by d.
	Advance func(d time.Duration)
	// Evict, if not nil, makes the store forget its idle hosts now. A store
	// that expires state by time alone (Redis TTLs) leaves it nil.
	Evict func()
}

// Harness runs body against a fresh store built from cfg, on a goroutine
// where body may call t.Fatal.
type Harness func(t *testing.T, cfg hoststate.Config, body func(t *testing.T, env Env))

// Scenario is one behaviour every Store must show.
type Scenario struct {
	Name   string
	Config hoststate.Config
	Body   func(t *testing.T, env Env)
}

// Run runs every scenario of Scenarios as a subtest, through h.
func Run(t *testing.T, h Harness) {
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			h(t, sc.Config, sc.Body)
		})
	}
}

// admit admits one attempt to host, failing the test when it is refused.
func admit(t *testing.T, env Env, host string) hoststate.Admission {
	t.Helper()
	a, err := env.Store.Admit(context.Background(), host)
	if err != nil {
		t.Fatalf("Admit(%q) = %v, want admitted", host, err)
	}
	return a
}

func record(t *testing.T, env Env, host string, a hoststate.Admission, r classify.Result) hoststate.Effect {
	t.Helper()
	eff, err := env.Store.Record(context.Background(), host, a, r)
	if err != nil {
		t.Fatalf("Record(%q, %v) = %v", host, r.Outcome, err)
	}
	return eff
}

// send admits an attempt, waits out its pacing wait, and records o.
func send(t *testing.T, env Env, host string, o classify.Outcome) hoststate.Effect {
	t.Helper()
	a := admit(t, env, host)
	env.Advance(a.Wait)
	return record(t, env, host, a, classify.Result{Outcome: o})
}

func state(t *testing.T, env Env, host string) hoststate.Status {
	t.Helper()
	st, err := env.Store.Status(context.Background(), host)
	if err != nil {
		t.Fatalf("State(%q) = %v", host, err)
	}
	return st
}

// wantEffect checks the breaker transition and halt of one Record.
func wantEffect(t *testing.T, what string, got hoststate.Effect, from, to breaker.State, halted bool) {
	t.Helper()
	if got.From != from || got.To != to || got.Halted != halted {
		t.Errorf("%s: Effect = {Halted:%v %v→%v}, want {Halted:%v %v→%v}", what, got.Halted, got.From, got.To, halted, from, to)
	}
}

func near(a, b time.Time) bool {
	d := a.Sub(b)
	return -Tolerance <= d && d <= Tolerance
}

func nearD(a, b time.Duration) bool {
	d := a - b
	return -Tolerance <= d && d <= Tolerance
}

// wantOpen checks that Admit is refused with an *breaker.OpenError for
// host; when until is not zero, it checks OpenError.Until too.
func wantOpen(t *testing.T, env Env, host string, until time.Time) {
	t.Helper()
	_, err := env.Store.Admit(context.Background(), host)
	var oe *breaker.OpenError
	if !errors.Is(err, sentinel.ErrOpen) || !errors.As(err, &oe) || oe.Host != host {
		t.Fatalf("Admit(%q) = %v, want *breaker.OpenError for the host", host, err)
	}
	if !until.IsZero() && !near(oe.Until, until) {
		t.Errorf("Admit(%q): OpenError.Until = %v, want %v", host, oe.Until, until)
	}
}

// wantHalted checks that Admit is refused with a *breaker.HaltError.
func wantHalted(t *testing.T, env Env, host string, since time.Time) {
	t.Helper()
	_, err := env.Store.Admit(context.Background(), host)
	var he *breaker.HaltError
	if !errors.Is(err, sentinel.ErrHalted) || !errors.As(err, &he) || he.Host != host || !near(he.HaltedAt, since) {
		t.Fatalf("Admit(%q) = %v, want *breaker.HaltError{%q, %v}", host, err, host, since)
	}
}

// trip opens host's breaker with FailureThreshold transient failures (the
// default 8) and returns when it opened.
func trip(t *testing.T, env Env, host string, n int) time.Time {
	t.Helper()
	for i := range n {
		eff := send(t, env, host, classify.Transient)
		if i < n-1 {
			wantEffect(t, "failure before the threshold", eff, breaker.Closed, breaker.Closed, false)
		} else {
			wantEffect(t, "failure at the threshold", eff, breaker.Closed, breaker.Open, false)
		}
	}
	return env.Now()
}
