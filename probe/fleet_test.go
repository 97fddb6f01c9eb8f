package probe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/probe"
)

// fleet is a set of loopback targets of known kinds.
type fleet struct {
	targets []probe.Target
	kind    map[string]string // redacted URL -> kind
}

// newFleet builds n targets: hang hang in the TCP handshake, stall in the
// TLS handshake, throttle answer 429 with Retry-After: 7, challenge serve a
// challenge page, and the rest answer 200. Kinds are interleaved so that
// the slow ones do not all start first.
func newFleet(t testing.TB, n, hang, stall, throttle, challenge int) fleet {
	t.Helper()
	site := siteServer(t).URL
	var hangAddr, stallAddr string
	if hang > 0 {
		hangAddr = newHangAddr(t)
	}
	if stall > 0 {
		stallAddr = newHoldListener(t).addr()
	}
	f := fleet{kind: map[string]string{}}
	counts := map[string]int{"hang": hang, "stall": stall, "throttle": throttle, "challenge": challenge}
	kinds := make([]string, 0, n)
	for _, k := range []string{"hang", "stall", "throttle", "challenge"} {
		for range counts[k] {
			kinds = append(kinds, k)
		}
	}
	for len(kinds) < n {
		kinds = append(kinds, "ok")
	}
	// A fixed shuffle, so the slow kinds do not all start first.
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i, kind := range kinds {
		var u string
		switch kind {
		case "hang":
			u = fmt.Sprintf("http://%s/hang/%d", hangAddr, i)
		case "stall":
			u = fmt.Sprintf("https://%s/stall/%d", stallAddr, i)
		default:
			u = fmt.Sprintf("%s/%s/%d", site, kind, i)
		}
		f.targets = append(f.targets, probe.Target{URL: u})
		f.kind[u] = kind
	}
	for k, want := range counts {
		if got := f.count(k); got != want {
			t.Fatalf("fleet has %d %s targets, want %d", got, k, want)
		}
	}
	return f
}

func (f fleet) count(kind string) int {
	n := 0
	for _, k := range f.kind {
		if k == kind {
			n++
		}
	}
	return n
}

// BenchmarkFleetDeadline is the acceptance run on real sockets: 1,000
// loopback targets, of which 100 hang in the TCP handshake, 50 stall in
// TLS, 50 are throttled and 50 serve a challenge, probed with a 2 s
// deadline (6 s under the race detector, which slows the 850 quick probes
// several times over). It checks every outcome and stage and reports how
// long after the deadline Run returned (overshoot-ms); the deadline logic
// itself is tested in fake time (TestRunDeadlineFakeTime).
//
//	go test -run '^$' -bench FleetDeadline -benchtime 3x ./probe
func BenchmarkFleetDeadline(b *testing.B) {
	f := newFleet(b, 1000, 100, 50, 50, 50)
	deadline := 2 * time.Second
	if raceEnabled {
		deadline = 6 * time.Second
	}
	var worst time.Duration
	b.ReportAllocs()
	for b.Loop() {
		before := goleak.IgnoreCurrent()
		start := time.Now()
		// The run is about the deadline with 150 connections stuck at
		// once, so it lifts the per-host cap and skips robots.txt; the cap
		// and the robots check have their own tests.
		rep, err := probe.Run(context.Background(), f.targets, probe.Options{
			Deadline:     deadline,
			Concurrency:  256,
			PerHost:      -1,
			IgnoreRobots: true,
		})
		worst = max(worst, time.Since(start)-deadline)
		if err != nil {
			b.Fatalf("Run: %v", err)
		}
		// Every goroutine of the probe is gone; the servers' own stay.
		goleak.VerifyNone(b, before)
		checkFleet(b, f, rep)
	}
	b.ReportMetric(float64(worst)/1e6, "overshoot-ms")
}

// TestRunStalledStages: on real sockets, a probe stuck in the TCP
// handshake is cut by the deadline in stage connect, and one stuck in the
// TLS handshake in stage tls.
func TestRunStalledStages(t *testing.T) {
	f := newFleet(t, 8, 4, 4, 0, 0)
	rep, err := probe.Run(context.Background(), f.targets, probe.Options{
		Deadline: 500 * time.Millisecond, PerHost: -1, IgnoreRobots: true,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, r := range rep.Results {
		want := map[string]string{"hang": "connect", "stall": "tls"}[f.kind[r.URL]]
		if runtime.GOOS != "linux" && want == "connect" {
			want = r.Stage // only Linux can hold a handshake open
		}
		if !r.Deadline || r.Err != "deadline" || r.Stage != want {
			t.Errorf("%s target %s: deadline %v, err %q, stage %v; want cut by the deadline in stage %s",
				f.kind[r.URL], r.URL, r.Deadline, r.Err, r.Stage, want)
		}
	}
}

// checkFleet checks the results and the diagnosis of a run over f.
func checkFleet(tb testing.TB, f fleet, rep *probe.Report) {
	tb.Helper()
	n := len(f.targets)
	if got := len(rep.Results); got != n {
		tb.Fatalf("len(Results) = %d, want %d", got, n)
	}
	byKind := map[string]map[string]int{} // kind -> outcome -> count
	stages := map[string]map[string]int{} // kind -> stage -> count
	for i, r := range rep.Results {
		if r.URL != f.targets[i].URL {
			tb.Fatalf("Results[%d].URL = %q, want %q (input order)", i, r.URL, f.targets[i].URL)
		}
		k := f.kind[r.URL]
		if byKind[k] == nil {
			byKind[k], stages[k] = map[string]int{}, map[string]int{}
		}
		byKind[k][r.OutcomeName()]++
		stages[k][r.Stage]++
		if r.Deadline && (r.Err != "deadline" || r.Outcome != classify.Canceled) {
			tb.Errorf("deadline result %+v: want Err \"deadline\", Outcome Canceled", r)
		}
	}
	want := map[string]map[string]int{
		"ok":        {"ok": f.count("ok")},
		"hang":      {"deadline": f.count("hang")},
		"stall":     {"deadline": f.count("stall")},
		"throttle":  {"throttled": f.count("throttle")},
		"challenge": {"refused": f.count("challenge")},
	}
	for k, w := range want {
		if fmt.Sprint(byKind[k]) != fmt.Sprint(w) {
			tb.Errorf("outcomes of %s targets = %v, want %v", k, byKind[k], w)
		}
	}
	if runtime.GOOS == "linux" {
		if got := stages["hang"]["connect"]; got != f.count("hang") {
			tb.Errorf("hang targets stalled in connect: %d, want %d (stages %v)", got, f.count("hang"), stages["hang"])
		}
	}
	if got := stages["stall"]["tls"]; got != f.count("stall") {
		tb.Errorf("stall targets stalled in tls: %d, want %d (stages %v)", got, f.count("stall"), stages["stall"])
	}

	d := rep.Diagnosis
	wantCounts := probe.Outcomes{OK: 750, Throttled: 50, Refused: 50, Deadline: 150}
	if d.Outcomes != wantCounts {
		tb.Errorf("Outcomes = %+v, want %+v", d.Outcomes, wantCounts)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Total", d.Total, 1000},
		{"Succeeded", d.Succeeded, 750},
		{"RateLimited", d.RateLimited, 50},
		{"Blocked", d.Blocked, 200},
		{"NotStarted", d.NotStarted, 0},
		{"MaxRetryAfter", d.MaxRetryAfter, 7 * time.Second},
		{"Status", d.Status, probe.Degraded}, // success 0.75; throttling alone does not halt
		{"Latency.Samples", d.Latency.Samples, 850},
	}
	for _, c := range checks {
		if c.got != c.want {
			tb.Errorf("Diagnosis.%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if d.Backoff.BaseDelay < 7*time.Second {
		tb.Errorf("Backoff.BaseDelay = %v, want at least 7s", d.Backoff.BaseDelay)
	}
	if p := rep.Backoff.Policy(); p.BaseDelay < 7*time.Second || p.MaxDelay < p.BaseDelay {
		tb.Errorf("Backoff.Policy() = %+v, want BaseDelay >= 7s and MaxDelay >= BaseDelay", p)
	}
	if c := d.Recommendation.Concurrency; c <= 0 || c >= 1 {
		tb.Errorf("Recommendation.Concurrency = %v, want in (0, 1)", c)
	}
}
