package haltrec

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"héllo", 2, "h"}, // never half a rune
		{"a\x00b\xffc", 10, "a\uFFFDb\uFFFDc"},
		{"line\nnext\ttab", 20, "line\nnext\ttab"},
		{"", 5, ""},
	} {
		if got := Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	if got := Markers([]string{strings.Repeat("m", 100), "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}); len(got) != MaxMarkers || len(got[0]) != MaxMarker {
		t.Errorf("Markers kept %d, the first %d bytes", len(got), len(got[0]))
	}
}

// FuzzClip: whatever the input, the result is valid UTF-8 of at most n
// bytes, without control characters but newline and tab.
func FuzzClip(f *testing.F) {
	f.Add("héllo\x00\xff", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = max(0, n%4096)
		got := Clip(s, n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Fatalf("Clip(%q, %d) = %q", s, n, got)
		}
		for _, r := range got {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
				t.Fatalf("Clip(%q, %d) = %q keeps a control character", s, n, got)
			}
		}
	})
}
