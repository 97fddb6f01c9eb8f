package otel_test

import (
	"context"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/egresskit/egresskit/telemetry/otel"
)

// BenchmarkObserve measures one attempt event turned into a span and
// counted, with the SDK (spans to a no-op exporter, metrics to a manual
// reader) and with the no-op providers, whose difference is the SDK's
// share.
func BenchmarkObserve(b *testing.B) {
	e := &telemetry.Event{Time: time.Now(), Host: "a.example", Method: "GET", URL: "https://a.example/p",
		Attempt: 2, Retries: 1, Final: true, Status: 200, Outcome: classify.OK, Egress: "p1", EgressReason: "affinity",
		Breaker: "closed", Wait: time.Millisecond, Duration: 20 * time.Millisecond}
	for _, c := range []struct {
		name string
		cfg  func() otel.Config
	}{
		{"sdk", func() otel.Config {
			return otel.Config{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter())),
				MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
			}
		}},
		{"noop", func() otel.Config {
			return otel.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ot, err := otel.New(c.cfg())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ot.Observe(ctx, e)
			}
		})
	}
}
