package robots

import "github.com/egresskit/egresskit/internal/sentinel"

// Source says what a robots.txt decision rests on: a crawler author reads
// it in a DisallowedError to tell a rule from an unreachable robots.txt.
type Source uint8

// The sources of a decision.
const (
	// Parsed: the rules of a robots.txt fetched with a 2xx status.
	Parsed Source = iota + 1
	// Unavailable: robots.txt answered 4xx (except 429), more than
	// MaxRedirects redirects or a redirect without a usable target, or
	// the host was unreachable for longer than UnreachableLimit; every
	// URL is allowed (RFC 9309 section 2.3.1.3).
	Unavailable
	// Unreachable: robots.txt answered 5xx or 429, or the fetch failed on
	// the network or timed out; every URL is disallowed until the next
	// fetch (RFC 9309 section 2.3.1.4).
	Unreachable
	// Implicit: the URL is /robots.txt itself, always allowed (RFC 9309
	// section 2.2.2); nothing was fetched.
	Implicit
)

// String returns the lower-case name of s.
func (s Source) String() string {
	switch s {
	case Parsed:
		return "parsed"
	case Unavailable:
		return "unavailable"
	case Unreachable:
		return "unreachable"
	case Implicit:
		return "implicit"
	default:
		return "unknown"
	}
}

// DisallowedError reports a URL that robots.txt forbids, for a crawler
// author to log or to tell a rule from an unreachable robots.txt. It
// matches egresskit.ErrDisallowed. It carries the host and escaped path, never the query,
// fragment or user information of the URL.
type DisallowedError struct {
	// Host is the host, with its port if the URL had one.
	Host string
	// Path is the escaped path of the URL.
	Path string
	// Source is Parsed when a rule forbids the path and Unreachable when
	// the host's robots.txt could not be fetched.
	Source Source
}

// Error describes e.
func (e *DisallowedError) Error() string {
	if e.Source == Unreachable {
		return "robots: " + e.Host + e.Path + " disallowed: robots.txt unreachable"
	}
	return "robots: " + e.Host + e.Path + " disallowed by robots.txt"
}

// Is reports whether target is egresskit.ErrDisallowed.
func (e *DisallowedError) Is(target error) bool { return target == sentinel.ErrDisallowed }
