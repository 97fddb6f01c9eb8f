package breaker

import (
	"time"

	"github.com/egresskit/egresskit/internal/sentinel"
)

// OpenError reports an open circuit: the host is failing, try it later.
// A crawler author reads Until; a store implementer returns it from Admit.
// errors.Is(err, egresskit.ErrOpen) and errors.Is(err,
// egresskit.ErrTryLater) are true.
type OpenError struct {
	// Host is the host key.
	Host string
	// Until is when the open period ends: the first probe is admitted after
	// it. It is the zero time when the breaker is already half-open and
	// every probe slot is taken; the circuit then closes or reopens as soon
	// as the probes in flight are recorded.
	Until time.Time
}

// Error returns "breaker: HOST is failing, circuit open until TIME: try
// it later".
func (e *OpenError) Error() string {
	if e.Until.IsZero() {
		return "breaker: " + e.Host + " is failing, circuit half-open with its probe in flight: try it later"
	}
	return "breaker: " + e.Host + " is failing, circuit open until " + e.Until.UTC().Format(time.RFC3339) + ": try it later"
}

// Unwrap returns egresskit.ErrOpen (which matches egresskit.ErrTryLater).
func (e *OpenError) Unwrap() error { return sentinel.ErrOpen }

// HaltError reports a halted host: it refused us, and stays halted until
// a person resumes it (the chain's Resume, egressctl, the console). It is
// not an open circuit: its message says "halted", never "breaker". A
// crawler author reads HaltedAt; a store implementer returns it from
// Admit. errors.Is(err, egresskit.ErrHalted) is true.
type HaltError struct {
	// Host is the host key.
	Host string
	// HaltedAt is when the host was halted.
	HaltedAt time.Time
}

// Error returns "egresskit: HOST refused us, halted since TIME: wait for
// a human to resume it".
func (e *HaltError) Error() string {
	return "egresskit: " + e.Host + " refused us, halted since " + e.HaltedAt.UTC().Format(time.RFC3339) + ": wait for a human to resume it"
}

// Unwrap returns egresskit.ErrHalted.
func (e *HaltError) Unwrap() error { return sentinel.ErrHalted }
