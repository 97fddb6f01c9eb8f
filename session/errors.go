package session

import (
	"errors"
	"fmt"

	"github.com/egresskit/egresskit/internal/sessionkit"
)

// Sentinel errors, for a crawler author to match with errors.Is (a store
// implementer returns the first five). Functions wrap them with context.
var (
	// ErrNotFound reports that no live session exists under an ID: it was
	// never created, was deleted, or has expired.
	ErrNotFound = errors.New("session: not found")

	// ErrExists reports a Create under an ID that holds a live session.
	ErrExists = errors.New("session: already exists")

	// ErrInvalidID reports a session ID that is empty, longer than 128
	// bytes, or holds a byte other than an ASCII letter, a digit or one of
	// - _ . : @ ~ + = (the error does not repeat the ID).
	ErrInvalidID = sessionkit.ErrInvalidID

	// ErrStaleLease reports a write or release fenced with a lease token
	// older than the session's newest lease (or one never issued).
	ErrStaleLease = errors.New("session: stale lease")

	// ErrLeaseHeld reports an Acquire while another holder's lease is live;
	// the error names when that lease expires (Manager.Get shows it too).
	ErrLeaseHeld = sessionkit.ErrLeaseHeld

	// ErrTampered reports a stored value that does not open: it was
	// modified, moved to another session or field, sealed under a key the
	// Keyring does not hold, or does not decode.
	ErrTampered = errors.New("session: record tampered or foreign")

	// ErrAlreadyBound reports a Bind to an endpoint other than the one the
	// session is bound to. Use Rebind to move a session deliberately.
	ErrAlreadyBound = errors.New("session: already bound to another egress endpoint")

	// ErrEgressLost reports that the session's bound egress endpoint was
	// removed or quarantined. The request was not sent through another
	// endpoint; the error names the session and the endpoint, and also
	// matches the egress package's ErrBindingUnavailable.
	ErrEgressLost = errors.New("session: bound egress endpoint unavailable")

	// ErrNoRefresher reports an expired token on a Manager without a
	// Refresh function.
	ErrNoRefresher = errors.New("session: token expired and no refresher configured")
)

// refreshError reports a token that could not be refreshed. The request
// that needed the token was not sent.
type refreshError struct {
	// ID is the session.
	ID string
	// Err is the cause: the Refresh function's error, ErrNoRefresher,
	// ErrStaleLease, ErrLeaseHeld, a Store error, or the context's error.
	Err error
}

// Error describes the error without secrets.
func (e *refreshError) Error() string {
	return fmt.Sprintf("session: token refresh for %q: %v", e.ID, e.Err)
}

// Unwrap returns the cause.
func (e *refreshError) Unwrap() error { return e.Err }

// egressLostError reports that a session's bound egress endpoint is gone.
// errors.Is matches both ErrEgressLost and the egress package's
// ErrBindingUnavailable.
type egressLostError struct {
	// ID is the session; Endpoint the endpoint it is bound to.
	ID, Endpoint string
	// Err is the egress layer's error.
	Err error
}

// Error describes the error without secrets.
func (e *egressLostError) Error() string {
	return fmt.Sprintf("session: %q is bound to egress endpoint %q, which is unavailable: %v", e.ID, e.Endpoint, e.Err)
}

// Is reports whether target is ErrEgressLost.
func (e *egressLostError) Is(target error) bool { return target == ErrEgressLost }

// Unwrap returns the egress layer's error.
func (e *egressLostError) Unwrap() error { return e.Err }
