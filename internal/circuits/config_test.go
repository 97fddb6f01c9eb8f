package circuits_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/internal/circuits"
)

// TestNewRefusesInvalidConfig: a negative setting that cannot be off is
// refused by New with ErrInvalidConfig naming the field; a negative
// IdleTTL means never evict.
func TestNewRefusesInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   breaker.Config
	}{
		{"FailureThreshold", breaker.Config{FailureThreshold: -1}},
		{"OpenTimeout", breaker.Config{OpenTimeout: -time.Second}},
		{"HalfOpenProbes", breaker.Config{HalfOpenProbes: -2}},
	} {
		s, err := circuits.New(tc.cfg)
		if !errors.Is(err, egresskit.ErrInvalidConfig) || !strings.Contains(err.Error(), " "+tc.field+" ") || s != nil {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig naming %s", tc.cfg, s, err, tc.field)
		}
	}
	for _, cfg := range []breaker.Config{{}, {IdleTTL: -1}, {FailureThreshold: 1, OpenTimeout: time.Millisecond, HalfOpenProbes: 3}} {
		if _, err := circuits.New(cfg); err != nil {
			t.Errorf("New(%+v) = %v, want nil", cfg, err)
		}
	}
}
