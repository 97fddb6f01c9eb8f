package otel_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/egresskit/egresskit/telemetry/otel"
)

// TestAttemptSpanTimes: Event.Time is when an attempt was sent, after its
// pacing wait, so a sent attempt's span starts Wait before it and ends
// Duration after it; an unsent attempt's starts at Time.
func TestAttemptSpanTimes(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	ot, err := otel.New(otel.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Close()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		e          telemetry.Event
		start, end time.Time
	}{
		{telemetry.Event{Time: at, Wait: 2 * time.Second, Duration: 300 * time.Millisecond, Outcome: classify.OK},
			at.Add(-2 * time.Second), at.Add(300 * time.Millisecond)},
		{telemetry.Event{Time: at, Wait: time.Minute, Outcome: classify.Permanent, Unsent: "deadline"},
			at, at},
	} {
		spans.Reset()
		ot.Observe(context.Background(), &tc.e)
		got := spans.GetSpans()
		if len(got) != 1 {
			t.Fatalf("%d spans, want 1", len(got))
		}
		if sp := got[0]; !sp.StartTime.Equal(tc.start) || !sp.EndTime.Equal(tc.end) {
			t.Errorf("event %+v: span [%v, %v], want [%v, %v]", tc.e, sp.StartTime, sp.EndTime, tc.start, tc.end)
		}
	}
}
