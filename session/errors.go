package session

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Functions wrap them with context; match them with
// errors.Is.
var (
	// ErrNotFound reports that no live session exists under an ID: it was
	// never created, was deleted, or has expired.
	ErrNotFound = errors.New("session: not found")

	// ErrExists reports a Create under an ID that holds a live session.
	ErrExists = errors.New("session: already exists")

	// ErrInvalidID reports a session ID that is empty, too long, or holds a
	// character outside the allowed set (see ValidateID).
	ErrInvalidID = errors.New("session: invalid id")

	// ErrTampered reports a stored value that does not open: it was
	// modified, moved to another session or field, sealed under a key the
	// Keyring does not hold, or does not decode.
	ErrTampered = errors.New("session: record tampered or foreign")

	// ErrStaleLease reports a write or release fenced with a lease token
	// older than the session's newest lease (or one never issued).
	ErrStaleLease = errors.New("session: stale lease")

	// ErrLeaseHeld reports an Acquire while another holder's lease is live.
	// The returned error is a *LeaseHeldError.
	ErrLeaseHeld = errors.New("session: lease held by another holder")

	// ErrConflict reports a conditional write (FieldWrite.IfAbsent) that
	// found a field already present; nothing was written.
	ErrConflict = errors.New("session: conflicting write")

	// ErrAlreadyBound reports a Bind to an endpoint other than the one the
	// session is bound to. Use Rebind to move a session deliberately.
	ErrAlreadyBound = errors.New("session: already bound to another egress endpoint")

	// ErrEgressLost reports that the session's bound egress endpoint was
	// removed or quarantined. The request was not sent through another
	// endpoint; the returned error is an *EgressLostError.
	ErrEgressLost = errors.New("session: bound egress endpoint unavailable")

	// ErrNoRefresher reports an expired token on a Manager without a
	// Refresh function.
	ErrNoRefresher = errors.New("session: token expired and no refresher configured")

	// ErrInvalidKey reports a Keyring key that is not 32 bytes, or a
	// duplicate or zero key ID.
	ErrInvalidKey = errors.New("session: invalid key")
)

// LeaseHeldError is returned by Acquire when another holder's lease is live.
type LeaseHeldError struct {
	// ID is the session.
	ID string
	// Expires is when the live lease expires unless renewed.
	Expires time.Time
}

// Error describes the error without secrets.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("session: lease on %q held until %s", e.ID, e.Expires.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrLeaseHeld.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// RefreshError reports a token that could not be refreshed. The request
// that needed the token was not sent.
type RefreshError struct {
	// ID is the session.
	ID string
	// Err is the cause: the Refresh function's error, ErrNoRefresher,
	// ErrStaleLease, ErrLeaseHeld, a Store error, or the context's error.
	Err error
}

// Error describes the error without secrets.
func (e *RefreshError) Error() string {
	return fmt.Sprintf("session: token refresh for %q: %v", e.ID, e.Err)
}

// Unwrap returns the cause.
func (e *RefreshError) Unwrap() error { return e.Err }

// EgressLostError reports that a session's bound egress endpoint is gone.
// errors.Is matches both ErrEgressLost and the egress package's
// ErrBindingUnavailable.
type EgressLostError struct {
	// ID is the session; Endpoint the endpoint it is bound to.
	ID, Endpoint string
	// Err is the egress layer's error.
	Err error
}

// Error describes the error without secrets.
func (e *EgressLostError) Error() string {
	return fmt.Sprintf("session: %q is bound to egress endpoint %q, which is unavailable: %v", e.ID, e.Endpoint, e.Err)
}

// Is reports whether target is ErrEgressLost.
func (e *EgressLostError) Is(target error) bool { return target == ErrEgressLost }

// Unwrap returns the egress layer's error.
func (e *EgressLostError) Unwrap() error { return e.Err }
