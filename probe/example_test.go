package probe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/probe"
)

// Probe two URLs of a site that rate-limits one of them, then configure a
// retry policy and pacing from the diagnosis.
func ExampleRun() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	rep, err := probe.Run(context.Background(), []probe.Target{
		{URL: srv.URL + "/"},
		{URL: srv.URL + "/busy"},
	}, probe.Options{Deadline: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Status, rep.SuccessRate, rep.RateLimited)
	for _, why := range rep.Reasons {
		fmt.Println(" -", why)
	}

	// From probe to configured chain: a retry policy and per-host pacing.
	policy := rep.Backoff.Policy()
	limits := rep.Recommendation.RateLimit()
	fmt.Println(policy.BaseDelay, policy.MaxDelay, policy.MaxRetries)
	fmt.Println(len(limits.Overrides), rep.Recommendation.Concurrency)
	// Output:
	// DEGRADED 0.5 1
	//  - 1 of 2 probes were rate-limited (degraded at 1)
	//  - success rate 0.5 is below 0.9
	// 7s 30s 3
	// 1 0.25
}

// The diagnosis marshals to a stable "diagnosis" object, plus fields of
// its own.
func ExampleDiagnose() {
	results := []probe.TargetResult{
		{Host: "a.example", Egress: "direct", Status: 200, Outcome: classify.OK, Latency: 120 * time.Millisecond},
		{Host: "a.example", Egress: "direct", Status: 200, Outcome: classify.OK, Latency: 80 * time.Millisecond},
		{Host: "b.example", Egress: "direct", Status: 403, Outcome: classify.Refused, Markers: []string{"cloudflare"}, Latency: 40 * time.Millisecond},
	}
	d := probe.Diagnose(results, probe.Thresholds{})
	b, _ := json.Marshal(d)
	var seed struct {
		Status             string  `json:"status"`
		SuccessRate        float64 `json:"success_rate"`
		AverageLatencyMS   float64 `json:"average_latency_ms"`
		RateLimitedCount   int     `json:"rate_limited_count"`
		BlockedCount       int     `json:"blocked_count"`
		RecommendedBackoff struct {
			InitialDelaySec float64 `json:"initial_delay_sec"`
			MaxDelaySec     float64 `json:"max_delay_sec"`
			MaxRetries      int     `json:"max_retries"`
		} `json:"recommended_backoff"`
	}
	json.Unmarshal(b, &seed)
	fmt.Printf("%+v\n", seed)
	fmt.Println(d.Latency.P50, d.Latency.P99, d.Recommendation.HaltHosts)
	// Output:
	// {Status:DEGRADED SuccessRate:0.6667 AverageLatencyMS:80 RateLimitedCount:0 BlockedCount:1 RecommendedBackoff:{InitialDelaySec:2 MaxDelaySec:30 MaxRetries:3}}
	// 80ms 120ms [b.example]
}
