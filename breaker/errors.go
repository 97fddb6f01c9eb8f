package breaker

import (
	"time"

	"github.com/egresskit/egresskit/internal/sentinel"
)

// OpenError reports an open circuit: a crawler author reads Until; a store
// implementer returns it from Admit. errors.Is(err, egresskit.ErrOpen) is
// true.
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

// Unwrap returns egresskit.ErrOpen.
func (e *OpenError) Unwrap() error { return sentinel.ErrOpen }

// HaltError reports a halted host: a crawler author reads HaltedAt; a
// store implementer returns it from Admit. errors.Is(err,
// egresskit.ErrHalted) is true.
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

// Unwrap returns egresskit.ErrHalted.
func (e *HaltError) Unwrap() error { return sentinel.ErrHalted }
