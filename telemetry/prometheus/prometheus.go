// Package prometheus exports egresskit's telemetry as Prometheus metrics.
//
// A Collector is both a telemetry.Observer, counting every attempt event
// the chain emits, and a prometheus.Collector, reading breaker and egress
// state through callbacks when it is scraped. Register it and add it to the
// chain's observers:
//
//	c := prometheus.New(prometheus.Config{BreakerCounts: ..., Endpoints: ...})
//	registry.MustRegister(c)
//	// egresskit.Config{Observers: []telemetry.Observer{c, ...}}
//
// Cardinality is bounded by design: no metric has a label per crawled host
// except the breaker state of the hosts on the operator's watch list, and
// the egress reason label keeps at most MaxReasons distinct values.
//
// The package lives in its own module so that importing egresskit does not
// import the Prometheus client.
package prometheus

import (
	"context"
	"sync"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/telemetry"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Breaker states as reported by Config.BreakerCounts and Config.BreakerState.
const (
	stateClosed   = "closed"
	stateHalfOpen = "half-open"
	stateOpen     = "open"
	stateHalted   = "halted"
)

// states lists the breaker states every state metric exports, in order.
var states = [...]string{stateClosed, stateHalfOpen, stateOpen, stateHalted}

// defaultBuckets are the classic latency buckets, in seconds.
func defaultBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// Config configures New. The zero value counts events and exports no
// callback metrics.
type Config struct {
	// Namespace prefixes every metric name; "" means "egresskit".
	Namespace string
	// Buckets are the classic buckets of the latency and wait histograms,
	// in seconds; nil means 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
	// 2.5, 5, 10, 30 and 60.
	Buckets []float64
	// NativeBucketFactor is the growth factor of the native (sparse)
	// histograms kept alongside the classic buckets; zero means 1.1, a
	// value of 1 or less disables native histograms.
	NativeBucketFactor float64
	// MaxReasons bounds the distinct values of the egress_reason label;
	// later new values are counted as "other". Zero means 32.
	MaxReasons int
	// BreakerCounts returns how many hosts are in each breaker state
	// (keys "closed", "half-open", "open" and "halted", the words of
	// breaker.State's String and of a halted host; missing keys count 0). It is called on every scrape, without locks held,
	// and should be fast. Nil omits egresskit_breaker_hosts.
	BreakerCounts func() map[string]int
	// Watch lists the hosts whose own breaker state is exported
	// (egresskit_host_breaker_state, one series per state and host). Nil
	// exports none: never one series per crawled host by default.
	Watch []string
	// BreakerState returns a watched host's breaker state, one of the
	// words of BreakerCounts' keys; it is called on every scrape for each
	// watched host. Nil means the state seen in the
	// host's latest event ("" until the first, exported as no series).
	BreakerState func(host string) string
	// PacingRate returns a watched host's current pacing rate, in
	// requests per minute (hoststate.Status.PerMinute); it is called on
	// every scrape for each watched host. Nil omits
	// egresskit_host_pacing_rate_per_minute.
	PacingRate func(host string) float64
	// Endpoints returns the egress endpoints' status, e.g.
	// egress.Pool.Endpoints; it is called on every scrape. Nil omits the
	// egress endpoint metrics.
	Endpoints func() []egress.EndpointStatus
	// DNS returns the egress pool's DNS cache counters, e.g. from
	// egress.Pool.DNSStats; it is called on every scrape. Nil omits
	// egresskit_dns_resolutions_total, egresskit_dns_queries_total and
	// egresskit_dns_failures_total.
	DNS func() egress.DNSStats
}

// Collector counts telemetry events and exports them, with breaker and
// egress state, to Prometheus. It is safe for concurrent use.
type Collector struct {
	cfg Config

	attempts  *prom.CounterVec
	unsent    *prom.CounterVec
	requests  *prom.CounterVec
	retries   prom.Counter
	halts     prom.Counter
	latency   *prom.HistogramVec
	wait      prom.Histogram
	scrapeErr prom.Counter

	breakerHosts  *prom.Desc
	hostState     *prom.Desc
	hostPacing    *prom.Desc
	endpointScore *prom.Desc
	endpointQuar  *prom.Desc
	dnsResolved   *prom.Desc
	dnsQueries    *prom.Desc
	dnsFailures   *prom.Desc

	mu      sync.Mutex          // guards reasons and lastState
	reasons map[string]struct{} // egress_reason values admitted so far
	// lastState is the latest Breaker of each watched host (only watched
	// hosts are keys).
	lastState map[string]string
}

var (
	_ telemetry.Observer = (*Collector)(nil)
	_ prom.Collector     = (*Collector)(nil)
)

// New returns a Collector. Register it with a prom.Registerer and add it
// to the chain's observers.
func New(cfg Config) *Collector {
	if cfg.Namespace == "" {
		cfg.Namespace = "egresskit"
	}
	if cfg.Buckets == nil {
		cfg.Buckets = defaultBuckets()
	}
	if cfg.NativeBucketFactor == 0 {
		cfg.NativeBucketFactor = 1.1
	}
	if cfg.NativeBucketFactor <= 1 {
		cfg.NativeBucketFactor = 0
	}
	if cfg.MaxReasons <= 0 {
		cfg.MaxReasons = 32
	}
	ns := cfg.Namespace
	hist := func(name, help string) prom.HistogramOpts {
		o := prom.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: cfg.Buckets}
		if cfg.NativeBucketFactor > 0 {
			o.NativeHistogramBucketFactor = cfg.NativeBucketFactor
			o.NativeHistogramMaxBucketNumber = 160
			o.NativeHistogramMinResetDuration = time.Hour
		}
		return o
	}
	c := &Collector{
		cfg: cfg,
		attempts: prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "attempts_total",
			Help: "Attempts sent (round trips) by outcome and egress reason; attempts the chain refused before sending are in unsent_total."}, []string{"outcome", "egress_reason"}),
		unsent: prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "unsent_total",
			Help: "Requests the chain refused before sending their attempt, by reason: halted, open, disallowed, out_of_scope, deadline, canceled, error."}, []string{"reason"}),
		requests: prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Requests whose final attempt was sent, by its outcome and egress reason."}, []string{"outcome", "egress_reason"}),
		retries: prom.NewCounter(prom.CounterOpts{Namespace: ns, Name: "retries_total",
			Help: "Attempts sent that retried an earlier attempt of the same request."}),
		halts: prom.NewCounter(prom.CounterOpts{Namespace: ns, Name: "halts_total",
			Help: "Attempts whose result halted their host."}),
		latency: prom.NewHistogramVec(hist("attempt_duration_seconds",
			"Duration of attempts, excluding pacing waits, by outcome."), []string{"outcome"}),
		wait: prom.NewHistogram(hist("token_wait_seconds",
			"Time attempts sent waited for a per-host pacing token.")),
		scrapeErr: prom.NewCounter(prom.CounterOpts{Namespace: ns, Name: "collector_callback_panics_total",
			Help: "Panics recovered from state callbacks during scrapes."}),
		breakerHosts: prom.NewDesc(prom.BuildFQName(ns, "", "breaker_hosts"),
			"Hosts in each circuit-breaker state.", []string{"state"}, nil),
		hostState: prom.NewDesc(prom.BuildFQName(ns, "", "host_breaker_state"),
			"Breaker state of each watched host: 1 for its current state, 0 for the others.", []string{"host", "state"}, nil),
		hostPacing: prom.NewDesc(prom.BuildFQName(ns, "", "host_pacing_rate_per_minute"),
			"Current pacing rate of each watched host, in requests per minute.", []string{"host"}, nil),
		endpointScore: prom.NewDesc(prom.BuildFQName(ns, "", "egress_endpoint_score"),
			"Health score of each egress endpoint.", []string{"endpoint"}, nil),
		endpointQuar: prom.NewDesc(prom.BuildFQName(ns, "", "egress_endpoint_quarantined"),
			"1 while an egress endpoint is quarantined, else 0.", []string{"endpoint"}, nil),
		dnsResolved: prom.NewDesc(prom.BuildFQName(ns, "dns", "resolutions_total"),
			"Target names resolved by the egress DNS cache, by result: hit, miss (a query was awaited) or stale.", []string{"result"}, nil),
		dnsQueries: prom.NewDesc(prom.BuildFQName(ns, "dns", "queries_total"),
			"DNS queries sent by the egress DNS cache.", nil, nil),
		dnsFailures: prom.NewDesc(prom.BuildFQName(ns, "dns", "failures_total"),
			"Lookups of the egress DNS cache that failed with no stale answer.", nil, nil),
		reasons:   make(map[string]struct{}),
		lastState: make(map[string]string, len(cfg.Watch)),
	}
	for _, h := range cfg.Watch {
		c.lastState[h] = ""
	}
	return c
}

// Observe counts one attempt event. An attempt sent (Unsent "") counts in
// attempts by outcome and egress reason, in requests likewise when it is
// final, in retries when it is not the first, in halts when its result
// halted the host, and in the duration and pacing-wait histograms. An
// attempt the chain did not send counts only in unsent, by its reason
// (Event.Unsent): it made no round trip.
func (c *Collector) Observe(_ context.Context, e *telemetry.Event) {
	reason := c.reason(e.EgressReason, e.Host, e.Breaker)
	if e.Unsent != "" {
		c.unsent.WithLabelValues(unsentLabel(e.Unsent)).Inc()
		return
	}
	outcome := e.Outcome.String()
	c.attempts.WithLabelValues(outcome, reason).Inc()
	if e.Final {
		c.requests.WithLabelValues(outcome, reason).Inc()
	}
	if e.Attempt > 1 {
		c.retries.Inc()
	}
	c.latency.WithLabelValues(outcome).Observe(e.Duration.Seconds())
	if e.Breaker == stateHalted { // its result halted the host
		c.halts.Inc()
	}
	c.wait.Observe(e.Wait.Seconds())
}

// unsentLabel bounds the reason label to the values Event.Unsent
// documents; any other counts as "error".
func unsentLabel(r string) string {
	switch r {
	case "halted", "open", "disallowed", "out_of_scope", "deadline", "canceled":
		return r
	}
	return "error"
}

// reason maps an egress reason to its label value, admitting at most
// MaxReasons distinct values, and notes a watched host's breaker state.
func (c *Collector) reason(r, host, breaker string) string {
	if r == "" {
		r = "none"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, watched := c.lastState[host]; watched && breaker != "" {
		c.lastState[host] = breaker
	}
	if _, ok := c.reasons[r]; ok {
		return r
	}
	if len(c.reasons) >= c.cfg.MaxReasons {
		return "other"
	}
	c.reasons[r] = struct{}{}
	return r
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prom.Desc) {
	c.attempts.Describe(ch)
	c.unsent.Describe(ch)
	c.requests.Describe(ch)
	c.retries.Describe(ch)
	c.halts.Describe(ch)
	c.latency.Describe(ch)
	c.wait.Describe(ch)
	c.scrapeErr.Describe(ch)
	ch <- c.breakerHosts
	ch <- c.hostState
	ch <- c.hostPacing
	ch <- c.endpointScore
	ch <- c.endpointQuar
	ch <- c.dnsResolved
	ch <- c.dnsQueries
	ch <- c.dnsFailures
}

// Collect sends the current value of every metric, calling the state
// callbacks. A panicking callback is recovered, counted in
// egresskit_collector_callback_panics_total, and its metrics are left out.
func (c *Collector) Collect(ch chan<- prom.Metric) {
	c.attempts.Collect(ch)
	c.unsent.Collect(ch)
	c.requests.Collect(ch)
	c.retries.Collect(ch)
	c.halts.Collect(ch)
	c.latency.Collect(ch)
	c.wait.Collect(ch)
	c.guard(func() { c.collectBreakers(ch) })
	c.guard(func() { c.collectWatched(ch) })
	c.guard(func() { c.collectPacing(ch) })
	c.guard(func() { c.collectEndpoints(ch) })
	c.guard(func() { c.collectDNS(ch) })
	c.scrapeErr.Collect(ch)
}

func (c *Collector) guard(f func()) {
	defer func() {
		if recover() != nil {
			c.scrapeErr.Inc()
		}
	}()
	f()
}

func (c *Collector) collectBreakers(ch chan<- prom.Metric) {
	if c.cfg.BreakerCounts == nil {
		return
	}
	counts := c.cfg.BreakerCounts()
	for _, s := range states {
		ch <- prom.MustNewConstMetric(c.breakerHosts, prom.GaugeValue, float64(counts[s]), s)
	}
}

func (c *Collector) collectWatched(ch chan<- prom.Metric) {
	if len(c.cfg.Watch) == 0 {
		return
	}
	current := make(map[string]string, len(c.cfg.Watch))
	if c.cfg.BreakerState == nil {
		c.mu.Lock()
		for h, s := range c.lastState {
			current[h] = s
		}
		c.mu.Unlock()
	} else {
		for _, h := range c.cfg.Watch {
			current[h] = c.cfg.BreakerState(h)
		}
	}
	for _, h := range c.cfg.Watch {
		cur, ok := current[h]
		if !ok || cur == "" {
			continue
		}
		delete(current, h) // a host listed twice is exported once
		for _, s := range states {
			v := 0.0
			if s == cur {
				v = 1
			}
			ch <- prom.MustNewConstMetric(c.hostState, prom.GaugeValue, v, h, s)
		}
	}
}

func (c *Collector) collectPacing(ch chan<- prom.Metric) {
	if c.cfg.PacingRate == nil {
		return
	}
	seen := map[string]bool{}
	for _, h := range c.cfg.Watch {
		if seen[h] {
			continue
		}
		seen[h] = true
		ch <- prom.MustNewConstMetric(c.hostPacing, prom.GaugeValue, c.cfg.PacingRate(h), h)
	}
}

func (c *Collector) collectEndpoints(ch chan<- prom.Metric) {
	if c.cfg.Endpoints == nil {
		return
	}
	seen := make(map[string]bool)
	for _, ep := range c.cfg.Endpoints() {
		if seen[ep.ID] {
			continue
		}
		seen[ep.ID] = true
		q := 0.0
		if ep.Quarantined {
			q = 1
		}
		ch <- prom.MustNewConstMetric(c.endpointScore, prom.GaugeValue, ep.Score, ep.ID)
		ch <- prom.MustNewConstMetric(c.endpointQuar, prom.GaugeValue, q, ep.ID)
	}
}

func (c *Collector) collectDNS(ch chan<- prom.Metric) {
	if c.cfg.DNS == nil {
		return
	}
	d := c.cfg.DNS()
	ch <- prom.MustNewConstMetric(c.dnsResolved, prom.CounterValue, float64(d.Hits), "hit")
	ch <- prom.MustNewConstMetric(c.dnsResolved, prom.CounterValue, float64(d.Misses), "miss")
	ch <- prom.MustNewConstMetric(c.dnsResolved, prom.CounterValue, float64(d.Stale), "stale")
	ch <- prom.MustNewConstMetric(c.dnsQueries, prom.CounterValue, float64(d.Queries))
	ch <- prom.MustNewConstMetric(c.dnsFailures, prom.CounterValue, float64(d.Failures))
}
