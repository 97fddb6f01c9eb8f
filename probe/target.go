package probe

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/egresskit/egresskit/hostkey"
)

// Limits on input, checked before any request is sent.
const (
	// MaxURLLength is the longest target or proxy URL accepted, in bytes.
	MaxURLLength = 8 << 10
	// MaxLineLength is the longest line accepted by ParseTargets and
	// ParseProxies, in bytes.
	MaxLineLength = MaxURLLength + 1<<10
	// MaxProbes is the largest number of probes one Run sends (targets,
	// times egresses in matrix mode).
	MaxProbes = 100_000
)

// Input errors. They come wrapped in a *TargetError or *InvalidProxyError
// that says which input was at fault; match them with errors.Is.
var (
	// ErrNoTargets: the target list is empty.
	ErrNoTargets = errors.New("probe: no targets")
	// ErrNoProxies: a proxy list is empty.
	ErrNoProxies = errors.New("probe: no proxies")
	// ErrTooManyProbes: the run would send more than MaxProbes probes.
	ErrTooManyProbes = errors.New("probe: too many probes")
	// ErrMalformedURL: the URL does not parse.
	ErrMalformedURL = errors.New("malformed url")
	// ErrUnsupportedScheme: a target is not http or https, or a proxy not
	// http, https, socks5 or socks5h.
	ErrUnsupportedScheme = errors.New("unsupported scheme")
	// ErrMissingHost: the URL has no host.
	ErrMissingHost = errors.New("missing host")
	// ErrBadPort: the port is not a number from 1 to 65535.
	ErrBadPort = errors.New("bad port")
	// ErrTooLong: a URL longer than MaxURLLength or a line longer than
	// MaxLineLength.
	ErrTooLong = errors.New("too long")
	// ErrSyntax: a line of a target or proxy file has too many fields.
	ErrSyntax = errors.New("syntax error")
	// ErrUnknownEgress: a target names an endpoint ID that is not among
	// Options.Proxies.
	ErrUnknownEgress = errors.New("unknown egress")
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

// TargetError reports an invalid target. It never contains credentials.
type TargetError struct {
	// Index is the position of the target in the list passed to Run or
	// returned by ParseTargets (0-based).
	Index int
	// Line is the 1-based line of the input for ParseTargets, else 0.
	Line int
	// URL is the redacted target URL, or "" when it cannot be shown.
	URL string
	// Err is one of the input errors above, possibly with detail.
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
	// Line is the 1-based line of the input for ParseProxies, else 0.
	Line int
	// Err is one of the input errors above, or an error from package
	// egress.
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

// parseTargetURL validates an absolute http(s) URL and returns it with its
// host key (package hostkey, by host: the key the chain keeps per-host
// state under, so a report's hosts name the same hosts as the chain).
func parseTargetURL(s string) (*url.URL, string, error) {
	if len(s) > MaxURLLength {
		return nil, "", fmt.Errorf("%w: url of %d bytes (limit %d)", ErrTooLong, len(s), MaxURLLength)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, "", ErrMalformedURL
	}
	switch u.Scheme {
	case "http", "https":
	case "":
		return nil, "", fmt.Errorf("%w: no scheme (want http:// or https://)", ErrUnsupportedScheme)
	default:
		return nil, "", fmt.Errorf("%w %q (want http or https)", ErrUnsupportedScheme, u.Scheme)
	}
	if err := checkHostPort(u); err != nil {
		return nil, "", err
	}
	key, err := hostkey.Of(u, hostkey.ByHost)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrMalformedURL, err)
	}
	return u, key, nil
}

// checkHostPort checks that u has a host and, if present, a valid port.
func checkHostPort(u *url.URL) error {
	if u.Opaque != "" || u.Hostname() == "" {
		return ErrMissingHost
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w %q", ErrBadPort, p)
		}
	}
	return nil
}

// parseProxyURL validates a proxy URL by the rules of package egress
// (without a port, 80, 443 and 1080 are used); "direct" yields nil, nil.
func parseProxyURL(s string) (*url.URL, error) {
	if s == "direct" {
		return nil, nil
	}
	if len(s) > MaxURLLength {
		return nil, fmt.Errorf("%w: url of %d bytes (limit %d)", ErrTooLong, len(s), MaxURLLength)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, ErrMalformedURL
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("%w %q (want http, https, socks5 or socks5h)", ErrUnsupportedScheme, u.Scheme)
	}
	if err := checkHostPort(u); err != nil {
		return nil, err
	}
	return u, nil
}

// isProxyURL reports whether an Egress value is a proxy URL rather than an
// endpoint ID.
func isProxyURL(s string) bool {
	return s == "direct" || strings.Contains(s, "://")
}
