package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// span is the part of the stdout exporter's JSON that the test reads.
type span struct {
	Name        string
	SpanContext struct{ SpanID string }
	Parent      struct{ SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

func TestRunPrintsSpans(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var spans []span
	for {
		var s span
		err := dec.Decode(&s)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding the printed spans: %v", err)
		}
		spans = append(spans, s)
	}
	var req *span
	var attempts []span
	for i, s := range spans {
		switch s.Name {
		case "egresskit.request":
			req = &spans[i]
		case "egresskit.attempt":
			attempts = append(attempts, s)
		}
	}
	if req == nil || len(attempts) != 2 {
		t.Fatalf("printed %d spans: request %v, %d attempts; want one request and 2 attempts", len(spans), req != nil, len(attempts))
	}
	for i, a := range attempts {
		if a.Parent.SpanID != req.SpanContext.SpanID {
			t.Errorf("attempt %d has parent %s, want the request span %s", i+1, a.Parent.SpanID, req.SpanContext.SpanID)
		}
		outcome := ""
		for _, kv := range a.Attributes {
			if kv.Key == "egresskit.outcome" {
				outcome, _ = kv.Value.Value.(string)
			}
		}
		if want := []string{"transient", "ok"}[i]; outcome != want {
			t.Errorf("attempt %d outcome %q, want %q", i+1, outcome, want)
		}
	}
	if strings.Contains(out.String(), "not-for-spans") {
		t.Error("a secret query value reached the printed spans")
	}
}
