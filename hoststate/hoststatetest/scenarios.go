package hoststatetest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/ratelimit"
)

const (
	host  = "a.example"
	other = "b.example"
	// openFor is the default breaker.Config.OpenTimeout.
	openFor = 300 * time.Second
)

// Scenarios returns the behaviour scenarios, each with its own Config.
func Scenarios() []Scenario {
	return []Scenario{
		{"TransientFailuresOpen", hoststate.Config{}, transientFailuresOpen},
		{"OpenSpendsNoToken", hoststate.Config{
			Breaker: breaker.Config{OpenTimeout: 5 * time.Second},
			Limit:   ratelimit.Config{PerMinute: 6},
		}, openSpendsNoToken},
		{"ProbeSuccessCloses", hoststate.Config{}, probeSuccessCloses},
		{"ProbeFailureReopens", hoststate.Config{}, probeFailureReopens},
		{"NeutralOutcomes", hoststate.Config{}, neutralOutcomes},
		{"StaleAdmissionIgnored", hoststate.Config{}, staleAdmissionIgnored},
		{"RefusedHaltsOnce", hoststate.Config{}, refusedHaltsOnce},
		{"HaltLogQueueAndHistory", hoststate.Config{}, haltLogQueueAndHistory},
		{"RefusedHaltsWhateverAdmission", hoststate.Config{}, refusedHaltsWhateverAdmission},
		{"ThrottledHalvesAndPauses", hoststate.Config{Limit: ratelimit.Config{PerMinute: 40}}, throttledHalvesAndPauses},
		{"ThrottleSettles", hoststate.Config{}, throttleSettles},
		{"SettleUnderCeiling", hoststate.Config{}, settleUnderCeiling},
		{"LearntCeiling", hoststate.Config{Limit: ratelimit.Config{PerMinute: 120}}, learntCeiling},
		{"LateOKsRevise", hoststate.Config{Limit: ratelimit.Config{PerMinute: 150}}, lateOKsRevise},
		{"ReleaseAfterPause", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600, Burst: 5}}, releaseAfterPause},
		{"LongerRetryAfterNeverSooner", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, longerRetryAfter},
		{"ThrottledOpensOnlyAtFloor", hoststate.Config{Limit: ratelimit.Config{Floor: 15, MaxPause: time.Minute}}, throttledOpensOnlyAtFloor},
		{"SlowHost", hoststate.Config{}, slowHost},
		{"QuotaSetsRate", hoststate.Config{}, quotaSetsRate},
		{"AdmissionCarriesRate", hoststate.Config{Limit: ratelimit.Config{PerMinute: 90}}, admissionCarriesRate},
		{"SetCeiling", hoststate.Config{}, setCeiling},
		{"StrayRefusalRecovers", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, strayRefusalRecovers},
		{"BurstyDemandIsNoQueue", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, burstyDemandIsNoQueue},
		{"StrayAfterFirstCut", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, strayAfterFirstCut},
		{"AdmissionCarriesBaseLatency", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, admissionCarriesBaseLatency},
		{"LimitBelowDemand", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, limitBelowDemand},
		{"RefusalAtPaceIsALimit", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, refusalAtPaceIsALimit},
		{"RefusalWithQueueIsALimit", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, refusalWithQueueIsALimit},
		{"SlowingHostSlows", hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000}}, slowingHostSlows},
		{"FarHostNotPenalised", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, farHostNotPenalised},
		{"QueueIsNoBase", hoststate.Config{Limit: ratelimit.Config{PerMinute: 2400}}, queueIsNoBase},
		{"SlowingLearnsWhatItServes", hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000, Burst: 8}}, slowingLearnsWhatItServes},
		{"ProbeThatSlowsEnds", hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000}}, probeThatSlowsEnds},
		{"SlowingPauseIsBounded", hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000}}, slowingPauseIsBounded},
		{"ProbeAfterOKs", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}}, probeAfterOKs},
		{"StallIsNotSlowing", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600000}}, stallIsNotSlowing},
		{"ThrottleStorm", hoststate.Config{}, throttleStorm},
		{"StillShutWaitsLonger", hoststate.Config{Limit: ratelimit.Config{PerMinute: 120}}, stillShutWaitsLonger},
		{"FirstContactOneToken", hoststate.Config{Limit: ratelimit.Config{PerMinute: 600, Burst: 5}}, firstContactOneToken},
		{"DeadlineTakesNothing", hoststate.Config{}, deadlineTakesNothing},
		{"DeadlineReleasesProbe", hoststate.Config{
			Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: time.Minute},
			Limit:   ratelimit.Config{PerMinute: 0.1},
		}, deadlineReleasesProbe},
		{"LeakedProbeLeaseEnds", hoststate.Config{
			Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: time.Minute},
			Limit:   ratelimit.Config{PerMinute: 6000},
		}, leakedProbeLeaseEnds},
		{"EvictionKeepsOpenHaltedPaused", hoststate.Config{
			Breaker: breaker.Config{IdleTTL: time.Minute},
			Limit:   ratelimit.Config{IdleTTL: time.Minute},
		}, evictionKeeps},
	}
}

// transientFailuresOpen: 8 consecutive transient failures open the breaker
// for 300s; the 9th Admit is refused with the host and the reopening time.
func transientFailuresOpen(t *testing.T, env Env) {
	for i := 1; i <= 7; i++ {
		send(t, env, host, classify.Transient)
		if st := state(t, env, host); st.Breaker != breaker.Closed || st.ConsecutiveFailures != i {
			t.Fatalf("after %d failures: %v with %d failures, want closed with %d", i, st.Breaker, st.ConsecutiveFailures, i)
		}
	}
	eff := send(t, env, host, classify.Transient)
	wantEffect(t, "8th failure", eff, breaker.Closed, breaker.Open, false)
	until := env.Now().Add(openFor)
	if st := state(t, env, host); st.Breaker != breaker.Open || !near(st.OpenUntil, until) {
		t.Errorf("State = %v until %v, want open until %v", st.Breaker, st.OpenUntil, until)
	}
	wantOpen(t, env, host, until)
	if _, err := env.Store.Admit(context.Background(), other); err != nil {
		t.Errorf("Admit(other host) = %v, want admitted", err)
	}
}

// openSpendsNoToken: at 6/min (one token per 10s) with a 5s open time,
// the refused Admits take no token: the probe at open+5s waits 5s for the
// token of open+10s, not a later one.
func openSpendsNoToken(t *testing.T, env Env) {
	opened := trip(t, env, host, 8)
	for range 3 {
		wantOpen(t, env, host, opened.Add(5*time.Second))
	}
	env.Advance(5*time.Second + time.Millisecond)
	a := admit(t, env, host)
	if !a.Probe || !nearD(a.Wait, 5*time.Second-time.Millisecond) {
		t.Errorf("probe Admission = %+v, want a probe waiting 4.999s", a)
	}
}

// probeSuccessCloses: after the open time one probe is admitted, a second
// concurrent one is refused, and the probe's success closes the breaker.
func probeSuccessCloses(t *testing.T, env Env) {
	trip(t, env, host, 8)
	env.Advance(openFor + time.Millisecond)
	probe := admit(t, env, host)
	if !probe.Probe || probe.Wait != 0 {
		t.Errorf("first Admit after the open time = %+v, want a probe with no wait", probe)
	}
	wantOpen(t, env, host, time.Time{})
	wantEffect(t, "probe OK", record(t, env, host, probe, classify.Result{Outcome: classify.OK}), breaker.HalfOpen, breaker.Closed, false)
	if a := admit(t, env, host); a.Probe {
		t.Errorf("Admit after closing = %+v, want not a probe", a)
	}
	if st := state(t, env, host); st.Breaker != breaker.Closed || st.ConsecutiveFailures != 0 || !st.OpenUntil.IsZero() {
		t.Errorf("State after closing = %+v, want closed, no failures", st)
	}
}

// probeFailureReopens: a failed probe reopens the breaker for another 300s.
func probeFailureReopens(t *testing.T, env Env) {
	trip(t, env, host, 8)
	env.Advance(openFor + time.Millisecond)
	probe := admit(t, env, host)
	wantEffect(t, "probe failure", record(t, env, host, probe, classify.Result{Outcome: classify.Transient, Status: 503}), breaker.HalfOpen, breaker.Open, false)
	until := env.Now().Add(openFor)
	if st := state(t, env, host); st.Breaker != breaker.Open || !near(st.OpenUntil, until) {
		t.Errorf("State after failed probe = %v until %v, want open until %v", st.Breaker, st.OpenUntil, until)
	}
	wantOpen(t, env, host, until)
}

// neutralOutcomes: Permanent and Canceled neither count nor reset; OK
// resets; a neutral probe frees its slot for the next probe.
func neutralOutcomes(t *testing.T, env Env) {
	for range 7 {
		send(t, env, host, classify.Transient)
	}
	wantEffect(t, "permanent", send(t, env, host, classify.Permanent), breaker.Closed, breaker.Closed, false)
	wantEffect(t, "canceled", send(t, env, host, classify.Canceled), breaker.Closed, breaker.Closed, false)
	if st := state(t, env, host); st.ConsecutiveFailures != 7 {
		t.Errorf("after 7 failures and 2 neutral outcomes: %d failures, want 7", st.ConsecutiveFailures)
	}
	wantEffect(t, "8th failure after neutrals", send(t, env, host, classify.Transient), breaker.Closed, breaker.Open, false)

	for range 7 {
		send(t, env, other, classify.Transient)
	}
	send(t, env, other, classify.OK)
	if st := state(t, env, other); st.ConsecutiveFailures != 0 {
		t.Errorf("after 7 failures and an OK: %d failures, want 0", st.ConsecutiveFailures)
	}

	env.Advance(openFor + time.Millisecond)
	for _, o := range []classify.Outcome{classify.Permanent, classify.Canceled} {
		probe := admit(t, env, host)
		if !probe.Probe {
			t.Fatalf("Admit after a neutral probe = %+v, want a probe", probe)
		}
		wantEffect(t, o.String()+" probe", record(t, env, host, probe, classify.Result{Outcome: o}), breaker.HalfOpen, breaker.HalfOpen, false)
	}
	probe := admit(t, env, host)
	wantEffect(t, "OK probe", record(t, env, host, probe, classify.Result{Outcome: classify.OK}), breaker.HalfOpen, breaker.Closed, false)
}

// staleAdmissionIgnored: the outcome of an attempt admitted before the
// breaker changed state does not count.
func staleAdmissionIgnored(t *testing.T, env Env) {
	old := admit(t, env, host)
	trip(t, env, host, 8)
	wantEffect(t, "OK from before opening", record(t, env, host, old, classify.Result{Outcome: classify.OK}), breaker.Open, breaker.Open, false)
	env.Advance(openFor + time.Millisecond)
	probe := admit(t, env, host)
	record(t, env, host, probe, classify.Result{Outcome: classify.OK})
	wantEffect(t, "failure from before closing", record(t, env, host, probe, classify.Result{Outcome: classify.Transient}), breaker.Closed, breaker.Closed, false)
	if st := state(t, env, host); st.ConsecutiveFailures != 0 {
		t.Errorf("stale failure counted: %d failures, want 0", st.ConsecutiveFailures)
	}
}

// refusedHaltsOnce: Refused halts the host (Effect.Halted for the first
// Record only); Admit fails with *HaltError, for as long as it takes,
// until Resume; other hosts are unaffected.
func refusedHaltsOnce(t *testing.T, env Env) {
	a1 := admit(t, env, host)
	a2 := admit(t, env, host)
	halted := env.Now()
	refused := classify.Result{Outcome: classify.Refused, Status: 403, Markers: []string{"agent-named"}}
	wantEffect(t, "first refusal", record(t, env, host, a1, refused), breaker.Closed, breaker.Closed, true)
	wantEffect(t, "second refusal", record(t, env, host, a2, refused), breaker.Closed, breaker.Closed, false)
	wantHalted(t, env, host, halted)
	if st := state(t, env, host); !st.Halted || !near(st.HaltedAt, halted) {
		t.Errorf("State = halted %v at %v, want halted at %v", st.Halted, st.HaltedAt, halted)
	}
	send(t, env, other, classify.OK)
	env.Advance(24 * time.Hour)
	wantHalted(t, env, host, halted)

	if err := env.Store.Resume(context.Background(), host); err != nil {
		t.Fatalf("Resume = %v", err)
	}
	if st := state(t, env, host); st.Halted || !st.HaltedAt.IsZero() {
		t.Errorf("State after Resume = halted %v at %v, want not halted", st.Halted, st.HaltedAt)
	}
	send(t, env, host, classify.OK)
	wantEffect(t, "refusal after Resume", send(t, env, host, classify.Refused), breaker.Closed, breaker.Closed, true)
	if err := env.Store.Resume(context.Background(), "never.example"); !errors.Is(err, hoststate.ErrNotHalted) {
		t.Errorf("Resume(unknown host) = %v, want ErrNotHalted", err)
	}
	if err := env.Store.Resume(context.Background(), other); !errors.Is(err, hoststate.ErrNotHalted) {
		t.Errorf("Resume(a host not halted) = %v, want ErrNotHalted", err)
	}
}

// refusedHaltsWhateverAdmission: a Refused Record halts the host even
// with a zero Admission (one this store never granted, as when the chain
// writes back a halt a failed Record lost), and with an Admission of an
// older breaker generation; the breaker itself is not changed by them.
func refusedHaltsWhateverAdmission(t *testing.T, env Env) {
	halted := env.Now()
	refused := classify.Result{Outcome: classify.Refused, Status: 403}
	eff := record(t, env, host, hoststate.Admission{}, refused)
	wantEffect(t, "refusal with a zero Admission", eff, breaker.Closed, breaker.Closed, true)
	wantHalted(t, env, host, halted)
	if st := state(t, env, host); st.ConsecutiveFailures != 0 || st.Breaker != breaker.Closed {
		t.Errorf("after a refusal with a zero Admission: %v with %d failures, want closed with 0", st.Breaker, st.ConsecutiveFailures)
	}

	stale := admit(t, env, other)
	trip(t, env, other, 8) // a new generation
	env.Advance(openFor + time.Millisecond)
	haltedOther := env.Now()
	eff = record(t, env, other, stale, refused)
	if !eff.Halted {
		t.Errorf("refusal with an Admission of an older generation: Effect = %+v, want Halted", eff)
	}
	wantHalted(t, env, other, haltedOther)
}

// throttledHalvesAndPauses: a 429 with Retry-After 5s on
// a 40/min host pauses it for 5s and halves its rate to 20, not resets it.
func throttledHalvesAndPauses(t *testing.T, env Env) {
	a := admit(t, env, host)
	record(t, env, host, a, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: 5 * time.Second})
	st := state(t, env, host)
	if st.PerMinute != 20 || !near(st.PausedUntil, env.Now().Add(5*time.Second)) {
		t.Errorf("after 429: rate %v, paused until %v; want 20, %v", st.PerMinute, st.PausedUntil, env.Now().Add(5*time.Second))
	}
	if st.ConsecutiveFailures != 0 || st.Recent.Throttled != 1 {
		t.Errorf("after 429: %d failures, recent %v; want no failure (pacing can still slow down), 1 throttled", st.ConsecutiveFailures, st.Recent)
	}
	if a := admit(t, env, host); !nearD(a.Wait, 5*time.Second) {
		t.Errorf("Admit while paused: wait %v, want 5s", a.Wait)
	}
}

// nearRate reports whether two rates agree to 1e-9 relative.
func nearRate(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// recoveryOKs sends OKs and checks the rate after each listed count of
// OKs since the throttle.
func recoveryOKs(t *testing.T, env Env, want map[int]float64) {
	t.Helper()
	for n := 1; len(want) > 0; n++ {
		send(t, env, host, classify.OK)
		if w, ok := want[n]; ok {
			delete(want, n)
			if got := state(t, env, host).PerMinute; !nearRate(got, w) {
				t.Errorf("after %d OKs: rate %v, want %v", n, got, w)
			}
		}
	}
}

// throttleSettles: a 429 at 60/min with no OK before it (the rate says
// nothing of how far above the host's limit it was) halves the rate to 30,
// and the rate stays there: no climb back into the limit, 40 OKs (80 s)
// later, before the probe's 2-minute backoff has passed.
func throttleSettles(t *testing.T, env Env) {
	send(t, env, host, classify.Throttled)
	if got := state(t, env, host).PerMinute; got != 30 {
		t.Fatalf("after 429: rate %v, want 30", got)
	}
	recoveryOKs(t, env, map[int]float64{1: 30, 10: 30, 40: 30})
}

// settleUnderCeiling: under a 45/min ceiling, a 429 halves to 22.5, and
// the rate stays there.
func settleUnderCeiling(t *testing.T, env Env) {
	if err := env.Store.SetCeiling(context.Background(), host, 45); err != nil {
		t.Fatal(err)
	}
	send(t, env, host, classify.Throttled)
	recoveryOKs(t, env, map[int]float64{5: 22.5, 10: 22.5, 40: 22.5})
}

// learntCeiling: a host configured at 120/min answers 21 OKs, then a 429:
// its limit is below 120: it allowed fewer than 20 requests in the 21
// intervals from the first OK to the refused request (a limiter with a
// burst of one lets n through when it allows n-1), 114.3/min; the rate
// settles 3 % below that, at 110.86. A second 429 after 41 more OKs at the
// same level (within 15 % below the learnt ceiling) ratchets it down by
// 10 % and 3 %. Two minutes after the
// throttle the rate probes above (the first OK past the backoff starts
// it; 10 OKs later it is 10 % faster); a 429 during the probe sends it
// back to where the probe started, and the next probe waits twice as long.
func learntCeiling(t *testing.T, env Env) {
	ok := func(n int) {
		for range n {
			send(t, env, host, classify.OK)
		}
	}
	wantRate := func(what string, want float64) {
		t.Helper()
		if got := state(t, env, host).PerMinute; math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: rate %v, want %v", what, got, want)
		}
	}
	ok(21)
	send(t, env, host, classify.Throttled)
	r1 := 120.0 * 20 / 21 * 0.97
	wantRate("429 after 21 OKs at 120/min", r1)
	ok(41)
	send(t, env, host, classify.Throttled)
	r2 := r1 * 0.9 * 0.97
	wantRate("429 after 41 OKs at the settled rate", r2)
	env.Advance(2 * time.Minute)
	ok(1)
	wantRate("first OK past the backoff", r2)
	ok(10)
	wantRate("10 OKs into the probe", r2*1.1)
	send(t, env, host, classify.Throttled)
	wantRate("429 during the probe", r2)
	env.Advance(3 * time.Minute)
	ok(20)
	wantRate("3 minutes later (backoff 4)", r2)
	env.Advance(time.Minute)
	ok(11)
	wantRate("4 minutes later", r2*1.1)
}

// lateOKsRevise: a host configured at 150/min whose limiter allows
// 120/min and delays the excess (nginx's limit_req with a burst of one,
// without nodelay). Seven attempts go out 400ms apart; the host holds each
// until its slot and answers the first five OK at 0, 0.5, 1, 1.5 and 2s,
// refuses the seventh at once, at 2.4s (Retry-After 2s), and answers the
// sixth, which it still held, at 2.5s. The throttle's estimate, 4
// intervals in 2.4s, is 100/min: the rate settles 3 % below, at 97. The
// sixth OK, answered in the pause for an attempt sent before the
// throttle, revises it: 5 intervals in 2.5s, 120/min, so 116.4. A late OK
// that would make the estimate slower (at 4s) changes nothing, nor does
// the next run's first OK. On another host answering at once, five OKs
// 400ms apart and a refusal at 2s settle at 116.4; three more OKs at
// 2.1s would make the estimate 200/min, and lift the rate only to 3 %
// below the 150/min refused.
func lateOKsRevise(t *testing.T, env Env) {
	start := env.Now()
	at := func(d time.Duration) { env.Advance(start.Add(d).Sub(env.Now())) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	wantRate := func(h, what string, want float64) {
		t.Helper()
		if got := state(t, env, h).PerMinute; math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: %s at %v, want %v", h, what, got, want)
		}
	}
	ok := classify.Result{Outcome: classify.OK}
	throttled := classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: 2 * time.Second}

	var adms []hoststate.Admission
	for range 7 {
		adms = append(adms, admit(t, env, host))
	}
	for i, ans := range []int{0, 500, 1000, 1500, 2000} {
		at(ms(ans))
		record(t, env, host, adms[i], ok)
	}
	at(ms(2400))
	record(t, env, host, adms[6], throttled)
	wantRate(host, "429 after 5 OKs in 2.4s", 120.0*4/4.8*0.97)
	at(ms(2500))
	record(t, env, host, adms[5], ok)
	wantRate(host, "the held attempt's OK at 2.5s", 120*0.97)
	at(ms(4000))
	record(t, env, host, admit(t, env, host), ok) // sent before, answered slowly
	wantRate(host, "an OK at 4s", 120*0.97)
	send(t, env, host, classify.OK)
	wantRate(host, "the next run's first OK", 120*0.97)

	start = env.Now()
	adms = adms[:0]
	for range 9 {
		adms = append(adms, admit(t, env, other))
	}
	for i := range 5 {
		at(ms(400 * i))
		record(t, env, other, adms[i], ok)
	}
	at(ms(2000))
	record(t, env, other, adms[5], throttled)
	wantRate(other, "429 after 5 OKs in 2s", 120*0.97)
	at(ms(2100))
	for i := 6; i < 9; i++ {
		record(t, env, other, adms[i], ok)
	}
	wantRate(other, "three OKs at 2.1s", 150*0.97)
}

// releaseAfterPause: at 600/min with a burst of 5, on a host first
// contacted a second ago (its bucket has filled since), eight attempts are
// admitted (five at once, three 100ms apart); the first is answered 429
// with Retry-After 2s. The seven others were admitted before the pause:
// their epoch is stale, and re-admitted they go out from the pause's end
// one interval of the halved rate (200ms) apart — never two in one 100ms
// window.
func releaseAfterPause(t *testing.T, env Env) {
	send(t, env, host, classify.OK)
	env.Advance(time.Second)
	start := env.Now()
	var adms []hoststate.Admission
	for i := range 8 {
		a := admit(t, env, host)
		if want := time.Duration(max(i-4, 0)) * 100 * time.Millisecond; !nearD(a.Wait, want) {
			t.Errorf("admission %d: wait %v, want %v", i+1, a.Wait, want)
		}
		adms = append(adms, a)
	}
	record(t, env, host, adms[0], classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: 2 * time.Second})
	st := state(t, env, host)
	if st.PerMinute != 300 || !near(st.PausedUntil, start.Add(2*time.Second)) {
		t.Fatalf("after 429: rate %v, paused until %v; want 300, %v", st.PerMinute, st.PausedUntil, start.Add(2*time.Second))
	}
	windows := map[time.Duration]int{}
	for i, a := range adms[1:] {
		if a.Epoch == st.Epoch {
			t.Fatalf("admission %d from before the pause has the current epoch %d", i+2, st.Epoch)
		}
		record(t, env, host, a, classify.Result{Outcome: classify.Canceled})
		again := admit(t, env, host)
		if again.Epoch != st.Epoch {
			t.Errorf("re-admission %d: epoch %d, want %d", i+1, again.Epoch, st.Epoch)
		}
		want := 2*time.Second + time.Duration(i)*200*time.Millisecond
		if !nearD(again.Wait, want) {
			t.Errorf("re-admission %d: wait %v, want %v", i+1, again.Wait, want)
		}
		windows[again.Wait.Truncate(100*time.Millisecond)]++
	}
	for w, n := range windows {
		if n > 1 {
			t.Errorf("%d attempts released in the 100ms window at %v", n, w)
		}
	}
}

// longerRetryAfter: on hosts paced at 600/min, Retry-After 120s, 86400s,
// 86401s and a year (the longest wait classify reports) pause the host for 120s, then for the
// 1h MaxPause: a longer Retry-After never ends the pause sooner.
func longerRetryAfter(t *testing.T, env Env) {
	var last time.Duration
	for i, ra := range []time.Duration{120 * time.Second, 86400 * time.Second, 86401 * time.Second, 365 * 24 * time.Hour} {
		h := string(rune('a'+i)) + ".example"
		a := admit(t, env, h)
		record(t, env, h, a, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: ra})
		got := state(t, env, h).PausedUntil.Sub(env.Now())
		if want := min(ra, time.Hour); !nearD(got, want) || got < last {
			t.Errorf("Retry-After %v: paused for %v, want %v", ra, got, want)
		}
		last = got
		if a := admit(t, env, h); !nearD(a.Wait, got) {
			t.Errorf("Retry-After %v: next admission waits %v, want %v", ra, a.Wait, got)
		}
	}
}

// throttledOpensOnlyAtFloor: with a floor of 15/min, a host answering only
// 429s slows from 60 to 30, stays at 30 (its second refusal in a row,
// with no OK ever, lengthens the pause alone), then to 15, without a
// failure counted; at the floor
// every further 429 counts, and the 8th there opens the breaker. (Pauses
// are capped at a minute, so that the host, still shut at every attempt,
// is never idle long enough for its breaker to be forgotten.)
func throttledOpensOnlyAtFloor(t *testing.T, env Env) {
	for i, want := range []float64{30, 30, 15} {
		eff := send(t, env, host, classify.Throttled)
		wantEffect(t, "429 above the floor", eff, breaker.Closed, breaker.Closed, false)
		if st := state(t, env, host); st.PerMinute != want || st.ConsecutiveFailures != 0 {
			t.Fatalf("429 %d: rate %v, %d failures; want %v, 0", i+1, st.PerMinute, st.ConsecutiveFailures, want)
		}
	}
	for i := 1; i <= 8; i++ {
		eff := send(t, env, host, classify.Throttled)
		if i < 8 {
			wantEffect(t, "429 at the floor", eff, breaker.Closed, breaker.Closed, false)
			if st := state(t, env, host); st.ConsecutiveFailures != i {
				t.Fatalf("429 %d at the floor: %d failures, want %d", i, st.ConsecutiveFailures, i)
			}
		} else {
			wantEffect(t, "8th 429 at the floor", eff, breaker.Closed, breaker.Open, false)
		}
	}
}

// quotaSetsRate: at 60/min, an OK whose rate-limit fields leave 20
// requests a minute (classify.Result.Quota) sets the rate to 20 at once;
// it holds there until the probe's 2-minute backoff has passed, then
// probes above it (22 after 10 OKs more). A quota is the rate the host
// accepts until its window ends, faster as well as slower: 40 sets the
// rate to 40, and 1000 to the configured 60, never above.
func quotaSetsRate(t *testing.T, env Env) {
	a := admit(t, env, host)
	record(t, env, host, a, classify.Result{Outcome: classify.OK, Status: 200, Quota: 20})
	if got := state(t, env, host).PerMinute; got != 20 {
		t.Fatalf("after an OK with a quota of 20/min: rate %v, want 20", got)
	}
	if a := admit(t, env, host); !nearD(a.Wait, 3*time.Second) {
		t.Errorf("next admission: wait %v, want 3s", a.Wait)
	}
	env.Advance(3 * time.Second)
	recoveryOKs(t, env, map[int]float64{29: 20})
	env.Advance(2 * time.Minute)
	recoveryOKs(t, env, map[int]float64{1: 20, 11: 22})
	for _, c := range []struct{ quota, want float64 }{{40, 40}, {1000, 60}, {20, 20}} {
		a = admit(t, env, host)
		env.Advance(a.Wait)
		record(t, env, host, a, classify.Result{Outcome: classify.OK, Status: 200, Quota: c.quota})
		if got := state(t, env, host).PerMinute; got != c.want {
			t.Errorf("after an OK with a quota of %v/min: rate %v, want %v", c.quota, got, c.want)
		}
	}
}

// admissionCarriesRate: an admission reports the host's pacing rate as
// Status does: 90 (configured) at first, 20 after an OK whose quota is 20
// a minute.
func admissionCarriesRate(t *testing.T, env Env) {
	a := admit(t, env, host)
	if a.PerMinute != 90 {
		t.Errorf("first admission: PerMinute %v, want 90", a.PerMinute)
	}
	record(t, env, host, a, classify.Result{Outcome: classify.OK, Status: 200, Quota: 20})
	a = admit(t, env, host)
	if got := state(t, env, host).PerMinute; a.PerMinute != 20 || got != 20 {
		t.Errorf("after a quota of 20/min: admission's PerMinute %v, Status's %v; want 20", a.PerMinute, got)
	}
}

// slowHost: a host answering 200 after 15s occupies one worker, not the
// host: while that attempt is out, 15 more are admitted at the paced
// 60/min, one a second; the slow OK counts as a success like the others,
// and the rate stays at 60.
func slowHost(t *testing.T, env Env) {
	start := env.Now()
	slow := admit(t, env, host)
	for i := 1; i <= 15; i++ {
		a := admit(t, env, host)
		env.Advance(a.Wait)
		if got := env.Now().Sub(start); !nearD(got, time.Duration(i)*time.Second) {
			t.Errorf("attempt %d beside the slow one sent at %v, want %ds", i+1, got, i)
		}
		record(t, env, host, a, classify.Result{Outcome: classify.OK, Status: 200})
	}
	wantEffect(t, "200 after 15s", record(t, env, host, slow, classify.Result{Outcome: classify.OK, Status: 200}), breaker.Closed, breaker.Closed, false)
	if st := state(t, env, host); st.PerMinute != 60 || st.ConsecutiveFailures != 0 || st.Recent.OK != 16 || !st.PausedUntil.IsZero() {
		t.Errorf("after the slow host: rate %v, %d failures, recent %v, paused until %v; want 60, 0, 16 OK, not paused",
			st.PerMinute, st.ConsecutiveFailures, st.Recent, st.PausedUntil)
	}
}

// setCeiling: a ceiling lowers the rate at once, a higher one does not raise
// it, removing it leaves the rate where it is, and NaN is rejected.
func setCeiling(t *testing.T, env Env) {
	ctx := context.Background()
	if err := env.Store.SetCeiling(ctx, host, 30); err != nil {
		t.Fatal(err)
	}
	if st := state(t, env, host); st.PerMinute != 30 || st.Ceiling != 30 {
		t.Errorf("after SetCeiling(30): rate %v, ceiling %v; want 30, 30", st.PerMinute, st.Ceiling)
	}
	admit(t, env, host)
	if a := admit(t, env, host); !nearD(a.Wait, 2*time.Second) {
		t.Errorf("second Admit at 30/min: wait %v, want 2s", a.Wait)
	}
	if err := env.Store.SetCeiling(ctx, host, 120); err != nil {
		t.Fatal(err)
	}
	if st := state(t, env, host); st.PerMinute != 30 || st.Ceiling != 120 {
		t.Errorf("after SetCeiling(120): rate %v, ceiling %v; want 30, 120", st.PerMinute, st.Ceiling)
	}
	if err := env.Store.SetCeiling(ctx, host, 0); err != nil {
		t.Fatal(err)
	}
	if st := state(t, env, host); st.PerMinute != 30 || st.Ceiling != 0 {
		t.Errorf("after SetCeiling(0): rate %v, ceiling %v; want 30, 0", st.PerMinute, st.Ceiling)
	}
	if err := env.Store.SetCeiling(ctx, host, math.NaN()); !errors.Is(err, ratelimit.ErrInvalidRate) {
		t.Errorf("SetCeiling(NaN) = %v, want ratelimit.ErrInvalidRate", err)
	}
}

// throttleStorm: a host answering 429 (no Retry-After) to everything
// receives 4 requests in 60s, at 0, 2, 10 and 42s: the first 429 halves
// the rate to 30/min and pauses one interval (2s); every later one finds
// the host still shut (no OK since the pause ended) and pauses four times
// as long; the second keeps the rate (a host that never answered OK
// settles nothing from one more refusal, as likely a stray's), the third
// and later quarter it, to 7.5, 1.875, then the floor (1/min) at the
// 5th, at 170s. Pacing could still slow down at each: no failure is
// counted.
func throttleStorm(t *testing.T, env Env) {
	start := env.Now()
	var sent []time.Duration
	for {
		a := admit(t, env, host)
		env.Advance(a.Wait)
		if env.Now().Sub(start) >= time.Minute {
			break
		}
		sent = append(sent, env.Now().Sub(start))
		record(t, env, host, a, classify.Result{Outcome: classify.Throttled, Status: 429})
	}
	want := []time.Duration{0, 2 * time.Second, 10 * time.Second, 42 * time.Second}
	if len(sent) != len(want) {
		t.Fatalf("requests sent at %v in the first minute, want %v", sent, want)
	}
	for i := range want {
		if !nearD(sent[i], want[i]) {
			t.Errorf("request %d sent at %v, want %v", i+1, sent[i], want[i])
		}
	}
	if st := state(t, env, host); st.PerMinute != 1.875 || st.Breaker != breaker.Closed || st.ConsecutiveFailures != 0 {
		t.Errorf("after the storm: rate %v, breaker %v with %d failures; want 1.875, closed with 0", st.PerMinute, st.Breaker, st.ConsecutiveFailures)
	}
}

// deadlineTakesNothing: an Admit whose wait would pass the deadline fails
// with context.DeadlineExceeded and takes no token.
func deadlineTakesNothing(t *testing.T, env Env) {
	admit(t, env, host)
	ctx, cancel := context.WithDeadline(context.Background(), env.Now().Add(500*time.Millisecond))
	defer cancel()
	for range 3 {
		if _, err := env.Store.Admit(ctx, host); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Admit with a wait of 1s and a deadline in 500ms = %v, want context.DeadlineExceeded", err)
		}
	}
	if a := admit(t, env, host); !nearD(a.Wait, time.Second) {
		t.Errorf("Admit after refused ones: wait %v, want 1s (no token taken)", a.Wait)
	}
}

// deadlineReleasesProbe: when the half-open probe's pacing wait would pass
// the deadline, the probe slot is released for the next Admit.
func deadlineReleasesProbe(t *testing.T, env Env) {
	send(t, env, host, classify.Transient) // opens: threshold 1
	env.Advance(time.Minute + time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), env.Now().Add(time.Second))
	defer cancel()
	if _, err := env.Store.Admit(ctx, host); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("probe Admit with a 9m wait and a 1s deadline = %v, want context.DeadlineExceeded", err)
	}
	a := admit(t, env, host)
	if !a.Probe || !nearD(a.Wait, 10*time.Minute-time.Minute-time.Millisecond) {
		t.Errorf("next Admit = %+v, want the probe, waiting 8m59.999s", a)
	}
}

// leakedProbeLeaseEnds: a half-open probe whose outcome is never recorded
// (its body was never closed) holds the probe slot for OpenTimeout from
// its admission, the probe lease, and no longer: the next Admit after
// that is a new probe. The leaked probe counts neither way: its outcome,
// recorded late, changes nothing, and the new probe's success closes the
// breaker.
func leakedProbeLeaseEnds(t *testing.T, env Env) {
	send(t, env, host, classify.Transient) // opens: threshold 1
	env.Advance(time.Minute + time.Millisecond)
	leaked := admit(t, env, host)
	if !leaked.Probe {
		t.Fatalf("first Admit after the open period = %+v, want a probe", leaked)
	}
	env.Advance(leaked.Wait)
	var oe *breaker.OpenError
	if _, err := env.Store.Admit(context.Background(), host); !errors.As(err, &oe) || !oe.Until.IsZero() {
		t.Fatalf("Admit with the probe in flight = %v, want *breaker.OpenError (half-open, probe in flight)", err)
	}
	env.Advance(time.Minute - leaked.Wait - time.Millisecond)
	if _, err := env.Store.Admit(context.Background(), host); !errors.Is(err, sentinel.ErrOpen) {
		t.Fatalf("Admit 1ms before the probe lease ends = %v, want ErrOpen", err)
	}
	env.Advance(time.Millisecond)
	next := admit(t, env, host)
	if !next.Probe {
		t.Fatalf("Admit once the probe lease ended = %+v, want a new probe", next)
	}
	record(t, env, host, leaked, classify.Result{Outcome: classify.Transient})
	if st := state(t, env, host); st.Breaker != breaker.HalfOpen || st.ConsecutiveFailures != 0 {
		t.Fatalf("after the leaked probe's late failure: %v with %d failures, want half-open with 0 (ignored)", st.Breaker, st.ConsecutiveFailures)
	}
	eff := record(t, env, host, next, classify.Result{Outcome: classify.OK})
	wantEffect(t, "the new probe's success", eff, breaker.HalfOpen, breaker.Closed, false)
}

// evictionKeeps: after idle eviction (1m TTL), an open breaker, a halt and
// a Retry-After pause are all still in force, while an idle host's failure
// count is forgotten.
func evictionKeeps(t *testing.T, env Env) {
	const (
		open   = "open.example"
		halted = "halted.example"
		paused = "paused.example"
		idle   = "idle.example"
	)
	opened := trip(t, env, open, 8)
	haltedAt := env.Now()
	send(t, env, halted, classify.Refused)
	send(t, env, paused, classify.Throttled)
	a := admit(t, env, paused)
	record(t, env, paused, a, classify.Result{Outcome: classify.Throttled, RetryAfter: 10 * time.Minute})
	pausedUntil := state(t, env, paused).PausedUntil
	for range 7 {
		send(t, env, idle, classify.Transient)
	}
	env.Advance(2 * time.Minute)
	if env.Evict != nil {
		env.Evict()
	}
	if st := state(t, env, idle); st.ConsecutiveFailures != 0 || st.Breaker != breaker.Closed {
		t.Errorf("idle host after eviction: %v with %d failures, want forgotten (closed, 0)", st.Breaker, st.ConsecutiveFailures)
	}
	wantOpen(t, env, open, opened.Add(openFor))
	wantHalted(t, env, halted, haltedAt)
	if st := state(t, env, paused); st.PerMinute != 30 || !near(st.PausedUntil, pausedUntil) {
		t.Errorf("paused host after eviction: rate %v, paused until %v; want 30, %v", st.PerMinute, st.PausedUntil, pausedUntil)
	}
	if a := admit(t, env, paused); !nearD(a.Wait, pausedUntil.Sub(env.Now())) {
		t.Errorf("Admit(paused host) after eviction: wait %v, want %v", a.Wait, pausedUntil.Sub(env.Now()))
	}
}

// stillShutWaitsLonger: at 120/min, 21 OKs, then a 429 with Retry-After
// 2s: the rate settles at 110.86 and the host pauses for 2s. The first
// attempt after the pause is answered 429 again (Retry-After 2s) with no
// OK between: the host is still shut — a limiter counting over a window,
// refused requests too — so the pause is four times as long, 8s, and the
// rate drops to a quarter.
// After an OK, the next 429 is a new episode: a pause of its Retry-After.
func stillShutWaitsLonger(t *testing.T, env Env) {
	throttle := func() {
		t.Helper()
		a := admit(t, env, host)
		env.Advance(a.Wait)
		record(t, env, host, a, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: 2 * time.Second})
	}
	for range 21 {
		send(t, env, host, classify.OK)
	}
	throttle()
	r1 := 120.0 * 20 / 21 * 0.97
	if st := state(t, env, host); math.Abs(st.PerMinute-r1) > 1e-6 || !near(st.PausedUntil, env.Now().Add(2*time.Second)) {
		t.Errorf("first 429: rate %v, paused until %v; want %v, %v", st.PerMinute, st.PausedUntil, r1, env.Now().Add(2*time.Second))
	}
	throttle()
	if st := state(t, env, host); math.Abs(st.PerMinute-r1/4) > 1e-6 || !near(st.PausedUntil, env.Now().Add(8*time.Second)) {
		t.Errorf("429 right after the pause: rate %v, paused until %v; want %v, %v", st.PerMinute, st.PausedUntil, r1/4, env.Now().Add(8*time.Second))
	}
	send(t, env, host, classify.OK)
	throttle()
	if st := state(t, env, host); !near(st.PausedUntil, env.Now().Add(2*time.Second)) {
		t.Errorf("429 after an OK: paused until %v, want %v", st.PausedUntil, env.Now().Add(2*time.Second))
	}
}

// firstContactOneToken: a host never contacted gets one request, not a
// burst: at 600/min with a burst of 5, the second admission waits 100ms.
// Its bucket fills while it is idle: a second later, five go at once.
func firstContactOneToken(t *testing.T, env Env) {
	for i, want := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		if a := admit(t, env, host); !nearD(a.Wait, want) {
			t.Errorf("admission %d to a new host: wait %v, want %v", i+1, a.Wait, want)
		}
	}
	env.Advance(time.Second + 200*time.Millisecond)
	for i := range 6 {
		want := time.Duration(max(i-4, 0)) * 100 * time.Millisecond
		if a := admit(t, env, host); !nearD(a.Wait, want) {
			t.Errorf("admission %d after idle: wait %v, want %v", i+1, a.Wait, want)
		}
	}
}
