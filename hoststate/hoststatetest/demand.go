package hoststatetest

import (
	"math"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
)

// answer admits one attempt to host, waits out its pacing, advances the
// clock by gap more (the crawl's own demand spacing its requests), and
// records r, the host's answer after latency.
func answer(t *testing.T, env Env, host string, gap time.Duration, r classify.Result) hoststate.Effect {
	t.Helper()
	a := admit(t, env, host)
	env.Advance(a.Wait + gap)
	return record(t, env, host, a, r)
}

// okIn is an OK answer whose time to headers is lat.
func okIn(lat time.Duration) classify.Result {
	return classify.Result{Outcome: classify.OK, Status: 200, Latency: lat}
}

// slowUntilCut answers OKs gap apart whose time to headers grows from
// 100ms by step an answer, at most n of them, until the host's rate falls
// below perMinute; it returns the host's state then and the latest
// answer's latency (the state after n answers if the rate never fell).
func slowUntilCut(t *testing.T, env Env, gap, step time.Duration, n int, perMinute float64) (hoststate.Status, time.Duration) {
	t.Helper()
	var st hoststate.Status
	var lat time.Duration
	for i := range n {
		lat = 100*time.Millisecond + time.Duration(i+1)*step
		answer(t, env, host, gap, okIn(lat))
		if st = state(t, env, host); st.PerMinute < perMinute {
			break
		}
	}
	return st, lat
}

// strayRefusalRecovers: a broad crawl's host configured at 600/min gets
// one request a second (the crawl's demand, a tenth of its pace), answered
// in 10ms. A 429 with Retry-After 1s after 30 such OKs is a stray: the
// host is paused for its Retry-After, and its rate and learnt ceiling are
// what they were (600, none). Strays every 30 OKs, for ten minutes of such
// a crawl, leave it at 600, each paid for with its second.
func strayRefusalRecovers(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond}
	stray := classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second}
	for round := range 20 {
		for range 30 {
			answer(t, env, host, time.Second, ok)
		}
		answer(t, env, host, time.Second, stray)
		st := state(t, env, host)
		if st.PerMinute != 600 || !near(st.PausedUntil, env.Now().Add(time.Second)) {
			t.Fatalf("stray 429 %d at a tenth of the pace: rate %v, paused until %v; want 600, %v",
				round+1, st.PerMinute, st.PausedUntil, env.Now().Add(time.Second))
		}
	}
	// Nothing was learnt: the crawl's demand doubling to the pace is
	// answered at the pace.
	for range 30 {
		answer(t, env, host, 0, classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond})
	}
	if st := state(t, env, host); st.PerMinute != 600 {
		t.Errorf("after 20 strays and 30 OKs at the pace: rate %v, want 600", st.PerMinute)
	}
}

// burstyDemandIsNoQueue: a host configured at 600/min gets the crawl's
// requests three at a time, 60ms apart, a second between the threes: two
// admissions in three wait 40ms of the pace's 100ms interval, yet none
// queues at it (the crawl asks for 150 a minute, a quarter of the pace).
// A 429 after ten such threes is a stray: the rate stays 600.
func burstyDemandIsNoQueue(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond}
	for range 10 {
		answer(t, env, host, 60*time.Millisecond, ok)
		answer(t, env, host, 60*time.Millisecond, ok)
		answer(t, env, host, time.Second, ok)
	}
	answer(t, env, host, time.Second, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second})
	if st := state(t, env, host); st.PerMinute != 600 {
		t.Errorf("429 at a quarter of the pace, in bursts that wait part of an interval: rate %v, want 600", st.PerMinute)
	}
}

// strayAfterFirstCut: a host configured at 600/min refuses the crawl's
// very first request (a 429, Retry-After 1s): nothing is known of it, so
// the rate halves to 300. Two OKs later, with three attempts admitted at
// once (two of them still waiting for their tokens), the first of them is
// refused too: while the crawl's demand is not known, a refusal soon after
// a cut is a stray, whatever queued during the pause. The rate stays 300;
// a crawl over many hosts meets such a pair now and then, and halving
// again on it would leave the host far below its pace.
func strayAfterFirstCut(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond}
	throttled := classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second}
	answer(t, env, host, 0, throttled)
	if st := state(t, env, host); st.PerMinute != 300 {
		t.Fatalf("429 on the first request: rate %v, want 300", st.PerMinute)
	}
	env.Advance(time.Second)
	answer(t, env, host, 100*time.Millisecond, ok)
	answer(t, env, host, 100*time.Millisecond, ok)
	adms := []hoststate.Admission{admit(t, env, host), admit(t, env, host), admit(t, env, host)}
	env.Advance(adms[0].Wait)
	record(t, env, host, adms[0], throttled)
	if st := state(t, env, host); st.PerMinute != 300 {
		t.Errorf("429 two OKs after the first cut, two attempts queued: rate %v, want 300", st.PerMinute)
	}
}

// admissionCarriesBaseLatency: an admission reports the host's base
// latency as the store learnt it from the OKs recorded (with a shared
// store, every worker's): none before the first, then the lowest, drifting
// up toward a slower answer over minutes, not answers (three OKs in 40ms a
// second apart and one in 200ms a second later: 40ms + 160ms × (1 -
// e^(-1s/5min)), 40.532ms).
func admissionCarriesBaseLatency(t *testing.T, env Env) {
	if a := admit(t, env, host); a.BaseLatency != 0 {
		t.Fatalf("first admission: BaseLatency %v, want 0 (nothing answered yet)", a.BaseLatency)
	}
	for _, d := range []time.Duration{40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond, 200 * time.Millisecond} {
		answer(t, env, host, time.Second, classify.Result{Outcome: classify.OK, Status: 200, Latency: d})
	}
	if a := admit(t, env, host); a.BaseLatency != 40532*time.Microsecond {
		t.Errorf("after OKs in 40ms, 40ms, 40ms and 200ms a second apart: BaseLatency %v, want 40.532ms", a.BaseLatency)
	}
}

// limitBelowDemand: the same host behind a limit below the crawl's demand
// (one request in two refused, at a request a second) is not taken for
// strays: once refusals are a fair share of its answers its rate drops,
// and goes on dropping until it nears the crawl's demand.
func limitBelowDemand(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond}
	refused := classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second}
	for range 6 {
		answer(t, env, host, time.Second, ok)
	}
	strays := 0
	for range 40 {
		answer(t, env, host, time.Second, ok)
		answer(t, env, host, time.Second, refused)
		if state(t, env, host).PerMinute == 600 {
			strays++
		}
	}
	if strays == 0 || strays > 10 {
		t.Errorf("refusals taken for strays: %d of 40, want the first few (1 to 10)", strays)
	}
	if st := state(t, env, host); st.PerMinute > 90 {
		t.Errorf("after 40 refusals at one a second in two: rate %v, want near the crawl's demand (at most 90/min)", st.PerMinute)
	}
}

// refusalAtPaceIsALimit: at a host the crawl keeps at its pace (OKs one
// interval of 600/min apart), the same lone 429 is a limit reached: it
// learns the ceiling as before.
func refusalAtPaceIsALimit(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond}
	for range 21 {
		answer(t, env, host, 0, ok)
	}
	answer(t, env, host, 0, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second})
	if got, want := state(t, env, host).PerMinute, 600.0*20/21*0.97; !nearRate(got, want) {
		t.Errorf("429 after 21 OKs at the pace: rate %v, want %v", got, want)
	}
}

// refusalWithQueueIsALimit: a host answering one request in 2s while
// attempts wait there (accepted 30/min × 2s latency: one in flight on
// average) is at its limit even though the crawl's pace, 600/min, is far
// above what it accepts: a 429 then is learnt, not a stray.
func refusalWithQueueIsALimit(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 2 * time.Second}
	for range 21 {
		answer(t, env, host, 2*time.Second, ok)
	}
	answer(t, env, host, 0, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second})
	if got := state(t, env, host).PerMinute; got >= 600 {
		t.Errorf("429 with attempts waiting at the host: rate %v, want below 600", got)
	}
}

// slowingHostSlows: a host configured at 6,000/min serves 40 requests a
// second in 100ms each; under our load its time to headers rises toward 1s
// while it goes on serving 40 a second. Once that lasts, it is paused
// while the queue our attempts built there drains and then paced at what
// it serves (2,400/min, 3 % margin): no attempt is left holding a slot
// reckoned at a lower rate. Its learnt ceiling is what it served, so the
// rate stays there, its latency back at 100ms, until the probe's backoff
// has passed.
func slowingHostSlows(t *testing.T, env Env) {
	for range 8 {
		answer(t, env, host, 25*time.Millisecond, okIn(100*time.Millisecond))
	}
	if got := state(t, env, host).PerMinute; got != 6000 {
		t.Fatalf("at its service time: rate %v, want 6000", got)
	}
	st, lat := slowUntilCut(t, env, 25*time.Millisecond, 50*time.Millisecond, 20, 6000)
	if !nearRate(st.PerMinute, 2400*0.97) {
		t.Fatalf("latency rising to 1s under load: rate %v, want %v", st.PerMinute, 2400*0.97)
	}
	// Paused while the queue drains: what the pace (6,000/min) sent over
	// the fast latency, less what the host serves at once, at the rate it
	// serves (2,400/min): 2.5 × fast latency - 100ms, the fast latency
	// between 250ms and the latest answer's.
	if wait, lo, hi := st.PausedUntil.Sub(env.Now()), 525*time.Millisecond, lat*5/2-100*time.Millisecond; wait < lo || wait > hi {
		t.Errorf("latency rising to %v under load: paused for %v, want %v to %v", lat, wait, lo, hi)
	}
	for range 40 {
		answer(t, env, host, 0, okIn(100*time.Millisecond))
	}
	if got := state(t, env, host).PerMinute; !nearRate(got, 2400*0.97) {
		t.Errorf("latency back at 100ms: rate %v, want %v", got, 2400*0.97)
	}
}

// probeThatSlowsEnds: a host whose ceiling was learnt from its latency
// (as in slowingHostSlows) is probed above it once 200 OKs came at its
// base latency; when its latency rises under the probe, the probe found
// the limit: the host is paused to drain the queue within a few answers,
// not after the 250ms a latency must last to be taken for a host slowing
// down (about 22 answers here), which only guards against a stalled
// machine's lone slow answers.
func probeThatSlowsEnds(t *testing.T, env Env) {
	for range 8 {
		answer(t, env, host, 25*time.Millisecond, okIn(100*time.Millisecond))
	}
	if st, _ := slowUntilCut(t, env, 25*time.Millisecond, 50*time.Millisecond, 20, 6000); st.PerMinute >= 6000 {
		t.Fatalf("latency rising to 1s under load: rate %v, want it paced at what it serves", st.PerMinute)
	}
	for range 240 {
		answer(t, env, host, 25*time.Millisecond, okIn(100*time.Millisecond))
	}
	if got := state(t, env, host).PerMinute; got < 2400 {
		t.Fatalf("240 OKs at the base latency: rate %v, want a probe above 2,400", got)
	}
	for n := 1; n <= 5; n++ {
		answer(t, env, host, time.Millisecond, okIn(600*time.Millisecond))
		if st := state(t, env, host); st.PausedUntil.After(env.Now()) {
			return
		}
	}
	t.Errorf("a probe raising the latency to 600ms: not paused after 5 answers, want at once")
}

// slowingPauseIsBounded: a host configured at 60,000/min that a crawl asks
// a page a second of (its pace a thousand times the demand) and whose time
// to headers rises from 100ms toward 3s: the pause that lets the queue
// drain is bounded by the wait its answers show (at most 4 times the fast
// latency over the base), not reckoned from the pace (which would pause
// it for most of an hour).
func slowingPauseIsBounded(t *testing.T, env Env) {
	for range 8 {
		answer(t, env, host, time.Second, okIn(100*time.Millisecond))
	}
	st, lat := slowUntilCut(t, env, time.Second, 100*time.Millisecond, 40, 60000)
	if st.PerMinute >= 60000 {
		t.Fatal("latency rising to 4s: the rate never dropped")
	}
	if wait := st.PausedUntil.Sub(env.Now()); wait <= 0 || wait > 4*lat {
		t.Errorf("latency risen to %v: paused for %v, want more than 0 and at most %v", lat, wait, 4*lat)
	}
}

// queueIsNoBase: a host answering 40 a second at its base latency of
// 100ms, paced at what it serves (2,400/min: no cut), answers in 400ms
// for 5 s (200 answers: a queue of ours, which drains in seconds): its
// base stays near 100ms (it follows a higher latency over minutes, not
// answers; at 1/256 of the excess an answer it was at 263ms, and the
// rate climbed back into the queue as soon as the latency fell a little).
// Answering in 400ms for 10 minutes more, a second apart (slower for
// good), the base follows it (at least 300ms).
func queueIsNoBase(t *testing.T, env Env) {
	for range 20 {
		answer(t, env, host, 25*time.Millisecond, okIn(100*time.Millisecond))
	}
	for range 200 {
		answer(t, env, host, 25*time.Millisecond, okIn(400*time.Millisecond))
	}
	if got := admit(t, env, host).BaseLatency; got > 110*time.Millisecond {
		t.Errorf("after 5 s of answers in 400ms (a queue of ours): base latency %v, want at most 110ms", got)
	}
	for range 600 {
		answer(t, env, host, time.Second, okIn(400*time.Millisecond))
	}
	if got := admit(t, env, host).BaseLatency; got < 300*time.Millisecond {
		t.Errorf("after 10 minutes of answers in 400ms (slower for good): base latency %v, want at least 300ms", got)
	}
}

// slowingLearnsWhatItServes: a host configured at 6,000/min (bursts of 8)
// whose 4 workers answer together every 100ms (gaps of 1, 1, 1 and 97ms:
// 40 a second) and whose time to headers rises under our load is paced,
// once its latency is back at its base, at what it serves: 2,400/min, 3 %
// below (2,328), within a tenth (the slow average of the gaps still moves
// with the burst's phase: here 2,122). The fast average of the gaps read
// it as 1,612 or 3,683 by the phase of the burst the drop came in.
func slowingLearnsWhatItServes(t *testing.T, env Env) {
	gaps := []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, 97 * time.Millisecond}
	for i := range 40 {
		answer(t, env, host, gaps[i%4], okIn(100*time.Millisecond))
	}
	dropped := false
	for i := range 200 {
		answer(t, env, host, gaps[i%4], okIn(100*time.Millisecond+time.Duration(i+1)*25*time.Millisecond))
		if state(t, env, host).PerMinute < 6000 {
			dropped = true
			break
		}
	}
	if !dropped {
		t.Fatal("latency rising to 5s under load: the rate never dropped")
	}
	for range 60 {
		answer(t, env, host, 0, okIn(100*time.Millisecond))
	}
	if got, want := state(t, env, host).PerMinute, 2400*0.97; math.Abs(got-want) > 0.1*want {
		t.Errorf("latency back at 100ms: rate %v, want %v within a tenth (what the host served, 3 %% below)", got, want)
	}
}

// farHostNotPenalised: a host that answers in 2s from the start (far, or
// slow at everything) is at its base latency: nothing is cut, whatever the
// latency, at 600/min.
func farHostNotPenalised(t *testing.T, env Env) {
	for range 100 {
		answer(t, env, host, 0, classify.Result{Outcome: classify.OK, Status: 200, Latency: 2 * time.Second})
	}
	if got := state(t, env, host).PerMinute; got != 600 {
		t.Errorf("a far but steady host: rate %v, want 600", got)
	}
}

// probeAfterOKs: a host refused at its pace (600/min, after 21 OKs) settles
// below the refusal; 200 OKs later — 20 seconds at that rate, long before
// the probe's 2-minute backoff — the probe begins: 5 OKs into it the rate
// is an eighth of a tenth above where it settled, 10 OKs into it at the
// configured 600 (a tenth above, capped): a refusal taken for a limit
// costs a fast host seconds, and a probe at most one refusal in 200
// answers.
func probeAfterOKs(t *testing.T, env Env) {
	ok := classify.Result{Outcome: classify.OK, Status: 200, Latency: 10 * time.Millisecond}
	for range 21 {
		answer(t, env, host, 0, ok)
	}
	answer(t, env, host, 0, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: time.Second})
	settled := 600.0 * 20 / 21 * 0.97
	for range 199 {
		answer(t, env, host, 0, ok)
	}
	if got := state(t, env, host).PerMinute; !nearRate(got, settled) {
		t.Fatalf("199 OKs after the refusal: rate %v, want %v", got, settled)
	}
	for i, want := range []float64{settled, settled * (1 + 0.1/8), 600} {
		n := []int{1, 5, 5}[i]
		for range n {
			answer(t, env, host, 0, ok)
		}
		if got := state(t, env, host).PerMinute; !nearRate(got, want) {
			t.Errorf("%d OKs after the refusal: rate %v, want %v", 200+[]int{0, 5, 10}[i], got, want)
		}
	}
}

// stallIsNotSlowing: a host paced at 600,000/min and answering the
// crawl's 60,000/min in 100us, whose answers a stalled machine sees 400ms
// late now and then (one in a hundred), is not slowing down under our
// load: its rate stands.
func stallIsNotSlowing(t *testing.T, env Env) {
	for i := range 1000 {
		lat := 100 * time.Microsecond
		if i%100 == 50 {
			lat = 400 * time.Millisecond
		}
		answer(t, env, host, time.Millisecond, classify.Result{Outcome: classify.OK, Status: 200, Latency: lat})
	}
	if got := state(t, env, host).PerMinute; got != 600000 {
		t.Errorf("a fast host seen through a stalling machine: rate %v, want 600000", got)
	}
}
