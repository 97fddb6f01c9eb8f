// Package sentinel holds the sentinel errors that the root package
// exports (egresskit.ErrOpen, ErrHalted, ErrDisallowed) and that the
// packages below it wrap: breaker's OpenError and HaltError, robots'
// DisallowedError. They live here, below both, so that each has one
// exported home, the root package.
package sentinel

import "errors"

var (
	// ErrOpen: the host's circuit is open (or half-open with every probe
	// slot taken); the attempt must not be sent.
	ErrOpen = errors.New("breaker: circuit open")
	// ErrHalted: the host is halted until an operator resumes it.
	ErrHalted = errors.New("breaker: host halted")
	// ErrDisallowed is matched by every error that says robots.txt forbids
	// a URL.
	ErrDisallowed = errors.New("robots: disallowed by robots.txt")
)
