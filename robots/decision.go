package robots

import (
	"errors"
	"time"
)

// ErrDisallowed is matched (errors.Is) by every error that says robots.txt
// forbids a URL; the error is a *DisallowedError.
var ErrDisallowed = errors.New("robots: disallowed by robots.txt")

// ErrInvalidURL is matched by the error Check returns for a URL it cannot
// check: nil, not http or https, with an empty host (":8080") or a malformed
// port. The error never contains the URL.
var ErrInvalidURL = errors.New("robots: invalid URL")

// Source says what a Decision rests on.
type Source uint8

// The sources of a Decision.
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

// Decision is the answer of robots.txt for one URL.
type Decision struct {
	// Allowed reports whether the URL may be fetched.
	Allowed bool
	// Source says what the decision rests on.
	Source Source
	// CrawlDelay is the host's Crawl-delay for the agent, clamped to
	// Config.MaxCrawlDelay; 0 when there is none. The caller should
	// space requests to the host at least this far apart.
	CrawlDelay time.Duration
	// Expires is when the cached robots.txt answer lapses; for an
	// Unreachable host it is when the next fetch may be tried. It is zero
	// for an Implicit decision.
	Expires time.Time
}

// DisallowedError reports a URL that robots.txt forbids. It matches
// ErrDisallowed. It carries the host and escaped path, never the query,
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

// Is reports whether target is ErrDisallowed.
func (e *DisallowedError) Is(target error) bool { return target == ErrDisallowed }
