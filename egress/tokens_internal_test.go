package egress

import (
	"strings"
	"testing"
	"time"
)

// TestCharacterClasses checks the character classes of the parsers at
// the ends of their ranges, where an off-by-one would hide.
func TestCharacterClasses(t *testing.T) {
	for c := range 256 {
		b := byte(c)
		alpha := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		digit := '0' <= c && c <= '9'
		tchar := alpha || digit || strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c))
		if got := isAlpha(b); got != alpha {
			t.Errorf("isAlpha(%q) = %v", b, got)
		}
		if got := isDigit(b); got != digit {
			t.Errorf("isDigit(%q) = %v", b, got)
		}
		if got := isTchar(b); got != tchar {
			t.Errorf("isTchar(%q) = %v", b, got)
		}
	}
}

// TestValidHostname: labels of 1 to 63 bytes, names of at most 253.
func TestValidHostname(t *testing.T) {
	label := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		want bool
	}{
		{label(63) + ".example", true},
		{label(64) + ".example", false},
		{strings.Repeat(label(49)+".", 5) + "abc", true}, // 253 bytes
		{strings.Repeat(label(49)+".", 5) + "abcd", false},
		{"a-b.c_d.9", true},
		{"-a.example", false},
		{"a-.example", false},
		{"a..example", false},
		{"A.example", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := validHostname(tt.name); got != tt.want {
			t.Errorf("validHostname(%q) (%d bytes) = %v, want %v", tt.name, len(tt.name), got, tt.want)
		}
	}
}

// TestOrDefault: zero takes the default, a negative value means none.
func TestOrDefault(t *testing.T) {
	for _, tt := range []struct{ v, d, want time.Duration }{
		{0, 5, 5}, {-1, 5, 0}, {3, 5, 3}, {-time.Hour, time.Second, 0},
	} {
		if got := orDefault(tt.v, tt.d); got != tt.want {
			t.Errorf("orDefault(%v, %v) = %v, want %v", tt.v, tt.d, got, tt.want)
		}
	}
}

// TestSquidErrorKind: squid's X-Squid-Error codes blame the credentials
// (ERR_CACHE_ACCESS_DENIED, its 407), the proxy, or the destination;
// codes about the request itself blame no one.
func TestSquidErrorKind(t *testing.T) {
	for _, tt := range []struct {
		code string
		kind string
		ok   bool
	}{
		{"ERR_CACHE_ACCESS_DENIED", failAuth, true},
		{"ERR_ACCESS_DENIED", failProxy, true},
		{"ERR_SHUTTING_DOWN", failProxy, true},
		{"ERR_CONNECT_FAIL", failDestination, true},
		{"ERR_DNS_FAIL", failDestination, true},
		{"ERR_INVALID_URL", "", false},
		{"ERR_UNSUP_REQ", "", false},
		{"", "", false},
	} {
		if kind, ok := squidErrorKind(tt.code); kind != tt.kind || ok != tt.ok {
			t.Errorf("squidErrorKind(%q) = %q, %v; want %q, %v", tt.code, kind, ok, tt.kind, tt.ok)
		}
	}
}

// TestProxyStatusQuotedName: in a quoted proxy name only \" and \\ are
// escapes.
func TestProxyStatusQuotedName(t *testing.T) {
	for _, tt := range []struct {
		line, name string
		ok         bool
	}{
		{`"a\"b\\c"; error=dns_timeout`, `a"b\c`, true},
		{`"a\xb"; error=dns_timeout`, "", false},
		{`"ab\`, "", false},
	} {
		got, ok := parseProxyStatus([]string{tt.line})
		if ok != tt.ok || got.name != tt.name {
			t.Errorf("parseProxyStatus(%q) = name %q, %v; want %q, %v", tt.line, got.name, ok, tt.name, tt.ok)
		}
	}
}
