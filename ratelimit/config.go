package ratelimit

import (
	"math"
	"time"
)

// Config configures a Set. The zero value uses every default.
type Config struct {
	// PerMinute is the configured rate of every host without an override,
	// in requests per minute. Default (not a positive finite number): 60.
	PerMinute float64
	// Burst is how many requests a host may receive back to back after it
	// has been idle. Default (<= 0): 1.
	Burst int
	// Floor is the lowest rate halvings reach, in requests per minute. It
	// never exceeds a host's configured rate; a ceiling below it wins.
	// Default (not a positive finite number): 1.
	Floor float64
	// RecoverAfter is the length, in OK outcomes, of the phases of the
	// recovery after a throttle: the climb back to the target rate, half
	// the first plateau there, and the first step of probing above it.
	// Default (<= 0): 10.
	RecoverAfter int
	// RecoverStep is how much faster than the target rate the probe is
	// after its first RecoverAfter OKs, in requests per minute; it grows
	// with the cube of the OKs since (2, 3 RecoverAfter: 8, 27 times).
	// Default (not a positive finite number): a tenth of the target rate.
	RecoverStep float64
	// MaxPause caps the pause a Retry-After may impose. Default (<= 0): 1h.
	MaxPause time.Duration
	// Window is the span of the recent outcome counts Status reports.
	// Default (<= 0): 5 minutes.
	Window time.Duration
	// Overrides sets the configured rate of individual hosts (by host key),
	// in requests per minute. Values that are not positive finite numbers
	// are ignored. The map is copied by New.
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
