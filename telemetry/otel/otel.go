package otel

import (
	"context"
	"errors"
	"fmt"
	"sync"

	otelglobal "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/telemetry"
)

// ScopeName is the instrumentation scope of the tracer and the meter, by
// which an operator selects egresskit's spans and instruments (views,
// sampling, filters).
const ScopeName = "github.com/egresskit/egresskit/telemetry/otel"

// Breaker states, as the breaker-state metrics and span attributes spell
// them; the same words as the Prometheus collector's.
const (
	stateClosed   = "closed"
	stateHalfOpen = "half-open"
	stateOpen     = "open"
	stateHalted   = "halted"
)

var states = [...]string{stateClosed, stateHalfOpen, stateOpen, stateHalted}

// defaultBuckets are the explicit bucket bounds of the duration
// histograms, in seconds: those of the Prometheus collector.
func defaultBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// Config configures New. The zero value uses the global providers, the
// built-in redaction rules and exports no callback metrics.
type Config struct {
	// TracerProvider makes the tracer. Nil means the global provider
	// (go.opentelemetry.io/otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Nil means the global provider.
	MeterProvider metric.MeterProvider
	// Redactor redacts the request span's URL (attempt events arrive
	// redacted by the chain). The zero value applies the built-in rules;
	// give the chain's Redactor when it has extra rules.
	Redactor telemetry.Redactor
	// Buckets are the bounds of the duration histograms, in seconds. Nil
	// means those of the Prometheus collector: 0.005, 0.01, 0.025, 0.05,
	// 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 and 60.
	Buckets []float64
	// MaxReasons bounds the distinct values of the egress_reason
	// attribute; later new values are counted as "other". Zero means 32.
	MaxReasons int
	// BreakerCounts returns how many hosts are in each breaker state (keys
	// "closed", "half-open", "open" and "halted", the words of
	// breaker.State's String and of a halted host; missing keys count 0). It is called at each collection. Nil omits
	// egresskit.breaker.hosts.
	BreakerCounts func() map[string]int
	// Watch lists the hosts (host keys) whose breaker state and pacing
	// rate are exported. Nil exports none: never one series per crawled
	// host by default.
	Watch []string
	// Status returns a watched host's status at each collection; the
	// method value of (*egresskit.Transport).Status fits. Nil omits the
	// per-host metrics.
	Status func(ctx context.Context, host string) (hoststate.Status, error)
	// Endpoints returns the egress endpoints at each collection; the
	// method value of (*egress.Pool).Endpoints fits. Nil omits the
	// endpoint score and quarantine gauges.
	Endpoints func() []egress.EndpointStatus
	// DNS returns the egress DNS cache's counters at each collection; the
	// method value of (*egress.Pool).DNSStats fits. Nil omits the DNS
	// counters.
	DNS func() egress.DNSStats
}

// Telemetry turns the chain's attempt events into spans and metrics. It is
// a telemetry.Observer and safe for concurrent use.
type Telemetry struct {
	cfg    Config
	tracer trace.Tracer

	attempts, unsent, requests, retries, halts metric.Int64Counter
	latency, wait                              metric.Float64Histogram
	reg                                        metric.Registration

	mu      sync.Mutex          // guards reasons and cache
	reasons map[string]struct{} // egress_reason values admitted so far
	cache   map[setKey]attrSets // bounded: outcomes × (MaxReasons+1)

	unsentSets map[string]attribute.Set // by Event.Unsent; built by New, read-only
}

var _ telemetry.Observer = (*Telemetry)(nil)

// New returns a Telemetry with its instruments created. It returns an
// error when the meter refuses an instrument or a callback.
func New(cfg Config) (*Telemetry, error) {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otelglobal.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otelglobal.GetMeterProvider()
	}
	if cfg.Buckets == nil {
		cfg.Buckets = defaultBuckets()
	}
	if cfg.MaxReasons <= 0 {
		cfg.MaxReasons = 32
	}
	t := &Telemetry{
		cfg:     cfg,
		tracer:  cfg.TracerProvider.Tracer(ScopeName),
		reasons: map[string]struct{}{},
		cache:   map[setKey]attrSets{},
	}
	m := cfg.MeterProvider.Meter(ScopeName)
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("1"))
		errs = append(errs, err)
		return c
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(cfg.Buckets...))
		errs = append(errs, err)
		return h
	}
	t.attempts = counter("egresskit.attempts", "Attempts sent (round trips) by outcome and egress reason; attempts the chain refused before sending are in egresskit.unsent.")
	t.unsent = counter("egresskit.unsent", "Requests the chain refused before sending their attempt, by reason: halted, open, disallowed, out_of_scope, deadline, canceled, error.")
	t.requests = counter("egresskit.requests", "Requests whose final attempt was sent, by its outcome and egress reason.")
	t.retries = counter("egresskit.retries", "Attempts sent that retried an earlier attempt of the same request.")
	t.halts = counter("egresskit.halts", "Attempts whose result halted their host.")
	t.latency = hist("egresskit.attempt.duration", "Duration of attempts sent, excluding pacing waits, by outcome.")
	t.wait = hist("egresskit.token.wait", "Time attempts sent waited for a per-host pacing token.")
	t.unsentSets = map[string]attribute.Set{}
	for _, r := range unsentReasons {
		t.unsentSets[r] = attribute.NewSet(attribute.String("reason", r))
	}

	var observables []metric.Observable
	var breakerHosts, hostState metric.Int64ObservableGauge
	var pacing metric.Float64ObservableGauge
	if cfg.BreakerCounts != nil {
		g, err := m.Int64ObservableGauge("egresskit.breaker.hosts", metric.WithDescription("Hosts in each circuit-breaker state."))
		errs = append(errs, err)
		breakerHosts = g
		observables = append(observables, g)
	}
	if cfg.Status != nil && len(cfg.Watch) > 0 {
		g, err := m.Int64ObservableGauge("egresskit.host.breaker_state",
			metric.WithDescription("Breaker state of each watched host: 1 for its current state, 0 for the others."))
		errs = append(errs, err)
		hostState = g
		p, err := m.Float64ObservableGauge("egresskit.host.pacing_rate",
			metric.WithDescription("Current pacing rate of each watched host."), metric.WithUnit("{request}/min"))
		errs = append(errs, err)
		pacing = p
		observables = append(observables, g, p)
	}
	var epScore, epQuar metric.Float64ObservableGauge
	if cfg.Endpoints != nil {
		s, err := m.Float64ObservableGauge("egresskit.egress.endpoint.score", metric.WithDescription("Health score of each egress endpoint."))
		errs = append(errs, err)
		q, err := m.Float64ObservableGauge("egresskit.egress.endpoint.quarantined", metric.WithDescription("1 while an egress endpoint is quarantined, else 0."))
		errs = append(errs, err)
		epScore, epQuar = s, q
		observables = append(observables, s, q)
	}
	var dnsLookups, dnsQueries, dnsFailures metric.Int64ObservableCounter
	if cfg.DNS != nil {
		l, err := m.Int64ObservableCounter("egresskit.dns.lookups",
			metric.WithDescription("Target names resolved by the egress DNS cache, by result: hit, miss (a query was awaited) or stale."))
		errs = append(errs, err)
		q, err := m.Int64ObservableCounter("egresskit.dns.queries", metric.WithDescription("DNS queries sent by the egress DNS cache."))
		errs = append(errs, err)
		f, err := m.Int64ObservableCounter("egresskit.dns.failures", metric.WithDescription("Lookups of the egress DNS cache that failed with no stale answer."))
		errs = append(errs, err)
		dnsLookups, dnsQueries, dnsFailures = l, q, f
		observables = append(observables, l, q, f)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otel: creating instruments: %w", err)
	}
	if len(observables) > 0 {
		reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
			if breakerHosts != nil {
				t.observeBreakers(o, breakerHosts)
			}
			if hostState != nil {
				t.observeHosts(ctx, o, hostState, pacing)
			}
			if epScore != nil {
				t.observeEndpoints(o, epScore, epQuar)
			}
			if dnsLookups != nil {
				t.observeDNS(o, dnsLookups, dnsQueries, dnsFailures)
			}
			return nil
		}, observables...)
		if err != nil {
			return nil, fmt.Errorf("otel: registering callbacks: %w", err)
		}
		t.reg = reg
	}
	return t, nil
}

// Close unregisters the metric callbacks. Spans and counters need no
// closing; the providers are the caller's to shut down.
func (t *Telemetry) Close() error {
	if t.reg == nil {
		return nil
	}
	return t.reg.Unregister()
}

// Observe turns one attempt event into an attempt span, a child of the
// span in ctx (the request span when the chain is wrapped by Transport),
// and counts it.
func (t *Telemetry) Observe(ctx context.Context, e *telemetry.Event) {
	t.span(ctx, e)
	t.count(ctx, e)
}

func (t *Telemetry) span(ctx context.Context, e *telemetry.Event) {
	outcome := e.Outcome.String()
	attrs := []attribute.KeyValue{
		attribute.Int("egresskit.attempt", e.Attempt),
		attribute.Int("egresskit.retry", e.Retries),
		attribute.String("egresskit.outcome", outcome),
		attribute.String("egresskit.host", e.Host),
		attribute.String("egresskit.egress.endpoint", e.Egress),
		attribute.String("egresskit.egress.reason", e.EgressReason),
		attribute.String("egresskit.breaker", e.Breaker),
		attribute.String("egresskit.unsent", e.Unsent),
		attribute.Float64("egresskit.wait_seconds", e.Wait.Seconds()),
		attribute.Bool("egresskit.final", e.Final),
		attribute.String("http.request.method", e.Method),
		attribute.String("url.full", e.URL),
	}
	if e.Status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", e.Status))
	}
	if len(e.Markers) > 0 {
		attrs = append(attrs, attribute.StringSlice("egresskit.markers", e.Markers))
	}
	// A sent attempt's span covers its pacing wait and its round trip:
	// Time is when it was sent. An unsent one's starts when the chain
	// began handling it.
	start, end := e.Time, e.Time.Add(e.Duration)
	if e.Unsent == "" {
		start = e.Time.Add(-e.Wait)
	}
	_, sp := t.tracer.Start(ctx, "egresskit.attempt",
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if e.Err != "" {
		sp.RecordError(errors.New(e.Err), trace.WithTimestamp(end))
		sp.SetStatus(codes.Error, e.Err)
	} else if e.Outcome != classify.OK {
		sp.SetStatus(codes.Error, outcome)
	}
	sp.End(trace.WithTimestamp(end))
	if rs, ok := ctx.Value(requestKey{}).(*requestState); ok {
		rs.attempted(e)
	}
}

// count counts an attempt sent in attempts, requests (when final),
// retries, halts and the duration and wait histograms, and one the chain
// did not send only in unsent, by its reason: it made no round trip.
func (t *Telemetry) count(ctx context.Context, e *telemetry.Event) {
	if e.Unsent != "" {
		set, ok := t.unsentSets[e.Unsent]
		if !ok {
			set = t.unsentSets["error"]
		}
		t.unsent.Add(ctx, 1, metric.WithAttributeSet(set))
		return
	}
	sets := t.sets(e.Outcome, e.EgressReason)
	set := metric.WithAttributeSet(sets.both)
	t.attempts.Add(ctx, 1, set)
	if e.Final {
		t.requests.Add(ctx, 1, set)
	}
	if e.Attempt > 1 {
		t.retries.Add(ctx, 1)
	}
	t.latency.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(sets.outcome))
	if e.Breaker == stateHalted { // its result halted the host
		t.halts.Add(ctx, 1)
	}
	t.wait.Record(ctx, e.Wait.Seconds())
}

// unsentReasons are the values of Event.Unsent, the reason attribute of
// egresskit.unsent; any other counts as "error".
var unsentReasons = [...]string{"halted", "open", "disallowed", "out_of_scope", "deadline", "canceled", "error"}

// attrSets are the attribute sets of the metrics of one outcome and
// egress reason, built once.
type attrSets struct {
	both    attribute.Set // outcome, egress_reason
	outcome attribute.Set // outcome
}

type setKey struct {
	outcome classify.Outcome
	reason  string
}

// sets returns the attribute sets for an outcome and an egress reason,
// admitting at most MaxReasons distinct reasons (later ones count as
// "other").
func (t *Telemetry) sets(o classify.Outcome, r string) attrSets {
	if r == "" {
		r = "none"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.reasons[r]; !ok {
		if len(t.reasons) >= t.cfg.MaxReasons {
			r = "other"
		} else {
			t.reasons[r] = struct{}{}
		}
	}
	k := setKey{o, r}
	if s, ok := t.cache[k]; ok {
		return s
	}
	outcome := attribute.String("outcome", o.String())
	s := attrSets{
		both:    attribute.NewSet(outcome, attribute.String("egress_reason", r)),
		outcome: attribute.NewSet(outcome),
	}
	t.cache[k] = s
	return s
}

func (t *Telemetry) observeBreakers(o metric.Observer, g metric.Int64ObservableGauge) {
	defer func() { _ = recover() }() // a panicking callback loses its metric, not the collection
	counts := t.cfg.BreakerCounts()
	for _, s := range states {
		o.ObserveInt64(g, int64(counts[s]), metric.WithAttributes(attribute.String("state", s)))
	}
}

func (t *Telemetry) observeHosts(ctx context.Context, o metric.Observer, g metric.Int64ObservableGauge, p metric.Float64ObservableGauge) {
	seen := map[string]bool{}
	for _, h := range t.cfg.Watch {
		if seen[h] {
			continue
		}
		seen[h] = true
		st, err := t.state(ctx, h)
		if err != nil {
			continue
		}
		cur := st.Breaker.String()
		if st.Halted {
			cur = stateHalted
		}
		host := attribute.String("host", h)
		for _, s := range states {
			v := int64(0)
			if s == cur {
				v = 1
			}
			o.ObserveInt64(g, v, metric.WithAttributes(host, attribute.String("state", s)))
		}
		o.ObserveFloat64(p, st.PerMinute, metric.WithAttributes(host))
	}
}

func (t *Telemetry) observeEndpoints(o metric.Observer, score, quar metric.Float64ObservableGauge) {
	defer func() { _ = recover() }() // a panicking callback loses its metric, not the collection
	seen := map[string]bool{}
	for _, ep := range t.cfg.Endpoints() {
		if seen[ep.ID] {
			continue
		}
		seen[ep.ID] = true
		id := metric.WithAttributes(attribute.String("endpoint", ep.ID))
		q := 0.0
		if ep.Quarantined {
			q = 1
		}
		o.ObserveFloat64(score, ep.Score, id)
		o.ObserveFloat64(quar, q, id)
	}
}

func (t *Telemetry) observeDNS(o metric.Observer, lookups, queries, failures metric.Int64ObservableCounter) {
	defer func() { _ = recover() }()
	d := t.cfg.DNS()
	for _, r := range []struct {
		result string
		n      uint64
	}{{"hit", d.Hits}, {"miss", d.Misses}, {"stale", d.Stale}} {
		o.ObserveInt64(lookups, int64(r.n), metric.WithAttributes(attribute.String("result", r.result)))
	}
	o.ObserveInt64(queries, int64(d.Queries))
	o.ObserveInt64(failures, int64(d.Failures))
}

func (t *Telemetry) state(ctx context.Context, host string) (st hoststate.Status, err error) {
	defer func() {
		if recover() != nil {
			err = errors.New("otel: State panicked")
		}
	}()
	return t.cfg.Status(ctx, host)
}
