// Package probeinput validates the input of a preflight check: the limits
// on URLs and lines, the errors an invalid target or proxy wraps, and the
// checks of target and proxy URLs. Package probe validates what Run is
// given with it, and the preflight command's parsers (package
// preflightinput) validate the lines they read with it, so that a file the
// parser accepts is a list Run accepts.
package probeinput

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/egresskit/egresskit/hostkey"
)

// The defaults of probe.Options, which the preflight command's flags show
// as theirs.
const (
	// DefaultDeadline bounds a whole Run.
	DefaultDeadline = 10 * time.Second
	// DefaultConcurrency is the number of probes in flight at once.
	DefaultConcurrency = 64
	// DefaultMaxRedirects is the number of redirects a probe follows.
	DefaultMaxRedirects = 5
	// DefaultPerHost is the number of probes in flight to one host.
	DefaultPerHost = 2
	// DefaultWorkers is the crawl's planned concurrency.
	DefaultWorkers = 16
)

// Limits on input, checked before any request is sent.
const (
	// MaxURLLength is the longest target or proxy URL accepted, in bytes.
	MaxURLLength = 8 << 10
	// MaxLineLength is the longest line of a target or proxy file
	// accepted, in bytes.
	MaxLineLength = MaxURLLength + 1<<10
	// MaxProbes is the largest number of probes one Run sends (targets,
	// times egresses in matrix mode), and of lines in a target or proxy
	// file.
	MaxProbes = 100_000
)

// Input errors. They come wrapped in a *probe.TargetError or
// *probe.InvalidProxyError that says which input was at fault.
var (
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
	// ErrSyntax: a line of a target or proxy file has too many fields, or
	// an endpoint ID is empty, duplicate or reserved.
	ErrSyntax = errors.New("syntax error")
	// ErrUnknownEgress: a target names an endpoint ID that is not among
	// the proxies.
	ErrUnknownEgress = errors.New("unknown egress")
	// ErrExcludedEgress: the egress rule that governs a target's host
	// excludes the egress the target names, or every egress a non-matrix
	// run could send it through.
	ErrExcludedEgress = errors.New("excluded by egress rule")
)

// Direct is the egress without a proxy, as a target or proxy file and an
// endpoint ID name it.
const Direct = "direct"

// TargetURL validates an absolute http(s) URL and returns it with its host
// key (package hostkey, by host: the key the chain keeps per-host state
// under, so a report's hosts name the same hosts as the chain).
func TargetURL(s string) (*url.URL, string, error) {
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

// ProxyURL validates a proxy URL by the rules of package egress (without
// a port, 80, 443 and 1080 are used); "direct" yields nil, nil.
func ProxyURL(s string) (*url.URL, error) {
	if s == Direct {
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

// IsProxyURL reports whether an egress named by a target is a proxy URL
// (or "direct") rather than an endpoint ID.
func IsProxyURL(s string) bool {
	return s == Direct || strings.Contains(s, "://")
}

// ValidHeaderValue reports why v cannot be sent as an HTTP header field
// value (RFC 9110 section 5.5): it returns an error naming the first
// offending byte's position for a control character other than horizontal
// tab (CR and LF among them) or DEL, and nil otherwise. The error never
// contains v.
func ValidHeaderValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return fmt.Errorf("has a control character (0x%02x) at byte %d", c, i)
		}
	}
	return nil
}
