package ratelimit

import (
	"time"
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
	return Config{PerMinute: 60, Burst: 1, Floor: 1, RecoverAfter: 10, MaxPause: time.Hour,
		Window: 5 * time.Minute, IdleTTL: 10 * time.Minute, Now: time.Now, Overrides: map[string]float64{}}
}
