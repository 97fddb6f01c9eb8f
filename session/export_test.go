package session

import "github.com/egresskit/egresskit/session/internal/peek"

// Names the external tests use for what the package keeps unexported.
type (
	RefreshError    = refreshError
	EgressLostError = egressLostError
	JarStats        = peek.JarStats
)

// KeySize is the size of a Keyring key.
const KeySize = keySize

// GenerateKey returns a Key with id and fresh random key material.
func GenerateKey(id uint32) Key { return generateKey(id) }

// Stats returns j's counters.
func (j *Jar) Stats() JarStats { return j.stats() }
