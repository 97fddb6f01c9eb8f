package ratelimit

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/egresskit/egresskit/internal/configerr"
)

// Config configures a Set. The zero value uses every default.
type Config struct {
	// PerMinute is the configured rate of every host without an override,
	// in requests per minute. Zero: 60. Negative, NaN or infinite: refused by
	// New (pacing cannot be off; raise the rate instead).
	PerMinute float64
	// Burst is how many requests a host may receive back to back after it
	// has been idle; a host never contacted gets one request first.
	// Zero: 1. Negative: refused by New.
	Burst int
	// Floor is the lowest rate halvings reach, in requests per minute. It
	// never exceeds a host's configured rate; a ceiling below it wins.
	// Zero: 1. Negative, NaN or infinite: refused by New.
	Floor float64
	// RecoverAfter is the length, in OK outcomes, of the climb back to the
	// rate a quota or a removed ceiling left (concave, fast at first), and
	// of the first step of a probe above a learnt ceiling.
	// Zero: 10. Negative: refused by New.
	RecoverAfter int
	// RecoverStep is how much faster than the settled rate a probe is
	// after its first RecoverAfter OKs, in requests per minute; it grows
	// with the cube of the OKs since (2, 3 RecoverAfter: 8, 27 times).
	// Zero: a tenth of the settled rate. Negative, NaN or infinite:
	// refused by New.
	RecoverStep float64
	// MaxPause caps the pause a Retry-After may impose. Zero: 1h.
	// Negative: refused by New.
	MaxPause time.Duration
	// Window is the span of the recent outcome counts Status reports.
	// Zero: 5 minutes. Negative: refused by New.
	Window time.Duration
	// Overrides sets the configured rate of individual hosts (by host key),
	// in requests per minute. A value that is not a positive finite number
	// is refused by New. The map is copied by New.
	Overrides map[string]float64
	// IdleTTL is how long a host's state is kept after its last use; a
	// paused host is kept until its pause ends. Default (0): 10 minutes;
	// negative: never evict.
	IdleTTL time.Duration
	// Now is the clock. Default (nil): time.Now.
	Now func() time.Time
}

// DefaultConfig returns the Config with every default filled in (except
// RecoverStep, which depends on the host, and Overrides).
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

// minPerMinute bounds every rate from below (one request a day), so that no
// wait overflows and none is longer than a day.
const minPerMinute = 1.0 / (24 * 60)

func positive(f float64) bool { return f > 0 && !math.IsInf(f, 1) }

// check refuses negative, NaN and infinite settings. The error wraps
// egresskit.ErrInvalidConfig and names the field.
func (c Config) check() error {
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

func (c Config) withDefaults() Config {
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
