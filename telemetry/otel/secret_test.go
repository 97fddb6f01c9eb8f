package otel_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/egresskit/egresskit/telemetry/otel"
)

// TestCrawlLeaksNoSecretToOTel crawls with a secret in URL userinfo, in
// query values and fragments, in the Authorization and Cookie headers and
// in a proxy's password (a dead proxy, so that errors name it), through
// retries, a refusal and failures, and then looks for the secret in every
// span (names, attributes, events, status) and every metric data point.
func TestCrawlLeaksNoSecretToOTel(t *testing.T) {
	raw := make([]byte, 8)
	rand.Read(raw)
	secret := "Zq" + hex.EncodeToString(raw)
	forbidden := []string{
		secret,
		base64.StdEncoding.EncodeToString([]byte("crawler:" + secret)),
		base64.StdEncoding.EncodeToString([]byte("proxyuser:" + secret)),
	}

	var sawSecret, flaky atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), secret) && strings.Contains(r.URL.RawQuery, secret) {
			sawSecret.Add(1)
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/flaky") && flaky.Add(1) == 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case strings.HasPrefix(r.URL.Path, "/refuse"):
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html>OtelBot is not welcome here.</html>")
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()

	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	ot, err := otel.New(otel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Close()

	dead, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "dead", Proxy: "http://proxyuser:" + secret + "@" + deadAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	newChain := func(pool *egress.Pool) http.RoundTripper {
		cfg := egresskit.Config{
			UserAgent:    "OtelBot/1.0",
			IgnoreRobots: true,
			Retry:        retry.Policy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Deadline: 5 * time.Second},
			Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}}),
			Observers:    []telemetry.Observer{ot},
		}
		if pool != nil {
			cfg.Base, cfg.Egress = pool, pool
		}
		return ot.Transport(mustChain(cfg))
	}
	direct, viaDead := &http.Client{Transport: newChain(nil)}, &http.Client{Transport: newChain(dead)}

	withSecret := func(path string) string {
		u := strings.Replace(srv.URL, "http://", "http://crawler:"+secret+"@", 1)
		return u + path + "?token=" + secret + "&api_key=" + secret + "&page=1#access_token=" + secret
	}
	for _, c := range []struct {
		client *http.Client
		path   string
	}{{direct, "/ok"}, {direct, "/flaky"}, {direct, "/refuse"}, {direct, "/refuse/again"}, {viaDead, "/ok"}} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, withSecret(c.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Cookie", "session="+secret)
		resp, err := c.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	if sawSecret.Load() == 0 {
		t.Fatal("no request carried the secret to the target: the test proves nothing")
	}

	var texts []string
	stubs := spans.GetSpans()
	var errored int
	for _, s := range stubs {
		b, err := json.Marshal(struct {
			Name       string
			Attributes any
			Events     any
			Status     any
		}{s.Name, s.Attributes, s.Events, s.Status})
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b), fmt.Sprintf("%+v", s.Attributes))
		if len(s.Events) > 0 {
			errored++
		}
	}
	if len(stubs) < 10 || errored == 0 {
		t.Fatalf("%d spans, %d with error events: the crawl did not exercise the exporters", len(stubs), errored)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	texts = append(texts, fmt.Sprintf("%+v", rm))
	for _, text := range texts {
		for _, f := range forbidden {
			if strings.Contains(text, f) {
				t.Errorf("OpenTelemetry output leaks a secret (%q): %s", f, text)
			}
		}
	}
}
