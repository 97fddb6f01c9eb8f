package egresskit

import (
	"math"
	"testing"
	"time"
)

// TestSlotSlack: an attempt may go out half a pacing interval late, and at
// least minSlack late; without a positive rate, any lateness is fine.
func TestSlotSlack(t *testing.T) {
	for _, tt := range []struct {
		perMinute float64
		want      time.Duration
	}{
		{60, 500 * time.Millisecond},
		{1, 30 * time.Second},
		{1500, minSlack}, // half an interval is exactly 20ms
		{6000, minSlack}, // half an interval is 5ms
		{0, math.MaxInt64},
		{-1, math.MaxInt64},
		{math.NaN(), math.MaxInt64},
	} {
		if got := slotSlack(tt.perMinute); got != tt.want {
			t.Errorf("slotSlack(%v) = %v, want %v", tt.perMinute, got, tt.want)
		}
	}
}
