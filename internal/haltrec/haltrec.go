// Package haltrec bounds the halt records the stores keep (see
// hoststate.HaltLog), so that every store keeps the same, small record
// whatever a refusing host sent.
package haltrec

import (
	"strings"
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

// Clip returns s cut to at most n bytes on a rune boundary, with invalid
// UTF-8 and control characters other than newline and tab replaced by
// U+FFFD, so that a record prints safely.
func Clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
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
