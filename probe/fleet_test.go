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

// TestRunFleetDeadline is the acceptance test: 1,000 loopback targets, of
// which 100 hang in the TCP handshake, 50 stall in TLS, 50 are throttled
// and 50 serve a challenge, probed with a 2 s deadline; Run must return
// within 150 ms of it. Under the race detector, which makes the 850 quick
// probes several times slower, the deadline is 6 s so that they can
// finish; the 150 ms bound is the same.
func TestRunFleetDeadline(t *testing.T) {
	f := newFleet(t, 1000, 100, 50, 50, 50)
	before := goleak.IgnoreCurrent()

	deadline := 2 * time.Second
	if raceEnabled {
		deadline = 6 * time.Second
	}
	start := time.Now()
	// The test is about the deadline with 150 connections stuck at once,
	// so it lifts the per-host cap and skips robots.txt; the cap and the
	// robots check have their own tests.
	rep, err := probe.Run(context.Background(), f.targets, probe.Options{
		Deadline:     deadline,
		Concurrency:  256,
		PerHost:      -1,
		IgnoreRobots: true,
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("Run returned after %v (deadline %v, overshoot %v)", elapsed, deadline, elapsed-deadline)
	if limit := deadline + 150*time.Millisecond; elapsed > limit {
		t.Errorf("Run took %v, want at most %v", elapsed, limit)
	}
	// Every goroutine of the probe is gone; the servers' own stay.
	goleak.VerifyNone(t, before)

	if got := len(rep.Results); got != 1000 {
		t.Fatalf("len(Results) = %d, want 1000", got)
	}
	byKind := map[string]map[string]int{} // kind -> outcome -> count
	stages := map[string]map[string]int{} // kind -> stage -> count
	for i, r := range rep.Results {
		if r.URL != f.targets[i].URL {
			t.Fatalf("Results[%d].URL = %q, want %q (input order)", i, r.URL, f.targets[i].URL)
		}
		k := f.kind[r.URL]
		if byKind[k] == nil {
			byKind[k], stages[k] = map[string]int{}, map[string]int{}
		}
		byKind[k][r.OutcomeName()]++
		stages[k][r.Stage.String()]++
	}
	want := map[string]map[string]int{
		"ok":        {"ok": 750},
		"hang":      {"deadline": 100},
		"stall":     {"deadline": 50},
		"throttle":  {"throttled": 50},
		"challenge": {"refused": 50},
	}
	for k, w := range want {
		if fmt.Sprint(byKind[k]) != fmt.Sprint(w) {
			t.Errorf("outcomes of %s targets = %v, want %v", k, byKind[k], w)
		}
	}
	if runtime.GOOS == "linux" {
		if got := stages["hang"]["connect"]; got != 100 {
			t.Errorf("hang targets stalled in connect: %d, want 100 (stages %v)", got, stages["hang"])
		}
	}
	if got := stages["stall"]["tls"]; got != 50 {
		t.Errorf("stall targets stalled in tls: %d, want 50 (stages %v)", got, stages["stall"])
	}

	d := rep.Diagnosis
	wantCounts := probe.Counts{OK: 750, Throttled: 50, Refused: 50, Deadline: 150}
	if d.Outcomes != wantCounts {
		t.Errorf("Outcomes = %+v, want %+v", d.Outcomes, wantCounts)
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
			t.Errorf("Diagnosis.%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if d.Backoff.Initial < 7*time.Second {
		t.Errorf("Backoff.Initial = %v, want at least 7s", d.Backoff.Initial)
	}
	if p := rep.Backoff.Policy(); p.BaseDelay < 7*time.Second || p.MaxDelay < p.BaseDelay {
		t.Errorf("Backoff.Policy() = %+v, want BaseDelay >= 7s and MaxDelay >= BaseDelay", p)
	}
	if c := d.Recommendation.Concurrency; c <= 0 || c >= 1 {
		t.Errorf("Recommendation.Concurrency = %v, want in (0, 1)", c)
	}
	for _, r := range rep.Results {
		if r.Deadline && (r.Err != "deadline" || r.Outcome != classify.Canceled) {
			t.Errorf("deadline result %+v: want Err \"deadline\", Outcome Canceled", r)
			break
		}
	}
}
