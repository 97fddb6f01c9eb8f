package ratelimit

import (
	"context"
	"errors"
	"time"
)

// ErrInvalidRate: a rate that is not a number.
var ErrInvalidRate = errors.New("ratelimit: invalid rate")

// DeadlineError reports that the wait for a host's next slot would pass the
// context's deadline. errors.Is(err, context.DeadlineExceeded) is true.
type DeadlineError struct {
	// Host is the host key.
	Host string
	// Wait is how long the caller would have had to wait.
	Wait time.Duration
}

// Error returns "ratelimit: wait of D for HOST exceeds the context deadline".
func (e *DeadlineError) Error() string {
	return "ratelimit: wait of " + e.Wait.String() + " for " + e.Host + " exceeds the context deadline"
}

// Unwrap returns context.DeadlineExceeded.
func (e *DeadlineError) Unwrap() error { return context.DeadlineExceeded }
