package prometheus_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/telemetry"
	egressprom "github.com/egresskit/egresskit/telemetry/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func fullConfig() egressprom.Config {
	return egressprom.Config{
		BreakerCounts: func() map[string]int {
			return map[string]int{"closed": 90, "half-open": 3, "open": 5, "halted": 2}
		},
		Watch:        []string{"a.example", "b.example", "a.example"},
		BreakerState: func(h string) string { return map[string]string{"a.example": "open"}[h] },
		PacingRate:   func(h string) float64 { return map[string]float64{"a.example": 30, "b.example": 60}[h] },
		Endpoints: func() []egress.EndpointStatus {
			return []egress.EndpointStatus{{ID: "p1", Score: 0.9}, {ID: "p2", Score: 0.1, Quarantined: true}}
		},
		DNS: func() egress.DNSStats {
			return egress.DNSStats{Hits: 998, Misses: 2, Stale: 1, Queries: 3, Failures: 0}
		},
	}
}

func TestDNSCounters(t *testing.T) {
	c := egressprom.New(fullConfig())
	want := `
# HELP egresskit_dns_failures_total Lookups of the egress DNS cache that failed with no stale answer.
# TYPE egresskit_dns_failures_total counter
egresskit_dns_failures_total 0
# HELP egresskit_dns_queries_total DNS queries sent by the egress DNS cache.
# TYPE egresskit_dns_queries_total counter
egresskit_dns_queries_total 3
# HELP egresskit_dns_resolutions_total Target names resolved by the egress DNS cache, by result: hit, miss (a query was awaited) or stale.
# TYPE egresskit_dns_resolutions_total counter
egresskit_dns_resolutions_total{result="hit"} 998
egresskit_dns_resolutions_total{result="miss"} 2
egresskit_dns_resolutions_total{result="stale"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"egresskit_dns_failures_total", "egresskit_dns_queries_total", "egresskit_dns_resolutions_total"); err != nil {
		t.Error(err)
	}
}

func feed(c telemetry.Observer) {
	ctx := context.Background()
	events := []telemetry.Event{
		{Host: "x.example", Attempt: 1, Final: true, Outcome: classify.OK, Status: 200, EgressReason: "affinity", Duration: 20 * time.Millisecond},
		{Host: "x.example", Attempt: 1, Outcome: classify.Transient, Status: 503, EgressReason: "affinity", Duration: 30 * time.Millisecond, Wait: 100 * time.Millisecond},
		{Host: "x.example", Attempt: 2, Retries: 1, Outcome: classify.Throttled, Status: 429, EgressReason: "affinity", Duration: 10 * time.Millisecond},
		{Host: "x.example", Attempt: 3, Retries: 2, Final: true, Outcome: classify.OK, Status: 200, EgressReason: "fallback", Duration: 40 * time.Millisecond},
		{Host: "y.example", Attempt: 1, Final: true, Outcome: classify.Refused, Status: 403, Duration: time.Second, Breaker: "halted"},
		{Host: "y.example", Attempt: 1, Final: true, Outcome: classify.Permanent, Breaker: "halted", Unsent: "halted"},
		{Host: "y.example", Attempt: 1, Final: true, Outcome: classify.Canceled, Unsent: "canceled", Wait: time.Second},
	}
	for i := range events {
		c.Observe(ctx, &events[i])
	}
}

func TestCollectAndLint(t *testing.T) {
	c := egressprom.New(fullConfig())
	feed(c)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCounts(t *testing.T) {
	c := egressprom.New(fullConfig())
	feed(c)
	want := `
# HELP egresskit_attempts_total Attempts sent (round trips) by outcome and egress reason; attempts the chain refused before sending are in unsent_total.
# TYPE egresskit_attempts_total counter
egresskit_attempts_total{egress_reason="affinity",outcome="ok"} 1
egresskit_attempts_total{egress_reason="affinity",outcome="throttled"} 1
egresskit_attempts_total{egress_reason="affinity",outcome="transient"} 1
egresskit_attempts_total{egress_reason="fallback",outcome="ok"} 1
egresskit_attempts_total{egress_reason="none",outcome="refused"} 1
# HELP egresskit_unsent_total Requests the chain refused before sending their attempt, by reason: halted, open, disallowed, out_of_scope, deadline, canceled, error.
# TYPE egresskit_unsent_total counter
egresskit_unsent_total{reason="canceled"} 1
egresskit_unsent_total{reason="halted"} 1
# HELP egresskit_requests_total Requests whose final attempt was sent, by its outcome and egress reason.
# TYPE egresskit_requests_total counter
egresskit_requests_total{egress_reason="affinity",outcome="ok"} 1
egresskit_requests_total{egress_reason="fallback",outcome="ok"} 1
egresskit_requests_total{egress_reason="none",outcome="refused"} 1
# HELP egresskit_retries_total Attempts sent that retried an earlier attempt of the same request.
# TYPE egresskit_retries_total counter
egresskit_retries_total 2
# HELP egresskit_halts_total Attempts whose result halted their host.
# TYPE egresskit_halts_total counter
egresskit_halts_total 1
# HELP egresskit_breaker_hosts Hosts in each circuit-breaker state.
# TYPE egresskit_breaker_hosts gauge
egresskit_breaker_hosts{state="closed"} 90
egresskit_breaker_hosts{state="half-open"} 3
egresskit_breaker_hosts{state="halted"} 2
egresskit_breaker_hosts{state="open"} 5
# HELP egresskit_host_breaker_state Breaker state of each watched host: 1 for its current state, 0 for the others.
# TYPE egresskit_host_breaker_state gauge
egresskit_host_breaker_state{host="a.example",state="closed"} 0
egresskit_host_breaker_state{host="a.example",state="half-open"} 0
egresskit_host_breaker_state{host="a.example",state="halted"} 0
egresskit_host_breaker_state{host="a.example",state="open"} 1
# HELP egresskit_host_pacing_rate_per_minute Current pacing rate of each watched host, in requests per minute.
# TYPE egresskit_host_pacing_rate_per_minute gauge
egresskit_host_pacing_rate_per_minute{host="a.example"} 30
egresskit_host_pacing_rate_per_minute{host="b.example"} 60
# HELP egresskit_egress_endpoint_score Health score of each egress endpoint.
# TYPE egresskit_egress_endpoint_score gauge
egresskit_egress_endpoint_score{endpoint="p1"} 0.9
egresskit_egress_endpoint_score{endpoint="p2"} 0.1
# HELP egresskit_egress_endpoint_quarantined 1 while an egress endpoint is quarantined, else 0.
# TYPE egresskit_egress_endpoint_quarantined gauge
egresskit_egress_endpoint_quarantined{endpoint="p1"} 0
egresskit_egress_endpoint_quarantined{endpoint="p2"} 1
`
	names := []string{"egresskit_attempts_total", "egresskit_unsent_total", "egresskit_requests_total", "egresskit_retries_total", "egresskit_halts_total",
		"egresskit_breaker_hosts", "egresskit_host_breaker_state", "egresskit_host_pacing_rate_per_minute", "egresskit_egress_endpoint_score",
		"egresskit_egress_endpoint_quarantined"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Five attempts were sent (the unsent ones were not): five latency
	// observations and five waits.
	if n := histCount(t, c, "egresskit_attempt_duration_seconds"); n != 5 {
		t.Errorf("attempt_duration_seconds count = %d, want 5", n)
	}
	if n := histCount(t, c, "egresskit_token_wait_seconds"); n != 5 {
		t.Errorf("token_wait_seconds count = %d, want 5", n)
	}
}

// histCount sums the sample counts of a histogram family.
func histCount(t *testing.T, c prom.Collector, name string) uint64 {
	t.Helper()
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			n += h.GetSampleCount()
			if h.GetSampleCount() > 0 && len(h.GetPositiveSpan()) == 0 && h.GetZeroCount() == 0 {
				t.Errorf("%s: no native histogram data", name)
			}
		}
	}
	return n
}

func TestWatchFromEvents(t *testing.T) {
	c := egressprom.New(egressprom.Config{Watch: []string{"w.example"}})
	ctx := context.Background()
	c.Observe(ctx, &telemetry.Event{Host: "w.example", Breaker: "half-open"})
	c.Observe(ctx, &telemetry.Event{Host: "unwatched.example", Breaker: "open"})
	want := `
# HELP egresskit_host_breaker_state Breaker state of each watched host: 1 for its current state, 0 for the others.
# TYPE egresskit_host_breaker_state gauge
egresskit_host_breaker_state{host="w.example",state="closed"} 0
egresskit_host_breaker_state{host="w.example",state="half-open"} 1
egresskit_host_breaker_state{host="w.example",state="halted"} 0
egresskit_host_breaker_state{host="w.example",state="open"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "egresskit_host_breaker_state"); err != nil {
		t.Error(err)
	}
}

func TestNoHostCardinalityByDefault(t *testing.T) {
	c := egressprom.New(egressprom.Config{MaxReasons: 2})
	for i := range 1000 {
		c.Observe(context.Background(), &telemetry.Event{
			Host: "h" + string(rune('a'+i%26)) + ".example", Attempt: 1, Final: true,
			EgressReason: "r" + string(rune('a'+i%26)), Duration: time.Millisecond,
		})
	}
	// attempts + requests: 1 outcome x 3 reason values (2 + "other").
	if n := testutil.CollectAndCount(c, "egresskit_attempts_total", "egresskit_requests_total"); n != 6 {
		t.Errorf("series = %d, want 6", n)
	}
	if n := testutil.CollectAndCount(c, "egresskit_host_breaker_state"); n != 0 {
		t.Errorf("host series without a watch list = %d, want 0", n)
	}
}

func TestPanickingCallbackIsRecovered(t *testing.T) {
	c := egressprom.New(egressprom.Config{
		BreakerCounts: func() map[string]int { panic("store down") },
		Endpoints:     func() []egress.EndpointStatus { return []egress.EndpointStatus{{ID: "p1", Score: 1}} },
	})
	if n := testutil.CollectAndCount(c, "egresskit_egress_endpoint_score"); n != 1 {
		t.Errorf("endpoint series = %d, want 1", n)
	}
	if v := testutil.ToFloat64(counterOnly{c, "egresskit_collector_callback_panics_total"}); v < 1 {
		t.Errorf("callback panics = %v, want >= 1", v)
	}
}

// counterOnly narrows a collector to one metric family for ToFloat64.
type counterOnly struct {
	c    prom.Collector
	name string
}

func (o counterOnly) Describe(ch chan<- *prom.Desc) { prom.DescribeByCollect(o, ch) }
func (o counterOnly) Collect(ch chan<- prom.Metric) {
	all := make(chan prom.Metric)
	go func() { o.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+o.name+`"`) {
			ch <- m
		}
	}
}

// countingTransport stands in for the chain: one event per round trip.
type countingTransport struct {
	obs telemetry.Observer
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(req)
	e := &telemetry.Event{Time: start, Host: req.URL.Host, Method: req.Method, URL: (telemetry.Redactor{}).RedactURL(req.URL),
		Attempt: 1, Final: true, EgressReason: "direct", Duration: time.Since(start)}
	switch {
	case err != nil:
		e.Outcome, e.Err = classify.Transient, (telemetry.Redactor{}).RedactError(err)
	case resp.StatusCode >= 500:
		e.Outcome, e.Status = classify.Transient, resp.StatusCode
	default:
		e.Outcome, e.Status = classify.OK, resp.StatusCode
	}
	t.obs.Observe(req.Context(), e)
	return resp, err
}

// TestScrapeAfterCrawl crawls a local server, scrapes /metrics over HTTP
// and checks the counts against the server's own.
func TestScrapeAfterCrawl(t *testing.T) {
	var served, failed atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%4 == 0 {
			failed.Add(1)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer target.Close()

	c := egressprom.New(egressprom.Config{})
	reg := prom.NewRegistry()
	reg.MustRegister(c)
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer metrics.Close()

	client := &http.Client{Transport: countingTransport{obs: c}}
	for i := range 40 {
		resp, err := client.Get(target.URL + "/page?token=secret&n=" + string(rune('a'+i%26)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	resp, err := http.Get(metrics.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`egresskit_attempts_total{egress_reason="direct",outcome="ok"} ` + strconv.FormatInt(served.Load()-failed.Load(), 10),
		`egresskit_attempts_total{egress_reason="direct",outcome="transient"} ` + strconv.FormatInt(failed.Load(), 10),
		`egresskit_requests_total{egress_reason="direct",outcome="ok"} ` + strconv.FormatInt(served.Load()-failed.Load(), 10),
		`egresskit_attempt_duration_seconds_count{outcome="ok"} ` + strconv.FormatInt(served.Load()-failed.Load(), 10),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(text, "secret") {
		t.Errorf("scrape contains a secret")
	}
}

func BenchmarkObserve(b *testing.B) {
	c := egressprom.New(egressprom.Config{})
	e := &telemetry.Event{Host: "x.example", Attempt: 1, Final: true, Outcome: classify.OK, EgressReason: "affinity", Duration: 20 * time.Millisecond}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.Observe(ctx, e)
	}
}
