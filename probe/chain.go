package probe

import (
	"maps"

	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// Policy returns the retry policy for package retry: MaxRetries,
// BaseDelay, MaxDelay and AttemptTimeout, the rest at
// retry's defaults. MaxDelay is never below the largest Retry-After seen,
// so retry honours those waits rather than giving up on them.
func (b Backoff) Policy() retry.Policy {
	return retry.Policy{
		MaxRetries:     b.MaxRetries,
		BaseDelay:      b.BaseDelay,
		MaxDelay:       b.MaxDelay,
		AttemptTimeout: b.AttemptTimeout,
	}
}

// RateLimit returns the pacing settings for package ratelimit: its
// defaults, with HostPerMinute as per-host overrides.
func (r Recommendation) RateLimit() ratelimit.Config {
	return ratelimit.Config{Overrides: maps.Clone(r.HostPerMinute)}
}

// defaultPerMinute is package ratelimit's default rate per host.
func defaultPerMinute() float64 { return ratelimit.DefaultConfig().PerMinute }
