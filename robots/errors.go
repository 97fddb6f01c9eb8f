package robots

import (
	"time"

	"github.com/egresskit/egresskit/internal/sentinel"
)

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

// DisallowedError reports a URL that robots.txt does not let the chain
// fetch, for a crawler author to log or to read when to try again. When a
// rule forbids the URL (Source Parsed) it matches egresskit.ErrDisallowed:
// skip the URL. When the host's robots.txt could not be fetched (Source
// Unreachable: a 5xx, a 429, a network failure or a timeout) it matches
// egresskit.ErrTryLater instead, and Until says when robots.txt is
// fetched again: try the host then. It carries the host and escaped path,
// never the query, fragment or user information of the URL.
type DisallowedError struct {
	// Host is the host, with its port if the URL had one.
	Host string
	// Path is the escaped path of the URL.
	Path string
	// Source is Parsed when a rule forbids the path and Unreachable when
	// the host's robots.txt could not be fetched.
	Source Source
	// Until is, for an Unreachable robots.txt, when the next fetch of it
	// may be tried; zero otherwise.
	Until time.Time
}

// Error describes e: "robots: HOST/PATH disallowed by robots.txt", or
// "robots: robots.txt of HOST unreachable, try the host after TIME".
func (e *DisallowedError) Error() string {
	if e.Source == Unreachable {
		s := "robots: robots.txt of " + e.Host + " unreachable, try the host later"
		if !e.Until.IsZero() {
			s = "robots: robots.txt of " + e.Host + " unreachable, try the host after " + e.Until.UTC().Format(time.RFC3339)
		}
		return s
	}
	return "robots: " + e.Host + e.Path + " disallowed by robots.txt"
}

// Is reports whether target is egresskit.ErrDisallowed (a rule forbids
// the URL) or egresskit.ErrTryLater (robots.txt is unreachable).
func (e *DisallowedError) Is(target error) bool {
	if e.Source == Unreachable {
		return target == sentinel.ErrTryLater
	}
	return target == sentinel.ErrDisallowed
}
