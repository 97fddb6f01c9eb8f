package breaker

import (
	"errors"
	"time"
)

// Sentinel errors; match them with errors.Is. The errors Set.Allow returns
// are the struct types below, which wrap these.
var (
	// ErrOpen: the host's circuit is open (or half-open with every probe
	// slot taken); the attempt must not be sent.
	ErrOpen = errors.New("breaker: circuit open")
	// ErrHalted: the host is halted until an operator resumes it.
	ErrHalted = errors.New("breaker: host halted")
)

// OpenError reports an open circuit. errors.Is(err, ErrOpen) is true.
type OpenError struct {
	// Host is the host key.
	Host string
	// Until is when the open period ends: the first probe is admitted after
	// it. It is the zero time when the breaker is already half-open and
	// every probe slot is taken; the circuit then closes or reopens as soon
	// as the probes in flight are recorded.
	Until time.Time
}

// Error returns "breaker: circuit open for HOST until TIME".
func (e *OpenError) Error() string {
	if e.Until.IsZero() {
		return "breaker: circuit open for " + e.Host + " (half-open, probe in flight)"
	}
	return "breaker: circuit open for " + e.Host + " until " + e.Until.UTC().Format(time.RFC3339)
}

// Unwrap returns ErrOpen.
func (e *OpenError) Unwrap() error { return ErrOpen }

// HaltError reports a halted host. errors.Is(err, ErrHalted) is true.
type HaltError struct {
	// Host is the host key.
	Host string
	// HaltedAt is when the host was halted.
	HaltedAt time.Time
}

// Error returns "breaker: host HOST halted since TIME".
func (e *HaltError) Error() string {
	return "breaker: host " + e.Host + " halted since " + e.HaltedAt.UTC().Format(time.RFC3339)
}

// Unwrap returns ErrHalted.
func (e *HaltError) Unwrap() error { return ErrHalted }
