package probe_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/probe"
)

const ms = time.Millisecond

// Result constructors for table tests.
func okAt(lat time.Duration) probe.TargetResult {
	return probe.TargetResult{Host: "a.example", Egress: "direct", Status: 200, Outcome: classify.OK, Stage: probe.StageResponse, Latency: lat}
}

func statusAt(code int, o classify.Outcome, lat time.Duration) probe.TargetResult {
	r := okAt(lat)
	r.Status, r.Outcome, r.Err = code, o, "HTTP status"
	return r
}

func throttled(ra time.Duration) probe.TargetResult {
	r := statusAt(429, classify.Throttled, 10*ms)
	r.RetryAfter = ra
	return r
}

func timedOut() probe.TargetResult {
	return probe.TargetResult{Host: "a.example", Egress: "direct", Outcome: classify.Transient, TimedOut: true, Stage: probe.StageConnect, Latency: time.Second, Err: "timeout"}
}

func cutByDeadline(stage probe.Stage) probe.TargetResult {
	return probe.TargetResult{Host: "a.example", Egress: "direct", Outcome: classify.Canceled, Deadline: true, Stage: stage, Err: "deadline"}
}

func refusedConn() probe.TargetResult {
	return probe.TargetResult{Host: "a.example", Egress: "direct", Outcome: classify.Transient, Stage: probe.StageConnect, Latency: ms, Err: "connection refused"}
}

func repeat(n int, r probe.TargetResult) []probe.TargetResult {
	out := make([]probe.TargetResult, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func concat(rs ...[]probe.TargetResult) []probe.TargetResult { return slices.Concat(rs...) }

func TestDiagnoseStatus(t *testing.T) {
	tests := []struct {
		name    string
		results []probe.TargetResult
		th      probe.Thresholds
		want    probe.Verdict
		rate    float64
	}{
		{"no results", nil, probe.Thresholds{}, probe.Critical, 0},
		{"one ok", repeat(1, okAt(100*ms)), probe.Thresholds{}, probe.Healthy, 1},
		{"one failure", repeat(1, refusedConn()), probe.Thresholds{}, probe.Critical, 0},
		{"all timeouts", repeat(10, timedOut()), probe.Thresholds{}, probe.Critical, 0},
		{"all cut by the deadline", repeat(10, cutByDeadline(probe.StageConnect)), probe.Thresholds{}, probe.Critical, 0},
		{"all cancelled by the caller", repeat(3, probe.TargetResult{Outcome: classify.Canceled, Err: "canceled"}), probe.Thresholds{}, probe.Critical, 0},
		{"success exactly 0.9 is healthy", concat(repeat(9, okAt(ms)), repeat(1, statusAt(500, classify.Transient, ms))), probe.Thresholds{}, probe.Healthy, 0.9},
		{"success 45/50 is healthy", concat(repeat(45, okAt(ms)), repeat(5, refusedConn())), probe.Thresholds{}, probe.Healthy, 0.9},
		{"success just below 0.9", concat(repeat(8, okAt(ms)), repeat(1, refusedConn())), probe.Thresholds{}, probe.Degraded, 8.0 / 9},
		{"success exactly 0.5 is degraded", concat(repeat(5, okAt(ms)), repeat(5, refusedConn())), probe.Thresholds{}, probe.Degraded, 0.5},
		{"success below 0.5", concat(repeat(4, okAt(ms)), repeat(5, refusedConn())), probe.Thresholds{}, probe.Critical, 4.0 / 9},
		{"mean latency exactly 2s is healthy", repeat(4, okAt(2*time.Second)), probe.Thresholds{}, probe.Healthy, 1},
		{"mean latency above 2s", concat(repeat(3, okAt(2*time.Second)), repeat(1, okAt(2*time.Second+4))), probe.Thresholds{}, probe.Degraded, 1},
		{"one 429 degrades", concat(repeat(99, okAt(ms)), repeat(1, throttled(7*time.Second))), probe.Thresholds{}, probe.Degraded, 0.99},
		{"one 429 among 3 degrades", concat(repeat(2, okAt(ms)), repeat(1, throttled(7*time.Second))), probe.Thresholds{}, probe.Degraded, 2.0 / 3},
		{"429 rule disabled", concat(repeat(99, okAt(ms)), repeat(1, throttled(7*time.Second))), probe.Thresholds{DegradedRateLimited: -1}, probe.Healthy, 0.99},
		{"429 rule at 2", concat(repeat(99, okAt(ms)), repeat(1, throttled(0))), probe.Thresholds{DegradedRateLimited: 2}, probe.Healthy, 0.99},
		{"critical 429 rule opted in", concat(repeat(99, okAt(ms)), repeat(1, throttled(0))), probe.Thresholds{CriticalRateLimited: 1}, probe.Critical, 0.99},
		{"only 429s", repeat(3, throttled(0)), probe.Thresholds{}, probe.Critical, 0},
		{"custom success thresholds", concat(repeat(7, okAt(ms)), repeat(3, refusedConn())), probe.Thresholds{CriticalSuccessRate: 0.8}, probe.Critical, 0.7},
		{"latency rule disabled", repeat(2, okAt(time.Minute)), probe.Thresholds{DegradedLatency: -1}, probe.Healthy, 1},
		{"failure latency does not count", concat(repeat(10, okAt(ms)), repeat(1, statusAt(404, classify.Permanent, time.Hour))), probe.Thresholds{DegradedSuccessRate: -1}, probe.Degraded, 10.0 / 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := probe.Diagnose(tt.results, tt.th)
			if d.Status != tt.want {
				t.Errorf("Diagnose(%s).Status = %v (reasons %q), want %v", tt.name, d.Status, d.Reasons, tt.want)
			}
			if d.SuccessRate != tt.rate {
				t.Errorf("Diagnose(%s).SuccessRate = %v, want %v", tt.name, d.SuccessRate, tt.rate)
			}
			if (d.Status == probe.Healthy) != (len(d.Reasons) == 0) {
				t.Errorf("Diagnose(%s): status %v with reasons %q", tt.name, d.Status, d.Reasons)
			}
			// CRITICAL means halt, and only CRITICAL does.
			if (d.Status == probe.Critical) != d.Recommendation.Halt() {
				t.Errorf("Diagnose(%s): status %v with Halt() = %v (concurrency %v)", tt.name, d.Status, d.Recommendation.Halt(), d.Recommendation.Concurrency)
			}
			// A blocking host implies a blocked probe.
			if len(d.BlockingHosts) > 0 && d.Blocked == 0 {
				t.Errorf("Diagnose(%s): BlockingHosts %v with Blocked 0", tt.name, d.BlockingHosts)
			}
		})
	}
}

func TestDiagnoseEdges(t *testing.T) {
	t.Run("no results", func(t *testing.T) {
		d := probe.Diagnose(nil, probe.Thresholds{})
		if d.Latency != (probe.Latency{}) || d.Total != 0 || d.Measured != 0 {
			t.Errorf("Diagnose(nil) = %+v, want zero counts and latency", d)
		}
		if d.Recommendation.Concurrency != 0 || !d.Recommendation.Halt() {
			t.Errorf("Diagnose(nil).Recommendation = %+v, want halt", d.Recommendation)
		}
		want := probe.Backoff{BaseDelay: 5 * time.Second, MaxDelay: time.Minute, MaxRetries: 5}
		if d.Backoff != want {
			t.Errorf("Diagnose(nil).Backoff = %+v, want %+v", d.Backoff, want)
		}
	})
	t.Run("one result", func(t *testing.T) {
		d := probe.Diagnose(repeat(1, okAt(120*ms)), probe.Thresholds{})
		want := probe.Latency{Samples: 1, Mean: 120 * ms, P50: 120 * ms, P95: 120 * ms, P99: 120 * ms, Max: 120 * ms}
		if d.Latency != want {
			t.Errorf("Latency = %+v, want %+v", d.Latency, want)
		}
		// 4 x p99 = 480ms, raised to the 1s floor.
		wantB := probe.Backoff{BaseDelay: time.Second, MaxDelay: 10 * time.Second, MaxRetries: 2, AttemptTimeout: time.Second}
		if d.Backoff != wantB {
			t.Errorf("Backoff = %+v, want %+v", d.Backoff, wantB)
		}
		if d.Recommendation.Concurrency != 1 {
			t.Errorf("Concurrency = %v, want 1", d.Recommendation.Concurrency)
		}
	})
	t.Run("all timeouts", func(t *testing.T) {
		d := probe.Diagnose(repeat(10, timedOut()), probe.Thresholds{})
		// A hang is not a block: it is a timeout.
		if d.Latency.Samples != 0 || d.Timeouts != 10 || d.Blocked != 0 || d.ConnectionFailures != 0 {
			t.Errorf("got samples %d timeouts %d blocked %d connfail %d, want 0 10 0 0",
				d.Latency.Samples, d.Timeouts, d.Blocked, d.ConnectionFailures)
		}
		if d.Outcomes != (probe.Outcomes{Transient: 10}) {
			t.Errorf("Outcomes = %+v, want 10 transient", d.Outcomes)
		}
		if d.Backoff.AttemptTimeout != 0 {
			t.Errorf("AttemptTimeout = %v, want 0 without samples", d.Backoff.AttemptTimeout)
		}
	})
	t.Run("deadline cut and never started", func(t *testing.T) {
		rs := concat(repeat(3, cutByDeadline(probe.StageTLS)), repeat(2, cutByDeadline(probe.StageQueued)))
		d := probe.Diagnose(rs, probe.Thresholds{})
		// The 3 cut in flight hung (timeouts); none is a block.
		if d.Outcomes != (probe.Outcomes{Deadline: 5}) || d.NotStarted != 2 || d.Blocked != 0 || d.Timeouts != 3 || d.Measured != 5 {
			t.Errorf("got %+v notStarted %d blocked %d timeouts %d measured %d", d.Outcomes, d.NotStarted, d.Blocked, d.Timeouts, d.Measured)
		}
	})
	t.Run("caller cancellation is not measured", func(t *testing.T) {
		rs := concat(repeat(3, okAt(ms)), repeat(7, probe.TargetResult{Host: "a.example", Outcome: classify.Canceled, Err: "canceled"}))
		d := probe.Diagnose(rs, probe.Thresholds{})
		if d.Measured != 3 || d.SuccessRate != 1 || d.Status != probe.Healthy || d.Blocked != 0 {
			t.Errorf("got measured %d rate %v status %v blocked %d, want 3 1 HEALTHY 0", d.Measured, d.SuccessRate, d.Status, d.Blocked)
		}
	})
}

func TestDiagnoseCounts(t *testing.T) {
	rs := concat(
		repeat(10, okAt(ms)),
		repeat(2, throttled(7*time.Second)),
		repeat(1, throttled(30*time.Second)),
		repeat(1, statusAt(503, classify.Throttled, ms)), // 503 with Retry-After
		repeat(3, statusAt(403, classify.Permanent, ms)),
		repeat(2, statusAt(503, classify.Transient, ms)),
		repeat(4, probe.TargetResult{Host: "a.example", Status: 200, Outcome: classify.Refused, Markers: []string{"cloudflare"}, Latency: ms}),
		repeat(5, refusedConn()),
		repeat(6, timedOut()),
		repeat(7, cutByDeadline(probe.StageConnect)),
		repeat(1, statusAt(404, classify.Permanent, ms)),
	)
	d := probe.Diagnose(rs, probe.Thresholds{})
	checks := []struct {
		name      string
		got, want any
	}{
		{"RateLimited", d.RateLimited, 4},
		// 3 x 403 + 2 x 503 + 4 refused + 5 refused connections; a hang
		// is no block.
		{"Blocked", d.Blocked, 14},
		{"ConnectionFailures", d.ConnectionFailures, 5},
		// 6 timeouts + 7 cut by the deadline while connecting.
		{"Timeouts", d.Timeouts, 13},
		{"MaxRetryAfter", d.MaxRetryAfter, 30 * time.Second},
		{"Backoff.BaseDelay", d.Backoff.BaseDelay, 30 * time.Second},
		{"Backoff.MaxDelay", d.Backoff.MaxDelay, time.Minute},
		{"Outcomes", d.Outcomes, probe.Outcomes{OK: 10, Throttled: 4, Refused: 4, Permanent: 4, Transient: 13, Deadline: 7}},
		{"HaltHosts", d.Recommendation.HaltHosts, []string{"a.example"}},
		{"HostPerMinute", d.Recommendation.HostPerMinute, map[string]float64{"a.example": 2}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("Diagnose(mixed).%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// A Retry-After longer than the tier's cap raises the cap too.
	d = probe.Diagnose(concat(repeat(9, okAt(ms)), repeat(1, throttled(45*time.Second))), probe.Thresholds{})
	if d.Backoff.BaseDelay != 45*time.Second || d.Backoff.MaxDelay != 90*time.Second {
		t.Errorf("Backoff = %+v, want Initial 45s, Max 90s", d.Backoff)
	}
	if p := d.Backoff.Policy(); p.BaseDelay != 45*time.Second || p.MaxDelay != 90*time.Second || p.MaxRetries != 3 {
		t.Errorf("Policy() = %+v, want BaseDelay 45s, MaxDelay 90s, MaxRetries 3 (DEGRADED)", p)
	}
	// Throttled alone: half the share that was not rate-limited.
	if c := d.Recommendation.Concurrency; c != 0.45 {
		t.Errorf("Concurrency = %v, want 0.45", c)
	}
	if got := d.Recommendation.RateLimit().Overrides["a.example"]; got != 1.333 {
		t.Errorf("RateLimit().Overrides = %v, want 1.333 per minute", got)
	}
}

func TestDiagnoseDeterministic(t *testing.T) {
	rs := concat(repeat(10, okAt(ms)), repeat(3, throttled(time.Second)), repeat(4, timedOut()), repeat(2, refusedConn()))
	for i := range rs {
		rs[i].Latency += time.Duration(i) * ms
		rs[i].Host = []string{"a.example", "b.example", "c.example"}[i%3]
		rs[i].Egress = []string{"p1", "p2"}[i%2]
	}
	want := probe.Diagnose(rs, probe.Thresholds{})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		if got := probe.Diagnose(rs, probe.Thresholds{}); !reflect.DeepEqual(got, want) {
			t.Fatalf("Diagnose(shuffled) = %+v, want %+v", got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	seq := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * ms
		}
		return out
	}
	tests := []struct {
		n, p int
		want time.Duration
	}{
		{0, 50, 0},
		{0, 99, 0},
		{1, 50, ms},
		{1, 99, ms},
		{2, 50, ms},     // rank ceil(1.0) = 1
		{2, 51, 2 * ms}, // rank ceil(1.02) = 2
		{2, 95, 2 * ms},
		{10, 50, 5 * ms},
		{10, 95, 10 * ms}, // rank ceil(9.5) = 10
		{10, 99, 10 * ms},
		{20, 95, 19 * ms}, // rank 19 exactly: a tie at the boundary takes that rank
		{100, 50, 50 * ms},
		{100, 95, 95 * ms},
		{100, 99, 99 * ms},
		{101, 99, 100 * ms}, // rank ceil(99.99) = 100
		{5, 0, 0},
		{5, 100, 5 * ms},
		{5, 150, 5 * ms},
	}
	for _, tt := range tests {
		if got := probe.Percentile(seq(tt.n), tt.p); got != tt.want {
			t.Errorf("Percentile(1..%d ms, %d) = %v, want %v", tt.n, tt.p, got, tt.want)
		}
	}
}

// TestDiagnoseConsistency: CRITICAL exactly when Halt, and BlockingHosts
// only for hosts with blocked probes, on results across hosts.
func TestDiagnoseConsistency(t *testing.T) {
	on := func(host string, r probe.TargetResult) probe.TargetResult { r.Host = host; return r }
	tests := []struct {
		name         string
		results      []probe.TargetResult
		wantStatus   probe.Verdict
		wantBlocking []string
		wantBlocked  int
	}{
		{"a 429-only host among three", []probe.TargetResult{on("a.example", okAt(ms)), on("b.example", throttled(7*time.Second)), on("c.example", okAt(ms))},
			probe.Degraded, nil, 0},
		{"a 404-only host is not blocking", []probe.TargetResult{on("a.example", okAt(ms)), on("b.example", statusAt(404, classify.Permanent, ms)), on("c.example", okAt(ms))},
			probe.Degraded, nil, 0},
		{"a refusing host is blocking", []probe.TargetResult{on("a.example", okAt(ms)), on("b.example", statusAt(403, classify.Refused, ms)), on("c.example", okAt(ms))},
			probe.Degraded, []string{"b.example"}, 1},
		{"every host throttles", []probe.TargetResult{on("a.example", throttled(0)), on("b.example", throttled(0))},
			probe.Critical, nil, 0},
		{"a host that throttles and refuses", []probe.TargetResult{on("a.example", okAt(ms)), on("a.example", okAt(ms)), on("b.example", throttled(0)), on("b.example", refusedConn())},
			probe.Degraded, []string{"b.example"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := probe.Diagnose(tt.results, probe.Thresholds{})
			if d.Status != tt.wantStatus || (d.Status == probe.Critical) != d.Recommendation.Halt() {
				t.Errorf("Status %v, Halt() %v (reasons %q); want %v, Halt() exactly when CRITICAL", d.Status, d.Recommendation.Halt(), d.Reasons, tt.wantStatus)
			}
			if !reflect.DeepEqual(d.BlockingHosts, tt.wantBlocking) || d.Blocked != tt.wantBlocked {
				t.Errorf("BlockingHosts %v, Blocked %d; want %v, %d", d.BlockingHosts, d.Blocked, tt.wantBlocking, tt.wantBlocked)
			}
		})
	}
}

// A probe robots.txt disallowed was never sent: it is not measured and
// does not make its egress look failing.
func TestDiagnoseDisallowed(t *testing.T) {
	ok := okAt(ms)
	ok.Egress = "p1"
	dis := probe.TargetResult{Host: "b.example", Egress: "p2", Outcome: classify.Permanent, Disallowed: true, Err: "disallowed by robots.txt"}
	d := probe.Diagnose([]probe.TargetResult{ok, dis}, probe.Thresholds{})
	if d.Measured != 1 || d.Disallowed != 1 || d.Status != probe.Healthy || len(d.FailingEgresses) != 0 || len(d.BlockingHosts) != 0 {
		t.Errorf("Diagnose = Measured %d, Disallowed %d, Status %v, FailingEgresses %v, BlockingHosts %v; want 1, 1, HEALTHY, none, none",
			d.Measured, d.Disallowed, d.Status, d.FailingEgresses, d.BlockingHosts)
	}
	d = probe.Diagnose([]probe.TargetResult{dis}, probe.Thresholds{})
	if want := []string{"no probe was measured: 1 of 1 disallowed by robots.txt"}; d.Status != probe.Critical || !reflect.DeepEqual(d.Reasons, want) {
		t.Errorf("Diagnose(only disallowed) = %v %q, want CRITICAL %q", d.Status, d.Reasons, want)
	}
}

// TestDiagnoseNamesEveryClass: five targets — two healthy, one hung, one
// challenge page, one 429. The hang is a timeout, not a block; the
// reasons name the challenge, the hang and the throttling besides the
// success rate.
func TestDiagnoseNamesEveryClass(t *testing.T) {
	hung := timedOut()
	hung.Host, hung.Stage = "hung.example", probe.StageRequest
	challenge := probe.TargetResult{Host: "cf.example", Egress: "direct", Status: 403, Outcome: classify.Refused,
		Markers: []string{"cloudflare"}, Stage: probe.StageResponse, Latency: 5 * ms}
	slow := throttled(0)
	slow.Host = "busy.example"
	rs := []probe.TargetResult{okAt(3 * ms), okAt(4 * ms), hung, challenge, slow}
	d := probe.Diagnose(rs, probe.Thresholds{})
	if d.Blocked != 1 || d.Timeouts != 1 || d.RateLimited != 1 {
		t.Errorf("blocked %d, timeouts %d, rate-limited %d; want 1, 1, 1", d.Blocked, d.Timeouts, d.RateLimited)
	}
	if !reflect.DeepEqual(d.BlockingHosts, []string{"cf.example"}) {
		t.Errorf("BlockingHosts = %v, want only cf.example", d.BlockingHosts)
	}
	all := strings.Join(d.Reasons, "\n")
	for _, want := range []string{"success rate", "refused (a challenge page", "hung", "rate-limited"} {
		if !strings.Contains(all, want) {
			t.Errorf("Reasons do not name %q:\n%s", want, all)
		}
	}
}
