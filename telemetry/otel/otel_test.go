package otel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/egresskit/egresskit/telemetry/otel"
)

// rig is a chain wired to OpenTelemetry's in-memory exporters.
type rig struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	state  hoststate.Store
	chain  *egresskit.Transport
	client *http.Client
	ot     *otel.Telemetry
}

func newRig(t *testing.T, watch ...string) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	mem := mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}})
	r.state = mem
	var chain *egresskit.Transport
	ot, err := otel.New(otel.Config{
		TracerProvider: tp,
		MeterProvider:  mp,
		BreakerCounts: func() map[string]int {
			n := mem.Counts()
			return map[string]int{"closed": n.Closed, "half-open": n.HalfOpen, "open": n.Open, "halted": n.Halted}
		},
		Watch:  watch,
		Status: func(ctx context.Context, host string) (hoststate.Status, error) { return chain.Status(ctx, host) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ot.Close() })
	chain = mustChain(egresskit.Config{
		UserAgent:    "OtelBot/1.0",
		IgnoreRobots: true,
		Retry:        retry.Policy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
		Store:        mem,
		Observers:    []telemetry.Observer{ot},
	})
	r.chain, r.ot = chain, ot
	r.client = &http.Client{Transport: ot.Transport(chain)}
	return r
}

func (r *rig) get(t *testing.T, u string) int {
	t.Helper()
	resp, err := r.client.Get(u)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func attrs(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func key(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	k, err := hostkey.Of(u, hostkey.ByHost)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRequestSpanWithAttemptSpans: a request that fails twice with 503 and
// then succeeds is one request span with three attempt spans as children,
// each with its attributes. An HTML page, which the chain judges as the
// caller reads it, ends its attempt span and the request span then.
func TestRequestSpanWithAttemptSpans(t *testing.T) {
	for _, page := range []struct{ contentType, body string }{
		{"text/plain", "ok"},
		{"text/html", "<html><body>ok</body></html>"},
	} {
		t.Run(page.contentType, func(t *testing.T) { testRequestSpan(t, page.contentType, page.body) })
	}
}

func testRequestSpan(t *testing.T, contentType, body string) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	r := newRig(t)
	resp, err := r.client.Get(srv.URL + "/page?api_key=s3cr3t-value")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	ended := len(r.spans.GetSpans()) // the spans ended before the body is read
	if got, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(got) != body {
		t.Fatalf("response %d %q, want 200 %q", resp.StatusCode, got, body)
	}
	resp.Body.Close()
	if want := map[string]int{"text/plain": 4, "text/html": 2}[contentType]; ended != want {
		t.Errorf("%d spans ended before the body was read, want %d", ended, want)
	}

	stubs := r.spans.GetSpans()
	var req *tracetest.SpanStub
	var attempts []tracetest.SpanStub
	for i := range stubs {
		switch stubs[i].Name {
		case "egresskit.request":
			if req != nil {
				t.Fatalf("two request spans")
			}
			req = &stubs[i]
		case "egresskit.attempt":
			attempts = append(attempts, stubs[i])
		default:
			t.Errorf("unexpected span %q", stubs[i].Name)
		}
	}
	if req == nil || len(attempts) != 3 {
		t.Fatalf("got request span %v and %d attempt spans, want one and 3", req != nil, len(attempts))
	}
	sort.Slice(attempts, func(i, j int) bool {
		return attrs(attempts[i].Attributes)["egresskit.attempt"].AsInt64() < attrs(attempts[j].Attributes)["egresskit.attempt"].AsInt64()
	})
	host := key(t, srv.URL)
	want := []struct {
		status  int64
		outcome string
		final   bool
		code    codes.Code
	}{
		{503, "transient", false, codes.Error},
		{503, "transient", false, codes.Error},
		{200, "ok", true, codes.Unset},
	}
	for i, w := range want {
		sp := attempts[i]
		a := attrs(sp.Attributes)
		if sp.Parent.SpanID() != req.SpanContext.SpanID() || sp.SpanContext.TraceID() != req.SpanContext.TraceID() {
			t.Errorf("attempt %d: parent %v trace %v, want the request span %v", i+1, sp.Parent.SpanID(), sp.SpanContext.TraceID(), req.SpanContext.SpanID())
		}
		checks := []struct {
			name      string
			got, want any
		}{
			{"egresskit.attempt", a["egresskit.attempt"].AsInt64(), int64(i + 1)},
			{"egresskit.retry", a["egresskit.retry"].AsInt64(), int64(i)},
			{"egresskit.outcome", a["egresskit.outcome"].AsString(), w.outcome},
			{"egresskit.host", a["egresskit.host"].AsString(), host},
			{"egresskit.final", a["egresskit.final"].AsBool(), w.final},
			{"egresskit.breaker", a["egresskit.breaker"].AsString(), "closed"},
			{"http.response.status_code", a["http.response.status_code"].AsInt64(), w.status},
			{"http.request.method", a["http.request.method"].AsString(), "GET"},
			{"status", sp.Status.Code, w.code},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("attempt %d %s = %v, want %v", i+1, c.name, c.got, c.want)
			}
		}
		for _, k := range []string{"egresskit.wait_seconds", "egresskit.egress.endpoint", "egresskit.egress.reason", "url.full"} {
			if _, ok := a[k]; !ok {
				t.Errorf("attempt %d lacks attribute %s", i+1, k)
			}
		}
		if u := a["url.full"].AsString(); strings.Contains(u, "s3cr3t") || !strings.Contains(u, "/page?api_key=") {
			t.Errorf("attempt %d url.full = %q, want the redacted URL", i+1, u)
		}
		if sp.StartTime.Before(req.StartTime) || sp.EndTime.After(req.EndTime) {
			t.Errorf("attempt %d [%v, %v] outside the request span [%v, %v]", i+1, sp.StartTime, sp.EndTime, req.StartTime, req.EndTime)
		}
	}
	ra := attrs(req.Attributes)
	if ra["egresskit.attempts"].AsInt64() != 3 || ra["egresskit.outcome"].AsString() != "ok" ||
		ra["http.response.status_code"].AsInt64() != 200 || ra["egresskit.host"].AsString() != host || req.Status.Code != codes.Unset {
		t.Errorf("request span attributes %v status %v, want 3 attempts, ok, 200, host %s", ra, req.Status, host)
	}

	m := collect(t, r.reader)
	checkSum(t, m, "egresskit.attempts", map[string]int64{"outcome=transient,egress_reason=none": 2, "outcome=ok,egress_reason=none": 1})
	checkSum(t, m, "egresskit.requests", map[string]int64{"outcome=ok,egress_reason=none": 1})
	checkSum(t, m, "egresskit.retries", map[string]int64{"": 2})
	checkHistCount(t, m, "egresskit.attempt.duration", map[string]uint64{"outcome=transient": 2, "outcome=ok": 1})
	checkHistCount(t, m, "egresskit.token.wait", map[string]uint64{"": 3})
	checkGauge(t, m, "egresskit.breaker.hosts", map[string]float64{"state=closed": 1, "state=half-open": 0, "state=open": 0, "state=halted": 0})
}

// TestHaltAndHostGauges: a refusal halts its host, which the halts counter,
// the breaker-state gauges and the watched host's state show; the pacing
// rate of a watched host is its current rate.
func TestHaltAndHostGauges(t *testing.T) {
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html>OtelBot is not welcome here.</html>")
	}))
	defer refused.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer ok.Close()
	rk, okk := key(t, refused.URL), key(t, ok.URL)
	r := newRig(t, rk, okk)
	r.get(t, refused.URL+"/a")
	r.get(t, ok.URL+"/a")
	if resp, err := r.client.Get(refused.URL + "/b"); err == nil { // halted: not sent
		resp.Body.Close()
	}

	m := collect(t, r.reader)
	checkSum(t, m, "egresskit.halts", map[string]int64{"": 1})
	// The request to the halted host was refused before sending: it is
	// no attempt, and counts by its reason.
	checkSum(t, m, "egresskit.attempts", map[string]int64{"outcome=refused,egress_reason=none": 1, "outcome=ok,egress_reason=none": 1})
	checkSum(t, m, "egresskit.unsent", map[string]int64{"reason=halted": 1})
	var refusedReq, refusedAttempt bool
	for _, sp := range r.spans.GetSpans() {
		a := attrs(sp.Attributes)
		if !strings.HasSuffix(a["url.full"].AsString(), "/b") {
			continue
		}
		switch sp.Name {
		case "egresskit.request":
			refusedReq = true
			if n := a["egresskit.attempts"].AsInt64(); n != 0 {
				t.Errorf("request refused unsent: egresskit.attempts = %d, want 0 sent", n)
			}
		case "egresskit.attempt":
			refusedAttempt = true
			if u := a["egresskit.unsent"].AsString(); u != "halted" || !sp.StartTime.Equal(sp.EndTime) {
				t.Errorf("attempt refused unsent: egresskit.unsent %q, span [%v, %v]; want halted, an instant", u, sp.StartTime, sp.EndTime)
			}
		}
	}
	if !refusedReq || !refusedAttempt {
		t.Errorf("spans of the request refused unsent: request %v, attempt %v; want both", refusedReq, refusedAttempt)
	}
	checkGauge(t, m, "egresskit.breaker.hosts", map[string]float64{"state=closed": 1, "state=half-open": 0, "state=open": 0, "state=halted": 1})
	checkGauge(t, m, "egresskit.host.breaker_state", map[string]float64{
		"host=" + rk + ",state=halted": 1, "host=" + rk + ",state=closed": 0, "host=" + rk + ",state=open": 0, "host=" + rk + ",state=half-open": 0,
		"host=" + okk + ",state=closed": 1, "host=" + okk + ",state=halted": 0, "host=" + okk + ",state=open": 0, "host=" + okk + ",state=half-open": 0,
	})
	st, err := r.chain.Status(context.Background(), okk)
	if err != nil {
		t.Fatal(err)
	}
	checkGauge(t, m, "egresskit.host.pacing_rate", map[string]float64{"host=" + okk: st.PerMinute, "host=" + rk: mustState(t, r, rk).PerMinute})
}

func mustState(t *testing.T, r *rig, host string) hoststate.Status {
	t.Helper()
	st, err := r.chain.Status(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// collect reads every metric, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// label renders an attribute set as "k=v,k=v" in the order given by its
// keys' first use in want (sorted otherwise).
func label(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	// outcome before egress_reason, host before state: the order the
	// tests write them in.
	sort.Slice(parts, func(i, j int) bool { return rank(parts[i]) < rank(parts[j]) })
	return strings.Join(parts, ",")
}

func rank(p string) int {
	for i, k := range []string{"outcome=", "egress_reason=", "host=", "state="} {
		if strings.HasPrefix(p, k) {
			return i
		}
	}
	return 99
}

func checkSum(t *testing.T, m map[string]metricdata.Aggregation, name string, want map[string]int64) {
	t.Helper()
	s, ok := m[name].(metricdata.Sum[int64])
	if !ok {
		t.Errorf("%s: %T, want an int64 sum", name, m[name])
		return
	}
	got := map[string]int64{}
	for _, dp := range s.DataPoints {
		got[label(dp.Attributes)] = dp.Value
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func checkHistCount(t *testing.T, m map[string]metricdata.Aggregation, name string, want map[string]uint64) {
	t.Helper()
	h, ok := m[name].(metricdata.Histogram[float64])
	if !ok {
		t.Errorf("%s: %T, want a float64 histogram", name, m[name])
		return
	}
	got := map[string]uint64{}
	for _, dp := range h.DataPoints {
		got[label(dp.Attributes)] = dp.Count
		if len(dp.Bounds) != len(otel.DefaultBuckets()) {
			t.Errorf("%s: %d bucket bounds, want %d", name, len(dp.Bounds), len(otel.DefaultBuckets()))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s counts = %v, want %v", name, got, want)
	}
}

func checkGauge(t *testing.T, m map[string]metricdata.Aggregation, name string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	switch g := m[name].(type) {
	case metricdata.Gauge[int64]:
		for _, dp := range g.DataPoints {
			got[label(dp.Attributes)] = float64(dp.Value)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range g.DataPoints {
			got[label(dp.Attributes)] = dp.Value
		}
	default:
		t.Errorf("%s: %T, want a gauge", name, m[name])
		return
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// TestEgressAndDNSMetrics: the endpoint gauges read a real egress pool;
// the DNS counters read the callback's counters.
func TestEgressAndDNSMetrics(t *testing.T) {
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "d1", Proxy: "direct"}, {ID: "d2", Proxy: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	ot, err := otel.New(otel.Config{
		MeterProvider: mp,
		Endpoints:     pool.Endpoints,
		DNS:           func() egress.DNSStats { return egress.DNSStats{Hits: 7, Misses: 2, Stale: 1, Queries: 3, Failures: 1} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Close()
	m := collect(t, reader)
	want := map[string]float64{}
	for _, ep := range pool.Endpoints() {
		want["endpoint="+ep.ID] = ep.Score
	}
	if len(want) != 2 {
		t.Fatalf("pool has %d endpoints, want 2", len(want))
	}
	checkGauge(t, m, "egresskit.egress.endpoint.score", want)
	checkGauge(t, m, "egresskit.egress.endpoint.quarantined", map[string]float64{"endpoint=d1": 0, "endpoint=d2": 0})
	checkSum(t, m, "egresskit.dns.lookups", map[string]int64{"result=hit": 7, "result=miss": 2, "result=stale": 1})
	checkSum(t, m, "egresskit.dns.queries", map[string]int64{"": 3})
	checkSum(t, m, "egresskit.dns.failures", map[string]int64{"": 1})
}

// idleCounter is an http.Transport that counts CloseIdleConnections calls.
type idleCounter struct {
	*http.Transport
	closed atomic.Int32
}

func (c *idleCounter) CloseIdleConnections() {
	c.closed.Add(1)
	c.Transport.CloseIdleConnections()
}

// TestTransportClosesIdleConnections: a client's CloseIdleConnections
// reaches through the request-span wrapper and the chain to the transport
// that holds the connections.
func TestTransportClosesIdleConnections(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	base := &idleCounter{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	ot, err := otel.New(otel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Close()
	client := &http.Client{Transport: ot.Transport(mustChain(egresskit.Config{Base: base, IgnoreRobots: true}))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if n := base.closed.Load(); n != 1 {
		t.Errorf("base transport's CloseIdleConnections called %d times, want 1", n)
	}
}
