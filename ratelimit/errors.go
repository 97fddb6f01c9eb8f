package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/egresskit/egresskit/internal/sentinel"
)

// ErrInvalidRate: a rate that is not a number.
var ErrInvalidRate = errors.New("ratelimit: invalid rate")

// DeadlineError reports that the wait for a host's next slot would pass the
// context's deadline: what a store's Admit returns, taking no token.
// errors.Is(err, context.DeadlineExceeded) is true. The egresskit chain
// returns a *WaitError in its place.
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

// WaitError reports a request the chain did not send, at once, because its
// host's pacing (a pause for the host's Retry-After, or its next slot at
// its rate) would have made it wait longer than the chain waits
// (egresskit.Config.MaxWait) or past the request's deadline. No token was
// spent. errors.Is(err, egresskit.ErrTryLater) is true: requeue the URL for
// Until. When the request's deadline decided, errors.Is(err,
// context.DeadlineExceeded) is true as well, and errors.As finds the
// store's *DeadlineError.
type WaitError struct {
	// Host is the host key.
	Host string
	// RetryAfter is how long the request would have waited, from when
	// the chain decided.
	RetryAfter time.Duration
	// Until is when the host takes requests again: the chain's clock when
	// it decided, plus RetryAfter.
	Until time.Time
	// Bound is the chain's bound on a wait (egresskit.Config.MaxWait) that
	// RetryAfter passed; 0 when the request's deadline decided.
	Bound time.Duration
}

// Error returns "ratelimit: HOST asks us to wait D (until TIME), longer than
// the chain waits (B in all): try it later", or the same ending "past the
// request's deadline". D is counted from when the chain decided: a request
// that waited already may be refused a wait shorter than B.
func (e *WaitError) Error() string {
	why := "past the request's deadline"
	if e.Bound > 0 {
		why = "longer than the chain waits (" + e.Bound.String() + " in all)"
	}
	return "ratelimit: " + e.Host + " asks us to wait " + e.RetryAfter.Round(time.Millisecond).String() +
		" (until " + e.Until.UTC().Format(time.RFC3339) + "), " + why + ": try it later"
}

// Unwrap returns egresskit.ErrTryLater and, when the request's deadline
// decided, the store's *DeadlineError (Host, and RetryAfter as its Wait),
// which unwraps to context.DeadlineExceeded.
func (e *WaitError) Unwrap() []error {
	if e.Bound <= 0 {
		return []error{sentinel.ErrTryLater, &DeadlineError{Host: e.Host, Wait: e.RetryAfter}}
	}
	return []error{sentinel.ErrTryLater}
}
