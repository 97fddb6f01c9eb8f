package session

import (
	"bytes"
	"errors"
	"testing"
)

func TestKeyringSealOpen(t *testing.T) {
	k1, k2 := generateKey(1), generateKey(7)
	old, _ := NewKeyring(k1)
	rotated, _ := NewKeyring(k1, k2)
	if rotated.primaryID() != 7 {
		t.Errorf("primaryID() = %d, want 7 (the last key)", rotated.primaryID())
	}
	pt := []byte("plaintext value")
	blob := old.seal("s1", "f", pt)
	if len(blob) != len(pt)+overhead {
		t.Errorf("len(seal) = %d, want %d", len(blob), len(pt)+overhead)
	}
	if bytes.Contains(blob, pt) {
		t.Errorf("sealed value holds the plaintext")
	}
	if again := old.seal("s1", "f", pt); bytes.Equal(again, blob) {
		t.Errorf("two seals of one value are equal: nonces repeat")
	}
	for _, r := range []*Keyring{old, rotated} {
		if got, err := r.open("s1", "f", blob); err != nil || !bytes.Equal(got, pt) {
			t.Errorf("open = %q, %v; want %q", got, err, pt)
		}
	}
	newBlob := rotated.seal("s1", "f", pt)
	for _, tc := range []struct {
		name      string
		r         *Keyring
		id, field string
		blob      []byte
	}{
		{"other id", old, "s2", "f", blob},
		{"other field", old, "s1", "g", blob},
		{"id/field boundary", old, "s", "1f", blob},
		{"unknown key", old, "s1", "f", newBlob},
		{"empty", old, "s1", "f", nil},
		{"short", old, "s1", "f", blob[:overhead-1]},
		{"future version", old, "s1", "f", append([]byte{2}, blob[1:]...)},
	} {
		if got, err := tc.r.open(tc.id, tc.field, tc.blob); !errors.Is(err, ErrTampered) || got != nil {
			t.Errorf("open(%s) = %q, %v; want nil, ErrTampered", tc.name, got, err)
		}
	}
}

// FuzzOpen feeds arbitrary blobs to open: it must fail with ErrTampered
// and never panic. Only genuine seals (of "value", in the seed corpus)
// open; the fuzzer cannot forge one.
func FuzzOpen(f *testing.F) {
	r, _ := NewKeyring(Key{ID: 1, Secret: Secret(make([]byte, keySize))})
	f.Add(r.seal("id", "field", []byte("value")))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 1})
	f.Add(bytes.Repeat([]byte{1}, overhead))
	f.Fuzz(func(t *testing.T, b []byte) {
		pt, err := r.open("id", "field", b)
		if err == nil {
			if string(pt) != "value" {
				t.Fatalf("open(%x) = %q, want ErrTampered", b, pt)
			}
			return
		}
		if !errors.Is(err, ErrTampered) || pt != nil {
			t.Fatalf("open(%x) = %q, %v; want nil, ErrTampered", b, pt, err)
		}
	})
}
