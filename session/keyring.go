package session

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/egresskit/egresskit/internal/configerr"
)

// keySize is the size of a Keyring key: AES-256.
const keySize = 32

// Sealed blob layout, version 1:
//
//	offset 0      format version (1)
//	offset 1..4   key ID, big-endian uint32
//	offset 5..16  GCM nonce (random, 12 bytes)
//	offset 17..   ciphertext followed by the 16-byte GCM tag
//
// The associated data is adPrefix, the 5-byte header, the session ID
// (length-prefixed) and the field name, so a blob opens only under the
// session ID and field it was sealed for.
const (
	sealVersion   = 1
	sealHeaderLen = 1 + 4
	nonceLen      = 12
	tagLen        = 16
	// overhead is the number of bytes sealing adds to a plaintext.
	overhead = sealHeaderLen + nonceLen + tagLen
	adPrefix = "egresskit/session\x00"
)

// Key is one AES-256 key of a Keyring, which an operator provisions (from
// a secret store, say) and every worker of a fleet shares. Printing a Key
// never shows Secret: it is a Secret.
type Key struct {
	// ID names the key inside every blob it seals; nonzero, unique in a
	// ring, and never reused for different key material.
	ID uint32
	// Secret is the key material, 32 random bytes; Secret(b) converts
	// a []byte b.
	Secret Secret
}

// generateKey returns a Key with id and fresh random key material.
func generateKey(id uint32) Key {
	b := make([]byte, keySize)
	rand.Read(b) // never returns an error (crypto/rand, Go 1.24+)
	return Key{ID: id, Secret: Secret(b)}
}

// Keyring seals and opens session values with AES-256-GCM; a crawler author
// builds one from the operator's keys for Config.Keyring. The newest key
// seals; every key of the ring opens. Rotate by building a ring with a new
// key appended: values sealed under older keys stay readable, and each is
// re-sealed under the new key when it is next written. Drop an old key only
// once no live session can hold a value sealed under it (after the session
// TTL has passed since the rotation).
//
// Nonces are random: rotate well before 2^32 values have been sealed under
// one key. A Keyring is immutable and safe for concurrent use.
type Keyring struct {
	primary uint32
	aeads   map[uint32]cipher.AEAD
}

// NewKeyring returns a Keyring holding keys, oldest first; the last one
// seals. It fails with an error wrapping egresskit.ErrInvalidConfig when
// keys is empty, a key is not 32 bytes, or an ID is zero or repeated; the
// error never holds key material. The key material is copied.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, configerr.Field("keys", "is empty")
	}
	r := &Keyring{aeads: make(map[uint32]cipher.AEAD, len(keys))}
	for i, k := range keys {
		key := fmt.Sprintf("keys[%d]", i)
		if k.ID == 0 {
			return nil, configerr.Field(key+".ID", "is 0")
		}
		if len(k.Secret) != keySize {
			return nil, configerr.Field(key+".Secret", "is %d bytes, want %d", len(k.Secret), keySize)
		}
		if _, dup := r.aeads[k.ID]; dup {
			return nil, configerr.Field(key+".ID", "is %d, repeated", k.ID)
		}
		block, err := aes.NewCipher([]byte(k.Secret))
		if err != nil {
			return nil, configerr.Field(key+".Secret", "is refused by AES: %v", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, configerr.Field(key+".Secret", "is refused by GCM: %v", err)
		}
		r.aeads[k.ID] = aead
		r.primary = k.ID
	}
	return r, nil
}

// primaryID returns the ID of the key that seals.
func (r *Keyring) primaryID() uint32 { return r.primary }

// seal encrypts plaintext for field of session id under the newest key.
// The result is overhead bytes longer than plaintext.
func (r *Keyring) seal(id, field string, plaintext []byte) []byte {
	out := make([]byte, sealHeaderLen+nonceLen, overhead+len(plaintext))
	out[0] = sealVersion
	binary.BigEndian.PutUint32(out[1:5], r.primary)
	rand.Read(out[sealHeaderLen:]) // never returns an error (crypto/rand, Go 1.24+)
	nonce := out[sealHeaderLen : sealHeaderLen+nonceLen]
	return r.aeads[r.primary].Seal(out, nonce, plaintext, associatedData(out[:sealHeaderLen], id, field))
}

// open decrypts a blob sealed by seal for field of session id. A blob that
// was modified, sealed for another session or field, sealed under a key
// the ring does not hold, or is not a sealed blob at all yields an error
// wrapping ErrTampered; open never returns partial plaintext.
func (r *Keyring) open(id, field string, blob []byte) ([]byte, error) {
	if len(blob) < overhead {
		return nil, fmt.Errorf("%w: field %q: %d bytes, shorter than a sealed value", ErrTampered, field, len(blob))
	}
	if blob[0] != sealVersion {
		return nil, fmt.Errorf("%w: field %q: unknown format version %d", ErrTampered, field, blob[0])
	}
	kid := binary.BigEndian.Uint32(blob[1:5])
	aead, ok := r.aeads[kid]
	if !ok {
		return nil, fmt.Errorf("%w: field %q: sealed under unknown key %d", ErrTampered, field, kid)
	}
	nonce := blob[sealHeaderLen : sealHeaderLen+nonceLen]
	pt, err := aead.Open(nil, nonce, blob[sealHeaderLen+nonceLen:], associatedData(blob[:sealHeaderLen], id, field))
	if err != nil {
		return nil, fmt.Errorf("%w: field %q: authentication failed", ErrTampered, field)
	}
	return pt, nil
}

func associatedData(header []byte, id, field string) []byte {
	ad := make([]byte, 0, len(adPrefix)+len(header)+binary.MaxVarintLen64+len(id)+len(field))
	ad = append(ad, adPrefix...)
	ad = append(ad, header...)
	ad = binary.AppendUvarint(ad, uint64(len(id)))
	ad = append(ad, id...)
	return append(ad, field...)
}
