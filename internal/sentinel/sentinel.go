// Package sentinel holds the sentinel errors that the root package
// exports (egresskit.ErrDisallowed, ErrTryLater, ErrHalted, ErrOpen) and
// that the packages below it wrap: robots' DisallowedError, ratelimit's
// WaitError, breaker's OpenError and HaltError. They live here, below
// all of them, so that each has one exported home, the root package.
//
// One sentinel per action a crawler takes: ErrDisallowed (skip the URL),
// ErrTryLater (try the host later), ErrHalted (wait for a human). ErrOpen
// is a finer match inside ErrTryLater: errors.Is(ErrOpen, ErrTryLater).
package sentinel

import "errors"

var (
	// ErrDisallowed: a rule of the host's robots.txt forbids the URL;
	// skip it.
	ErrDisallowed = errors.New("robots: disallowed by robots.txt")
	// ErrTryLater: the host cannot be sent to now (it asked us to wait
	// longer than the chain waits, its circuit is open, or its robots.txt
	// is unreachable); try the host later.
	ErrTryLater = errors.New("egresskit: try the host later")
	// ErrHalted: the host refused us and is halted until a person resumes
	// it.
	ErrHalted = errors.New("egresskit: host halted: wait for a human")
	// ErrOpen: the host's circuit is open (or half-open with every probe
	// slot taken); it matches ErrTryLater too.
	ErrOpen error = &within{msg: "breaker: circuit open", in: ErrTryLater}
)

// within is a sentinel that is a kind of another: errors.Is(e, e.in).
type within struct {
	msg string
	in  error
}

func (e *within) Error() string { return e.msg }
func (e *within) Unwrap() error { return e.in }
