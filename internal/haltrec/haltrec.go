// Package haltrec bounds and cleans the halt records the stores keep (see
// hoststate.HaltLog), so that every store keeps the same, small record
// whatever a refusing host sent, and so that whatever reads a record back
// (a page, a terminal) shows it as data: no control character, no
// reordering of the text, a bounded size.
package haltrec

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of one record, in bytes or entries.
const (
	MaxURL      = 2048
	MaxBodyHead = 512
	MaxText     = 512 // Reason, Evidence, Worker, a note's text
	MaxBy       = 128
	MaxMarkers  = 16
	MaxMarker   = 64
	// MaxHistory is how many halt records, and how many notes, a store
	// keeps per host: the newest.
	MaxHistory = 16
)

// unsafe reports whether r must not reach a page or a terminal as it is:
// a C0 control other than newline and tab, DEL, a C1 control (a terminal
// may act on them), a bidirectional override, embedding, isolate or mark
// (they reorder what follows: "…api_key=REDACTED" would read
// "DETCADER=yek_ipa"), a line or paragraph separator, or U+FFFE/U+FFFF.
func unsafe(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\n' && r != '\t'
	case r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029,
		r == 0xfffe, r == 0xffff:
		return true
	}
	return false
}

// Clip returns s cut to at most n bytes on a rune boundary, with invalid
// UTF-8 and every unsafe character (C0 controls other than newline and
// tab, DEL, C1 controls, bidirectional controls, line separators) replaced
// by U+FFFD, so that a record prints safely. Only the first 4n bytes of s
// are looked at, so that a huge input costs no more than a small one.
func Clip(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if len(s) > 4*n+4 {
		s = s[:4*n+4]
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unsafe(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Line returns s as one line of at most n bytes for a terminal or a table
// cell: Clip's, with every run of white space (newlines and tabs too)
// turned into one space and the ends trimmed.
func Line(s string, n int) string {
	s = Clip(s, 4*n+4)
	var b strings.Builder
	b.Grow(min(len(s), n))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return Clip(b.String(), n)
}

// Markers returns at most MaxMarkers markers, each clipped to MaxMarker
// bytes, in a new slice.
func Markers(ms []string) []string {
	if len(ms) > MaxMarkers {
		ms = ms[:MaxMarkers]
	}
	out := make([]string, len(ms))
	for i, s := range ms {
		out[i] = Clip(s, MaxMarker)
	}
	return out
}

// Errors of Reason.
var (
	ErrReasonEmpty   = errors.New("no visible character")
	ErrReasonLines   = errors.New("more than one line")
	ErrReasonControl = errors.New("a control, formatting or unprintable character")
	ErrReasonLong    = errors.New("too long")
)

// Reason checks an operator's reason or name, given with a resume or a
// note: one line of printable text with at least one visible character
// (not only spaces or zero-width characters), at most max bytes once
// trimmed. It returns the text trimmed, or one of the ErrReason errors.
func Reason(s string, max int) (string, error) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", ErrReasonControl
	}
	visible := false
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			return "", ErrReasonLines
		case r == ' ' || (unicode.IsSpace(r) && !unsafe(r) && r != '\t'):
		case r == 0x200c || r == 0x200d: // joiners some scripts need
		case unsafe(r) || r == '\t' || unicode.Is(unicode.Cf, r) || !unicode.IsPrint(r):
			return "", ErrReasonControl
		default:
			visible = true
		}
	}
	if !visible {
		return "", ErrReasonEmpty
	}
	if len(s) > max {
		return "", ErrReasonLong
	}
	return s, nil
}
