package pacing

import (
	"fmt"
	"maps"
	"math"
	"slices"

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
	d := ratelimit.DefaultConfig()
	if !positive(c.PerMinute) {
		c.PerMinute = d.PerMinute
	}
	c.PerMinute = max(c.PerMinute, minPerMinute)
	if c.Burst <= 0 {
		c.Burst = d.Burst
	}
	if !positive(c.Floor) {
		c.Floor = d.Floor
	}
	c.Floor = max(c.Floor, minPerMinute)
	if c.RecoverAfter <= 0 {
		c.RecoverAfter = d.RecoverAfter
	}
	if !positive(c.RecoverStep) {
		c.RecoverStep = 0
	}
	if c.MaxPause <= 0 {
		c.MaxPause = d.MaxPause
	}
	if c.Window <= 0 {
		c.Window = d.Window
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = d.IdleTTL
	}
	if c.Now == nil {
		c.Now = d.Now
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
