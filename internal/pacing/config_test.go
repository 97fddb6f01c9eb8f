package pacing_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
)

// TestNewRefusesInvalidConfig: every setting out of range is refused by
// New with ErrInvalidConfig naming the field; zero and in-range settings
// are taken.
func TestNewRefusesInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   ratelimit.Config
	}{
		{"PerMinute", ratelimit.Config{PerMinute: -1}},
		{"PerMinute", ratelimit.Config{PerMinute: math.NaN()}},
		{"PerMinute", ratelimit.Config{PerMinute: math.Inf(1)}},
		{"Floor", ratelimit.Config{Floor: math.Inf(1)}},
		{"Floor", ratelimit.Config{Floor: -0.5}},
		{"RecoverStep", ratelimit.Config{RecoverStep: -1}},
		{"Burst", ratelimit.Config{Burst: -3}},
		{"RecoverAfter", ratelimit.Config{RecoverAfter: -1}},
		{"MaxPause", ratelimit.Config{MaxPause: -time.Second}},
		{"Window", ratelimit.Config{Window: -time.Second}},
		{`Overrides["a.example"]`, ratelimit.Config{Overrides: map[string]float64{"a.example": 0}}},
		{`Overrides["b.example"]`, ratelimit.Config{Overrides: map[string]float64{"a.example": 5, "b.example": math.NaN()}}},
	} {
		s, err := pacing.New(tc.cfg)
		if !errors.Is(err, egresskit.ErrInvalidConfig) || !strings.Contains(err.Error(), " "+tc.field+" ") || s != nil {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig naming %s", tc.cfg, s, err, tc.field)
		}
	}
	for _, cfg := range []ratelimit.Config{{}, {PerMinute: 1e-9, Burst: 1, IdleTTL: -1, Overrides: map[string]float64{"a.example": 30}}} {
		if _, err := pacing.New(cfg); err != nil {
			t.Errorf("New(%+v) = %v, want nil", cfg, err)
		}
	}
}
