package session_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/session"
)

func TestNewKeyringRejects(t *testing.T) {
	good := session.GenerateKey(1)
	for _, tc := range []struct {
		name string
		keys []session.Key
	}{
		{"none", nil},
		{"zero ID", []session.Key{session.GenerateKey(0)}},
		{"short", []session.Key{{ID: 2, Secret: make([]byte, 16)}}},
		{"long", []session.Key{{ID: 2, Secret: make([]byte, 33)}}},
		{"repeated ID", []session.Key{good, session.GenerateKey(1)}},
	} {
		if _, err := session.NewKeyring(tc.keys...); !errors.Is(err, session.ErrInvalidKey) {
			t.Errorf("NewKeyring(%s) = %v, want ErrInvalidKey", tc.name, err)
		}
	}
}

func TestKeyringSealOpen(t *testing.T) {
	k1, k2 := session.GenerateKey(1), session.GenerateKey(7)
	old, _ := session.NewKeyring(k1)
	rotated, _ := session.NewKeyring(k1, k2)
	if rotated.Primary() != 7 {
		t.Errorf("Primary() = %d, want 7 (the last key)", rotated.Primary())
	}
	pt := []byte("plaintext value")
	blob := old.Seal("s1", "f", pt)
	if len(blob) != len(pt)+session.Overhead {
		t.Errorf("len(Seal) = %d, want %d", len(blob), len(pt)+session.Overhead)
	}
	if bytes.Contains(blob, pt) {
		t.Errorf("sealed value holds the plaintext")
	}
	if again := old.Seal("s1", "f", pt); bytes.Equal(again, blob) {
		t.Errorf("two seals of one value are equal: nonces repeat")
	}
	for _, r := range []*session.Keyring{old, rotated} {
		if got, err := r.Open("s1", "f", blob); err != nil || !bytes.Equal(got, pt) {
			t.Errorf("Open = %q, %v; want %q", got, err, pt)
		}
	}
	newBlob := rotated.Seal("s1", "f", pt)
	for _, tc := range []struct {
		name      string
		r         *session.Keyring
		id, field string
		blob      []byte
	}{
		{"other id", old, "s2", "f", blob},
		{"other field", old, "s1", "g", blob},
		{"id/field boundary", old, "s", "1f", blob},
		{"unknown key", old, "s1", "f", newBlob},
		{"empty", old, "s1", "f", nil},
		{"short", old, "s1", "f", blob[:session.Overhead-1]},
		{"future version", old, "s1", "f", append([]byte{2}, blob[1:]...)},
	} {
		if got, err := tc.r.Open(tc.id, tc.field, tc.blob); !errors.Is(err, session.ErrTampered) || got != nil {
			t.Errorf("Open(%s) = %q, %v; want nil, ErrTampered", tc.name, got, err)
		}
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	k := session.Key{ID: 3, Secret: []byte(strings.Repeat("K", session.KeySize))}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		if s := fmt.Sprintf(verb, k); strings.Contains(s, "KKKK") || strings.Contains(s, "4b4b") {
			t.Errorf("Sprintf(%s, key) = %q shows the key material", verb, s)
		}
	}
}

// FuzzOpen feeds arbitrary blobs to Open: it must fail with ErrTampered
// and never panic. Only genuine seals (of "value", in the seed corpus)
// open; the fuzzer cannot forge one.
func FuzzOpen(f *testing.F) {
	r, _ := session.NewKeyring(session.Key{ID: 1, Secret: make([]byte, session.KeySize)})
	f.Add(r.Seal("id", "field", []byte("value")))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 1})
	f.Add(bytes.Repeat([]byte{1}, session.Overhead))
	f.Fuzz(func(t *testing.T, b []byte) {
		pt, err := r.Open("id", "field", b)
		if err == nil {
			if string(pt) != "value" {
				t.Fatalf("Open(%x) = %q, want ErrTampered", b, pt)
			}
			return
		}
		if !errors.Is(err, session.ErrTampered) || pt != nil {
			t.Fatalf("Open(%x) = %q, %v; want nil, ErrTampered", b, pt, err)
		}
	})
}
