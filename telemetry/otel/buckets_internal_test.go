package otel

import (
	"slices"
	"testing"
)

// TestDefaultBuckets pins the histogram bounds a zero Config.Buckets gives:
// those of the Prometheus collector.
func TestDefaultBuckets(t *testing.T) {
	want := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	if got := defaultBuckets(); !slices.Equal(got, want) {
		t.Errorf("defaultBuckets() = %v, want %v", got, want)
	}
}
