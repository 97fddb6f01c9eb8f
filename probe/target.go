package probe

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of Run's input as a whole, returned as they are.
var (
	// ErrNoTargets: the target list is empty.
	ErrNoTargets = errors.New("probe: no targets")
	// ErrTooManyProbes: the run would send more than 100,000 probes
	// (targets, times egresses in matrix mode).
	ErrTooManyProbes = errors.New("probe: too many probes")
)

// Target is one URL to probe and, optionally, the egress to probe it
// through.
type Target struct {
	// URL is the absolute http or https URL to request.
	URL string
	// Egress is where the probe leaves from: the ID of one of
	// Options.Proxies, a proxy URL ("http://user:pass@host:port",
	// "socks5://host:port"), or "direct". Empty means the next of
	// Options.Proxies in turn, or direct when there are none. With
	// Options.Matrix every target goes through every egress, and a proxy
	// URL here only adds to the set of egresses.
	Egress string
}

// TargetError reports an invalid target, one the caller must fix: a
// crawler author (or the preflight command) tells it from a failure of the
// run. It never contains credentials.
type TargetError struct {
	// Index is the position of the target in the list passed to Run, or
	// read from a target file (0-based).
	Index int
	// Line is the 1-based line of a target file the preflight command
	// read, else 0.
	Line int
	// URL is the redacted target URL, or "" when it cannot be shown.
	URL string
	// Err says what is wrong: a malformed URL, a scheme other than http
	// or https, no host, a bad port, a URL longer than 8 KiB, an egress
	// that is not among Options.Proxies or that the egress rule governing
	// the host excludes.
	Err error
}

// Error describes the fault: the target's index or line, its redacted URL
// and what is wrong.
func (e *TargetError) Error() string {
	var b strings.Builder
	b.WriteString("probe: ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	} else {
		fmt.Fprintf(&b, "target %d: ", e.Index)
	}
	if e.URL != "" {
		fmt.Fprintf(&b, "%q: ", e.URL)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *TargetError) Unwrap() error { return e.Err }

// InvalidProxyError reports an invalid proxy in the input (a bad URL, a
// duplicate ID), not a proxy that failed (egress.ProxyError). It names the
// proxy by its endpoint ID or line, never by its credentials.
type InvalidProxyError struct {
	// ID is the endpoint ID, or "" when the proxy was given as a URL.
	ID string
	// Line is the 1-based line of a proxy file the preflight command
	// read, else 0.
	Line int
	// Err says what is wrong: a malformed URL, an unsupported scheme, no
	// host, a bad port, an empty, duplicate or reserved ID, or an error
	// from package egress.
	Err error
}

// Error describes the fault without the proxy's credentials.
func (e *InvalidProxyError) Error() string {
	var b strings.Builder
	b.WriteString("probe: proxy")
	if e.Line > 0 {
		fmt.Fprintf(&b, " on line %d", e.Line)
	}
	if e.ID != "" {
		fmt.Fprintf(&b, " %q", e.ID)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *InvalidProxyError) Unwrap() error { return e.Err }
