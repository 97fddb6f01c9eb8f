package sessionkit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
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
		err := sessionkit.ValidateID(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, sessionkit.ErrInvalidID)) {
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
		id := sessionkit.NewID()
		if err := sessionkit.ValidateID(id); err != nil || seen[id] {
			t.Fatalf("NewID() = %q: valid %v, repeated %v", id, err, seen[id])
		}
		seen[id] = true
	}
}

func TestLeaseHeldError(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	err := error(&sessionkit.LeaseHeldError{ID: "s-1", Expires: exp})
	if !errors.Is(err, sessionkit.ErrLeaseHeld) {
		t.Errorf("%v is not ErrLeaseHeld", err)
	}
	if want := `session: lease on "s-1" held until 2030-01-02T03:04:05.000006Z`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}
