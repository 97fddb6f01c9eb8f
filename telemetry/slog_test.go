package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

func sampleEvent() *telemetry.Event {
	return &telemetry.Event{
		Time:         time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Host:         "example.com",
		Method:       "GET",
		URL:          "https://example.com/a?token=REDACTED",
		Attempt:      2,
		Retries:      1,
		Final:        true,
		Status:       503,
		Outcome:      classify.Transient,
		Markers:      []string{"m1", "m2"},
		Egress:       "proxy-1",
		EgressReason: "affinity",
		Breaker:      "closed",
		Wait:         250 * time.Millisecond,
		Duration:     1500 * time.Millisecond,
		Err:          "status 503",
	}
}

func TestSlogAttributes(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	telemetry.NewSlog(l, telemetry.SlogOptions{}).Observe(context.Background(), sampleEvent())
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	want := map[string]any{
		"time": "2026-01-02T03:04:05Z", "level": "WARN", "msg": "egress attempt",
		"host": "example.com", "method": "GET", "url": "https://example.com/a?token=REDACTED",
		"attempt": 2.0, "retries": 1.0, "final": true, "status": 503.0, "outcome": "transient",
		"markers": "m1,m2", "egress": "proxy-1", "egress_reason": "affinity", "breaker": "closed",
		"wait": 250e6, "duration": 1500e6, "error": "status 503",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("record has %d attributes, want %d: %v", len(got), len(want), got)
	}
}

func TestSlogAttributeOrder(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	telemetry.NewSlog(l, telemetry.SlogOptions{}).Observe(context.Background(), sampleEvent())
	order := []string{"host=", "method=", "url=", "attempt=", "retries=", "final=", "status=", "outcome=",
		"markers=", "egress=", "egress_reason=", "breaker=", "wait=", "duration=", "error="}
	line, last := buf.String(), -1
	for _, k := range order {
		i := strings.Index(line, " "+k)
		if i <= last {
			t.Errorf("attribute %q at %d, after %d: %s", k, i, last, line)
		}
		last = i
	}
}

// TestSlogConditionalAttributes pins the two attributes written only when
// set: egress_rule and unsent, after the others.
func TestSlogConditionalAttributes(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := sampleEvent()
	e.EgressRule, e.Unsent = "eu-only", "open"
	telemetry.NewSlog(l, telemetry.SlogOptions{}).Observe(context.Background(), e)
	if line := buf.String(); !strings.HasSuffix(line, ` error="status 503" egress_rule=eu-only unsent=open`+"\n") {
		t.Errorf("record = %q, want it to end with egress_rule and unsent", line)
	}
}

func TestSlogLevels(t *testing.T) {
	tests := []struct {
		o    classify.Outcome
		want slog.Level
	}{
		{classify.OK, slog.LevelDebug},
		{classify.Canceled, slog.LevelDebug},
		{classify.Permanent, slog.LevelInfo},
		{classify.Transient, slog.LevelWarn},
		{classify.Throttled, slog.LevelWarn},
		{classify.Refused, slog.LevelError},
		{classify.Outcome(99), slog.LevelWarn},
	}
	for _, tt := range tests {
		if got := telemetry.DefaultLevel(tt.o); got != tt.want {
			t.Errorf("DefaultLevel(%v) = %v, want %v", tt.o, got, tt.want)
		}
		var buf bytes.Buffer
		l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		e := sampleEvent()
		e.Outcome = tt.o
		telemetry.NewSlog(l, telemetry.SlogOptions{}).Observe(context.Background(), e)
		if !strings.Contains(buf.String(), `"level":"`+tt.want.String()+`"`) {
			t.Errorf("Observe(%v) logged %q, want level %v", tt.o, buf.String(), tt.want)
		}
	}
}

func TestSlogRespectsHandlerLevel(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil)) // Info
	s := telemetry.NewSlog(l, telemetry.SlogOptions{})
	e := sampleEvent()
	e.Outcome = classify.OK
	s.Observe(context.Background(), e)
	if buf.Len() != 0 {
		t.Errorf("OK event logged at Info handler: %q", buf.String())
	}
	telemetry.NewSlog(nil, telemetry.SlogOptions{}).Observe(context.Background(), e)
}

func TestSlogSampleOK(t *testing.T) {
	tests := []struct {
		sample float64
		want   int
	}{
		{0, 100}, {1, 100}, {2, 100}, {0.1, 10}, {0.5, 50}, {0.25, 25}, {-1, 0},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s := telemetry.NewSlog(l, telemetry.SlogOptions{SampleOK: tt.sample})
		e := sampleEvent()
		e.Outcome = classify.OK
		for range 100 {
			s.Observe(context.Background(), e)
		}
		e.Outcome = classify.Refused
		s.Observe(context.Background(), e) // never sampled
		if got := strings.Count(buf.String(), "\n"); got != tt.want+1 {
			t.Errorf("SampleOK %v: %d lines for 100 OK + 1 Refused, want %d", tt.sample, got, tt.want+1)
		}
	}
}

func TestSlogCustomLevel(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	s := telemetry.NewSlog(l, telemetry.SlogOptions{Level: func(classify.Outcome) slog.Level { return slog.LevelError }})
	e := sampleEvent()
	e.Outcome = classify.OK
	s.Observe(context.Background(), e)
	if !strings.Contains(buf.String(), `"level":"ERROR"`) {
		t.Errorf("custom level not applied: %q", buf.String())
	}
}
