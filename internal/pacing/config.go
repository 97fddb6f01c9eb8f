package pacing

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/ratelimit"
)

// minPerMinute bounds every rate from below (one request a day), so that no
// wait overflows and none is longer than a day.
const minPerMinute = 1.0 / (24 * 60)

func positive(f float64) bool { return f > 0 && !math.IsInf(f, 1) }

// check refuses negative, NaN and infinite settings. The error wraps
// egresskit.ErrInvalidConfig and names the field.
func check(c ratelimit.Config) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"PerMinute", c.PerMinute}, {"Floor", c.Floor}, {"RecoverStep", c.RecoverStep}} {
		if f.v < 0 || !configerr.Finite(f.v) {
			return configerr.Field(f.name, "is %v, not a finite number of requests per minute >= 0", f.v)
		}
	}
	switch {
	case c.Burst < 0:
		return configerr.Field("Burst", "is %d, negative (0 means 1)", c.Burst)
	case c.RecoverAfter < 0:
		return configerr.Field("RecoverAfter", "is %d, negative (0 means 10)", c.RecoverAfter)
	case c.MaxPause < 0:
		return configerr.Field("MaxPause", "is %v, negative (0 means 1h)", c.MaxPause)
	case c.Window < 0:
		return configerr.Field("Window", "is %v, negative (0 means 5m)", c.Window)
	}
	for _, host := range slices.Sorted(maps.Keys(c.Overrides)) {
		if pm := c.Overrides[host]; !(pm > 0) || !configerr.Finite(pm) {
			return configerr.Field(fmt.Sprintf("Overrides[%q]", host), "is %v, not a positive finite number of requests per minute", pm)
		}
	}
	return nil
}

func withDefaults(c ratelimit.Config) ratelimit.Config {
	if !positive(c.PerMinute) {
		c.PerMinute = 60
	}
	c.PerMinute = max(c.PerMinute, minPerMinute)
	if c.Burst <= 0 {
		c.Burst = 1
	}
	if !positive(c.Floor) {
		c.Floor = 1
	}
	c.Floor = max(c.Floor, minPerMinute)
	if c.RecoverAfter <= 0 {
		c.RecoverAfter = 10
	}
	if !positive(c.RecoverStep) {
		c.RecoverStep = 0
	}
	if c.MaxPause <= 0 {
		c.MaxPause = time.Hour
	}
	if c.Window <= 0 {
		c.Window = 5 * time.Minute
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = 10 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	overrides := make(map[string]float64, len(c.Overrides))
	for host, pm := range c.Overrides {
		if positive(pm) {
			overrides[host] = max(pm, minPerMinute)
		}
	}
	c.Overrides = overrides
	return c
}
