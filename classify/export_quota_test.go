package classify

import (
	"net/http"
	"time"
)

// For the external tests: the quota and its bounds, unexported.
var (
	MaxRetryAfter          = maxRetryAfter
	SecondaryRateLimitWait = secondaryRateLimitWait
)

// ParseQuota is parseQuota at the time now.
func ParseQuota(h http.Header, now time.Time) float64 {
	return parseQuota(h, func() time.Time { return now })
}
