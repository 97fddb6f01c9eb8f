package haltrec

import (
	"errors"
	"strings"
	"testing"
	"unicode"
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
		{"\x1b[2J\x1b]0;title\x07", 40, "\uFFFD[2J\uFFFD]0;title\uFFFD"},
		{"a\u0085b\u009bc", 20, "a\uFFFDb\uFFFDc"}, // C1: NEL, CSI
		{"x?api_key=\u202eREDACTED", 40, "x?api_key=\uFFFDREDACTED"},
		{"\u2066a\u2067b\u2068c\u2069\u200f", 40, "\uFFFDa\uFFFDb\uFFFDc\uFFFD\uFFFD"},
		{"a\u2028b", 20, "a\uFFFDb"},
		{"abc", -1, ""},
	} {
		if got := Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	if got := Markers([]string{strings.Repeat("m", 100), "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}); len(got) != MaxMarkers || len(got[0]) != MaxMarker {
		t.Errorf("Markers kept %d, the first %d bytes", len(got), len(got[0]))
	}
}

func TestLine(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"  two\n\nlines\there  ", 40, "two lines here"},
		{"fake\nby=root", 40, "fake by=root"},
		{"\x1b[31mred", 40, "\uFFFD[31mred"},
		{strings.Repeat("ab ", 100), 5, "ab ab"},
	} {
		if got := Line(tt.in, tt.n); got != tt.want {
			t.Errorf("Line(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestReason(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
		err  error
	}{
		{"  owner allowed us ", "owner allowed us", nil},
		{"contrat signé ✓", "contrat signé ✓", nil},
		{"", "", ErrReasonEmpty},
		{"   ", "", ErrReasonEmpty},
		{"\u200b", "", ErrReasonControl},
		{"\u200b\u200b", "", ErrReasonControl},
		{"\u200d", "", ErrReasonEmpty},
		{"ok\nby=root", "", ErrReasonLines},
		{"ok\rx", "", ErrReasonLines},
		{"ok\u2028x", "", ErrReasonLines},
		{"ok\u0085x", "", ErrReasonLines},
		{"ok\x1b[2J", "", ErrReasonControl},
		{"ok\u202e", "", ErrReasonControl},
		{"a\tb", "", ErrReasonControl},
		{"bad\xff", "", ErrReasonControl},
		{strings.Repeat("x", 513), "", ErrReasonLong},
	} {
		got, err := Reason(tt.in, MaxText)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("Reason(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzClip: whatever the input, Clip's result is valid UTF-8 of at most n
// bytes without an unsafe character; Line's is also one line.
func FuzzClip(f *testing.F) {
	f.Add("héllo\x00\xff", 4)
	f.Add("\x1b]0;x\x07\u202e\u0085", 100)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = max(0, n%4096)
		for name, got := range map[string]string{"Clip": Clip(s, n), "Line": Line(s, n)} {
			if len(got) > n || !utf8.ValidString(got) {
				t.Fatalf("%s(%q, %d) = %q", name, s, n, got)
			}
			for _, r := range got {
				if unsafe(r) || (name == "Line" && unicode.IsSpace(r) && r != ' ') {
					t.Fatalf("%s(%q, %d) = %q keeps %U", name, s, n, got, r)
				}
			}
		}
		if r, err := Reason(s, MaxText); err == nil {
			if strings.ContainsFunc(r, unsafe) {
				t.Fatalf("Reason(%q) accepted an unsafe character", s)
			}
			if strings.ContainsAny(r, "\n\r\t") || len(r) > MaxText {
				t.Fatalf("Reason(%q) = %q", s, r)
			}
		}
	})
}
