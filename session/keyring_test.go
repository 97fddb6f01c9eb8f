package session_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
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
		{"short", []session.Key{{ID: 2, Secret: session.Secret(make([]byte, 16))}}},
		{"long", []session.Key{{ID: 2, Secret: session.Secret(make([]byte, 33))}}},
		{"repeated ID", []session.Key{good, session.GenerateKey(1)}},
	} {
		if _, err := session.NewKeyring(tc.keys...); !errors.Is(err, egresskit.ErrInvalidConfig) {
			t.Errorf("NewKeyring(%s) = %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	k := session.Key{ID: 3, Secret: session.Secret(strings.Repeat("K", session.KeySize))}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		if s := fmt.Sprintf(verb, k); strings.Contains(s, "KKKK") || strings.Contains(s, "4b4b") {
			t.Errorf("Sprintf(%s, key) = %q shows the key material", verb, s)
		}
	}
}
