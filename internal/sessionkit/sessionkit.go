// Package sessionkit holds what package session and the session stores
// share without exporting it: the session ID rules, the errors they name,
// and the error a store returns for a lease held by another holder.
package sessionkit

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Errors exported by package session as ErrInvalidID and ErrLeaseHeld.
var (
	ErrInvalidID = errors.New("session: invalid id")
	ErrLeaseHeld = errors.New("session: lease held by another holder")
)

// maxIDLen is the longest session ID accepted.
const maxIDLen = 128

// ValidateID reports whether id can name a session: 1 to 128 bytes of
// ASCII letters, digits and the punctuation - _ . : @ ~ + =. Anything else —
// control characters, spaces, braces (Redis hash tags), non-ASCII — is
// rejected with an error wrapping ErrInvalidID. The error does not repeat
// the ID.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidID, len(id), maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return fmt.Errorf("%w: byte %#02x at offset %d not allowed", ErrInvalidID, id[i], i)
		}
	}
	return nil
}

func idChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', ':', '@', '~', '+', '=':
		return true
	}
	return false
}

// NewID returns a random ID of 128 bits, base64url-encoded: a valid
// session ID.
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // never returns an error (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LeaseHeldError is the error a store returns from Acquire while another
// holder's lease on session ID is live until Expires.
type LeaseHeldError struct {
	ID      string
	Expires time.Time
}

// Error describes the error without secrets.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("session: lease on %q held until %s", e.ID, e.Expires.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrLeaseHeld.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }
