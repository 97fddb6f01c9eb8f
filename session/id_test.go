package session_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/session"
)

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"crawl-42:user@site.example~v1+x=y_z", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 128+1), false},
		{"line\nbreak", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"tab\t", false},
		{"space here", false},
		{"{hashtag}", false},
		{"slash/", false},
		{"ünïcode", false},
	} {
		err := session.ValidateID(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, session.ErrInvalidID)) {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\x00\x7f\t") {
			t.Errorf("ValidateID(%q) error %q repeats control characters", tc.id, err)
		}
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := session.NewID()
		if err := session.ValidateID(id); err != nil || seen[id] {
			t.Fatalf("NewID() = %q: valid %v, repeated %v", id, err, seen[id])
		}
		seen[id] = true
	}
}
