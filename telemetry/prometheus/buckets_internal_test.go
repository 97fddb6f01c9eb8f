package prometheus

import (
	"slices"
	"testing"
)

// TestDefaultBuckets pins the classic buckets a zero Config.Buckets gives,
// which dashboards' quantiles are read from.
func TestDefaultBuckets(t *testing.T) {
	want := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	if got := New(Config{}).cfg.Buckets; !slices.Equal(got, want) {
		t.Errorf("default buckets = %v, want %v", got, want)
	}
}
