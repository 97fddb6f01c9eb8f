package otel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/egresskit/egresskit/telemetry/otel"
)

// A page that fails once: one request span, two attempt spans.
func Example() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" && n.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	ot, err := otel.New(otel.Config{TracerProvider: tp})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ot.Close()
	chain := mustChain(egresskit.Config{
		Retry:     retry.Policy{MaxRetries: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second},
		Observers: []telemetry.Observer{ot},
	})
	client := &http.Client{Transport: ot.Transport(chain)}
	resp, err := client.Get(srv.URL + "/page")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	for _, s := range spans.GetSpans() {
		a := attrs(s.Attributes)
		if s.Name == "egresskit.attempt" {
			fmt.Println(s.Name, a["egresskit.attempt"].AsInt64(), a["egresskit.outcome"].AsString(), a["http.response.status_code"].AsInt64())
		} else {
			fmt.Println(s.Name, a["egresskit.attempts"].AsInt64(), a["egresskit.outcome"].AsString(), a["http.response.status_code"].AsInt64())
		}
	}
	// Output:
	// egresskit.attempt 1 transient 503
	// egresskit.attempt 2 ok 200
	// egresskit.request 2 ok 200
}
