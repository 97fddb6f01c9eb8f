package session

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
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

// NewID returns a random session ID of 128 bits, base64url-encoded.
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // never returns an error (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
