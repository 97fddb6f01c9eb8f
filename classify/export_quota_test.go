package classify

import (
	"context"
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

// For the external tests: the classifying transport and the hooks the
// chain reaches through internal/settle, under their former names.
type (
	Classifier = classifier
	Transport  = transport
)

var (
	New                = newClassifier
	NewTransport       = newTransport
	OnSettle           = onSettle
	Attach             = reattach
	ParseRetryAfter    = parseRetryAfter
	ErrNilRequest      = errNilRequest
	ErrNoResponse      = errNoResponse
	DefaultPeekSize    = defaultPeekSize
	DefaultOKPeekSize  = defaultOKPeekSize
	DefaultPeekTimeout = defaultPeekTimeout
)

// WithAttemptTimeout bounds ctx by d with the cause ErrAttemptTimeout.
func WithAttemptTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, ErrAttemptTimeout)
}
