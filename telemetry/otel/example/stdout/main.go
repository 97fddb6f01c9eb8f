// Command stdout shows egresskit's OpenTelemetry spans: it starts a local
// server that answers 503 once and then 200, fetches one page through the
// chain wrapped by telemetry/otel, and prints the spans to standard output
// as JSON with OpenTelemetry's stdout exporter — one request span and its
// two attempt spans.
//
//	cd telemetry/otel && go run ./example/stdout
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/egresskit/egresskit/telemetry/otel"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stdout:", err)
		os.Exit(1)
	}
}

// run fetches one page that fails once and writes the spans to out.
func run(ctx context.Context, out io.Writer) error {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			io.WriteString(w, "User-agent: *\nAllow: /\n")
			return
		}
		if n.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	exp, err := stdouttrace.New(stdouttrace.WithWriter(out), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	ot, err := otel.New(otel.Config{TracerProvider: tp})
	if err != nil {
		return err
	}
	defer ot.Close()
	chain, err := egresskit.New(egresskit.Config{
		UserAgent: "ExampleBot/1.0 (+https://example.org/bot)",
		Retry:     retry.Policy{MaxRetries: 2, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second},
		Observers: []telemetry.Observer{ot},
	})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: ot.Transport(chain)}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/page?api_key=not-for-spans", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
