package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/egresskit/egresskit/egress"
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

// Input errors. They come wrapped in a *TargetError or *ProxyError that
// says which input was at fault; match them with errors.Is.
var (
	// ErrNoTargets: the target list is empty.
	ErrNoTargets = errors.New("probe: no targets")
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
	// "socks5://host:port"), or "direct". Empty means: in matrix mode every
	// egress; otherwise the next of Options.Proxies in turn, or direct when
	// there are none.
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

func (e *TargetError) Unwrap() error { return e.Err }

// ProxyError reports an invalid proxy. It names the proxy by its endpoint
// ID or line, never by its credentials.
type ProxyError struct {
	// ID is the endpoint ID, or "" when the proxy was given as a URL.
	ID string
	// Line is the 1-based line of the input for ParseProxies, else 0.
	Line int
	// Err is one of the input errors above, or an error from package
	// egress.
	Err error
}

func (e *ProxyError) Error() string {
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

func (e *ProxyError) Unwrap() error { return e.Err }

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

// lineError carries the line number of an input error out of lines.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return e.err.Error() }

// lines calls fn for every non-blank, non-comment ('#') line of r with its
// 1-based number and its whitespace-separated fields. A line longer than
// MaxLineLength stops the scan with a *lineError naming it; errors from fn
// are returned as they are; a read error is returned wrapped.
func lines(r io.Reader, fn func(line int, fields []string) error) error {
	br := bufio.NewReaderSize(r, 4096)
	buf := make([]byte, 0, 256)
	for n := 1; ; n++ {
		buf = buf[:0]
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if len(buf)+len(frag) > MaxLineLength+1 { // +1: the newline
				return &lineError{line: n, err: fmt.Errorf("%w: line longer than %d bytes", ErrTooLong, MaxLineLength)}
			}
			buf = append(buf, frag...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("probe: reading line %d: %w", n, err)
		}
		line := bytes.TrimSpace(buf)
		if len(line) > 0 && line[0] != '#' {
			if ferr := fn(n, strings.Fields(string(line))); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// ParseTargets reads a target list: one target per line, "URL" or
// "URL EGRESS" separated by white space, where EGRESS is a proxy URL, an
// endpoint ID or "direct". Blank lines and lines starting with '#' are
// skipped. Every URL is validated as Run would validate it.
//
// Errors name the 1-based line: a *TargetError wrapping ErrTooLong,
// ErrSyntax, ErrMalformedURL, ErrUnsupportedScheme, ErrMissingHost or
// ErrBadPort; a *ProxyError for a malformed proxy URL in the EGRESS field;
// ErrNoTargets when there is no target at all; ErrTooManyProbes past
// MaxProbes lines.
func ParseTargets(r io.Reader) ([]Target, error) {
	var targets []Target
	err := lines(r, func(n int, f []string) error {
		if len(f) > 2 {
			return &TargetError{Index: len(targets), Line: n, Err: fmt.Errorf("%w: %d fields (want URL [EGRESS])", ErrSyntax, len(f))}
		}
		if len(targets) == MaxProbes {
			return fmt.Errorf("%w: more than %d targets", ErrTooManyProbes, MaxProbes)
		}
		if _, _, err := parseTargetURL(f[0]); err != nil {
			return &TargetError{Index: len(targets), Line: n, URL: showURL(f[0]), Err: err}
		}
		t := Target{URL: f[0]}
		if len(f) == 2 {
			t.Egress = f[1]
			if isProxyURL(t.Egress) {
				if _, err := parseProxyURL(t.Egress); err != nil {
					return &ProxyError{Line: n, Err: err}
				}
			}
		}
		targets = append(targets, t)
		return nil
	})
	var le *lineError
	if errors.As(err, &le) {
		return nil, &TargetError{Index: len(targets), Line: le.line, Err: le.err}
	}
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, ErrNoTargets
	}
	return targets, nil
}

// showURL returns the redacted form of a URL for an error message, or ""
// when s is too long or does not parse.
func showURL(s string) string {
	if len(s) > 256 {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return redactURL(u)
}

// ErrNoProxies: a proxy list is empty.
var ErrNoProxies = errors.New("probe: no proxies")

// ParseProxies reads a proxy list: one endpoint per line, "PROXY-URL" or
// "ID PROXY-URL", where PROXY-URL is an http, https, socks5 or socks5h URL
// (credentials allowed) or "direct". Blank lines and lines starting with
// '#' are skipped. An endpoint without an ID is named by its URL without
// credentials. The URLs are validated as package egress validates them.
//
// Errors name the 1-based line: a *ProxyError wrapping ErrTooLong,
// ErrSyntax (too many fields, a duplicate ID), ErrMalformedURL,
// ErrUnsupportedScheme, ErrMissingHost or ErrBadPort; ErrNoProxies when
// there is none.
func ParseProxies(r io.Reader) ([]egress.Endpoint, error) {
	var eps []egress.Endpoint
	seen := map[string]bool{}
	err := lines(r, func(n int, f []string) error {
		var id, raw string
		switch len(f) {
		case 1:
			raw = f[0]
		case 2:
			id, raw = f[0], f[1]
		default:
			return &ProxyError{Line: n, Err: fmt.Errorf("%w: %d fields (want [ID] PROXY-URL)", ErrSyntax, len(f))}
		}
		e, err := newExit(id, raw)
		if err != nil {
			return &ProxyError{ID: id, Line: n, Err: err}
		}
		if id == "" {
			id = e.shown
			if e.proxy == nil {
				id = direct
			}
		}
		if seen[id] {
			return &ProxyError{ID: id, Line: n, Err: fmt.Errorf("%w: duplicate ID", ErrSyntax)}
		}
		if len(eps) == MaxProbes {
			return fmt.Errorf("%w: more than %d proxies", ErrTooManyProbes, MaxProbes)
		}
		seen[id] = true
		eps = append(eps, egress.Endpoint{ID: id, Proxy: raw})
		return nil
	})
	var le *lineError
	if errors.As(err, &le) {
		return nil, &ProxyError{Line: le.line, Err: le.err}
	}
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, ErrNoProxies
	}
	return eps, nil
}
