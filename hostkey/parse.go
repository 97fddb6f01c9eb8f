package hostkey

import (
	"fmt"
	"net/url"
	"strings"
)

// Parse returns the key under mode of what a person types for a host: a
// host ("example.com"), a host and port ("example.com:8080", "[::1]:8080")
// or an absolute URL ("https://example.com/page?q=1"). It is the key the
// chain gives the URL's (or the host's) requests, so an operator's
// "https://Example.com:443/x" and the chain's "example.com" agree. A key
// is its own key: Parse(Parse(s)) is Parse(s).
//
// Parse returns the errors of Of, and one wrapping ErrInvalidHost for a
// URL that does not parse or for a host followed by a path, query,
// fragment or userinfo but no scheme. Errors do not repeat s.
func Parse(s string, mode Mode) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ErrEmptyHost
	}
	if i := strings.Index(s, "://"); i > 0 {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("%w: not a URL", ErrInvalidHost)
		}
		return Of(u, mode)
	}
	if strings.ContainsAny(s, "/?#@ \t") {
		return "", fmt.Errorf("%w: neither a host[:port] nor a URL", ErrInvalidHost)
	}
	return Of(&url.URL{Host: s}, mode)
}
