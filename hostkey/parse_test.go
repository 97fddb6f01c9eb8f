package hostkey_test

import (
	"errors"
	"testing"

	"github.com/egresskit/egresskit/hostkey"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		mode hostkey.Mode
		want string
		err  error
	}{
		{"example.com", hostkey.ByHost, "example.com", nil},
		{" Example.COM. ", hostkey.ByHost, "example.com", nil},
		{"example.com:8080", hostkey.ByHost, "example.com:8080", nil},
		{"example.com:443", hostkey.ByHost, "example.com", nil},
		{"http://127.0.0.1:42701", hostkey.ByHost, "127.0.0.1:42701", nil},
		{"https://user:pw@Example.com:443/a/b?token=x#f", hostkey.ByHost, "example.com", nil},
		{"[::1]:8080", hostkey.ByHost, "[::1]:8080", nil},
		{"http://[::1]/", hostkey.ByHost, "[::1]", nil},
		{"a.b.example.co.uk", hostkey.ByDomain, "example.co.uk", nil},
		{"https://a.example.com/x", hostkey.ByDomain, "example.com", nil},
		{"bücher.de", hostkey.ByHost, "xn--bcher-kva.de", nil},
		{"", hostkey.ByHost, "", hostkey.ErrEmptyHost},
		{"http://", hostkey.ByHost, "", hostkey.ErrEmptyHost},
		{"example.com/path", hostkey.ByHost, "", hostkey.ErrInvalidHost},
		{"user@example.com", hostkey.ByHost, "", hostkey.ErrInvalidHost},
		{"example.com:99999", hostkey.ByHost, "", hostkey.ErrInvalidHost},
		{"http://exa mple.com", hostkey.ByHost, "", hostkey.ErrInvalidHost},
		{"http://%zz", hostkey.ByHost, "", hostkey.ErrInvalidHost},
	}
	for _, tt := range tests {
		got, err := hostkey.Parse(tt.in, tt.mode)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("Parse(%q, %v) = %q, %v; want %q, %v", tt.in, tt.mode, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParse: a key Parse returns is a key: parsing it again returns it,
// under the same mode, and the error never repeats the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"example.com", "https://a.example.com:8443/x?y=1", "[::1]:80",
		"user@host", "http://%zz", "bücher.de", "", "a/b", "HTTP://EXAMPLE.COM"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, domain bool) {
		mode := hostkey.ByHost
		if domain {
			mode = hostkey.ByDomain
		}
		key, err := hostkey.Parse(s, mode)
		if err != nil {
			if !errors.Is(err, hostkey.ErrEmptyHost) && !errors.Is(err, hostkey.ErrInvalidHost) {
				t.Fatalf("Parse(%q) = %v: untyped error", s, err)
			}
			return
		}
		again, err := hostkey.Parse(key, mode)
		if err != nil || again != key {
			t.Fatalf("Parse(%q) = %q, but Parse(%q) = %q, %v", s, key, key, again, err)
		}
	})
}
