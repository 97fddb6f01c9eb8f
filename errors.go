package egresskit

import (
	"errors"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/robots"
)

// The errors of a request the chain did not send, one per action a
// crawler takes. They are declared once, here, so that a crawler's error
// handling needs this package only; the error types of the layers below
// wrap them, and each message starts with the package that decided.
var (
	// ErrDisallowed: a rule of the host's robots.txt forbids the URL; skip
	// it (*robots.DisallowedError, Source robots.Parsed).
	ErrDisallowed = sentinel.ErrDisallowed
	// ErrTryLater: the host cannot take the request now; requeue the URL
	// for RetryAt(err). The host asked us to wait longer than
	// Config.MaxWait or past the request's deadline (*ratelimit.WaitError),
	// its circuit breaker is open (*breaker.OpenError, also ErrOpen), or
	// its robots.txt is unreachable (*robots.DisallowedError, Source
	// robots.Unreachable).
	ErrTryLater = sentinel.ErrTryLater
	// ErrHalted: the host refused us and is halted until a person resumes
	// it (Transport.Resume, egressctl, the console); wait for a human
	// (*breaker.HaltError).
	ErrHalted = sentinel.ErrHalted
	// ErrOpen: the host's circuit breaker is open (*breaker.OpenError); it
	// matches ErrTryLater too.
	ErrOpen = sentinel.ErrOpen
)

// halfOpenRetry is RetryAt's answer for a half-open breaker whose probe
// is in flight: its outcome comes with the probe's answer.
const halfOpenRetry = time.Second

// RetryAt returns when to try again the host of a request that failed
// with err matching ErrTryLater: the end of the wait the host asked for
// (*ratelimit.WaitError), of its breaker's open period (*breaker.OpenError;
// a second from now for a half-open breaker whose probe is in flight), or
// the next fetch of its robots.txt (*robots.DisallowedError). It returns
// the zero Time for any other error.
func RetryAt(err error) time.Time {
	if !errors.Is(err, ErrTryLater) {
		return time.Time{}
	}
	if we, ok := errors.AsType[*ratelimit.WaitError](err); ok {
		return we.Until
	}
	if oe, ok := errors.AsType[*breaker.OpenError](err); ok {
		if oe.Until.IsZero() {
			return time.Now().Add(halfOpenRetry)
		}
		return oe.Until
	}
	if de, ok := errors.AsType[*robots.DisallowedError](err); ok {
		return de.Until
	}
	return time.Time{}
}
