package egress

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Endpoint is one way out: a proxy or the direct route.
type Endpoint struct {
	// ID names the endpoint in choices, errors, telemetry and the
	// Pool's methods. It must be unique in the pool and non-empty.
	ID string
	// Proxy is the proxy URL: http://host:port, https://host:port (TLS
	// to the proxy), socks5://host:port (the target's name is resolved
	// locally) or socks5h://host:port (the proxy resolves it), each with
	// optional user:password@ credentials. "" or "direct" means no proxy.
	// Without a port, 80, 443 and 1080 are used.
	Proxy string
	// Labels are free-form metadata, e.g. "region": "eu",
	// "kind": "residential". Rules (Config.Rules) select endpoints by
	// them; otherwise they are only reported.
	Labels map[string]string
	// Capacity is the most requests the endpoint carries at once; 0 means
	// no limit. Within a host's subset, requests go to the endpoint with
	// the smallest share of its capacity in use; an endpoint without a
	// limit counts as never loaded.
	Capacity int
	// Rate is the most requests per second the endpoint is sent, as a
	// proxy plan caps requests per port; 0 means no limit. An endpoint
	// over its rate is treated as one at its Capacity: the request goes to
	// another endpoint of the host's subset, or waits, by the same rules.
	// Each request takes one token of a golang.org/x/time/rate Limiter
	// with a burst of 1, so no two requests are sent closer than 1/Rate
	// seconds apart. The limit is this process's: processes sharing a
	// proxy plan divide its rate among them.
	Rate float64
	// Weight scales the share of hosts the endpoint serves: an endpoint
	// of weight 2 is first in the subset of about twice as many hosts as
	// one of weight 1 (weighted rendezvous hashing). Use it for an
	// endpoint's capacity or cost. 0 means 1; it must be finite and not
	// negative.
	Weight float64
}

// String returns the endpoint's ID and its proxy URL without credentials.
func (e Endpoint) String() string {
	return e.ID + " " + redactProxy(e.Proxy)
}

// GoString is the %#v form of the endpoint, with the proxy's credentials
// removed.
func (e Endpoint) GoString() string {
	return fmt.Sprintf("egress.Endpoint{ID:%q, Proxy:%q, Labels:%#v, Capacity:%d, Rate:%g, Weight:%g}",
		e.ID, redactProxy(e.Proxy), e.Labels, e.Capacity, e.Rate, e.Weight)
}

// LogValue implements slog.LogValuer: the endpoint is logged with its
// proxy's credentials removed.
func (e Endpoint) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", e.ID),
		slog.String("proxy", redactProxy(e.Proxy)),
		slog.Any("labels", e.Labels),
		slog.Int("capacity", e.Capacity),
		slog.Float64("weight", e.Weight),
	)
}

// MarshalJSON encodes the endpoint for logs and reports, with its proxy's
// credentials removed; credentials do not survive a round trip through
// JSON.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	type plain Endpoint // without methods
	p := plain(e)
	p.Proxy = redactProxy(e.Proxy)
	return json.Marshal(p)
}

// proxyKind is the parsed scheme of an endpoint.
type proxyKind uint8

const (
	kindDirect proxyKind = iota
	kindHTTP
	kindHTTPS
	kindSOCKS5
	kindSOCKS5H
)

// isHTTPProxy reports whether requests go through an HTTP proxy
// (absolute-form for http targets, CONNECT for https targets).
func (k proxyKind) isHTTPProxy() bool { return k == kindHTTP || k == kindHTTPS }

// parsedProxy is a validated proxy URL.
type parsedProxy struct {
	kind     proxyKind
	url      *url.URL // full URL with credentials and an explicit port; nil for direct
	addr     string   // host:port of the proxy
	redacted string   // scheme://host:port, no credentials
}

// isDirect reports whether s denotes the direct route: "" or "direct" (in
// any case).
func isDirect(s string) bool {
	return s == "" || strings.EqualFold(s, "direct")
}

// parseProxy validates a proxy URL. Its errors are *configError values that
// name the endpoint and never contain the URL's credentials: the parser's
// own messages are dropped because they quote the raw URL, and no part of
// a URL whose credentials may have spilled into its path is quoted.
//
// It rejects as malformed: surrounding spaces, a URL
// without "scheme://", a path other than "/", a query or a fragment (an
// unencoded '/', '?' or '#' in a password produces these), and SOCKS
// credentials outside RFC 1929's lengths. The scheme is case-insensitive
// (RFC 3986) and is normalised to lower case.
func parseProxy(id, raw string) (parsedProxy, error) {
	fail := func(err error, value string) (parsedProxy, error) {
		return parsedProxy{}, &configError{EndpointID: id, Field: "Proxy", Value: value, Err: err}
	}
	malformed := func(why string) (parsedProxy, error) {
		return fail(fmt.Errorf("%w: %s", errMalformedProxy, why), "")
	}
	if isDirect(raw) {
		return parsedProxy{kind: kindDirect, redacted: "direct"}, nil
	}
	if strings.TrimSpace(raw) != raw {
		return malformed("surrounding spaces")
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return malformed("cannot parse (percent-encode '/', '?', '#', '@' and ':' in credentials)")
		}
		return malformed("cannot parse")
	}
	if u.Opaque != "" || !strings.Contains(raw, "://") {
		// "user:pass@host" or "host:port" parse as a scheme and an
		// opaque part; the "scheme" may be a username, so it is not quoted.
		return malformed(`missing "scheme://"`)
	}
	if strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") {
		// The credentials hold an unencoded '/', '?' or '#': the parser
		// cut the password and took part of it for the host.
		return malformed("unencoded '/', '?' or '#' in credentials; percent-encode them")
	}
	switch {
	case u.Path != "" && u.Path != "/":
		return malformed("a proxy URL has no path")
	case u.RawQuery != "" || u.ForceQuery:
		return malformed("a proxy URL has no query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return malformed("a proxy URL has no fragment")
	}
	var kind proxyKind
	defPort := ""
	switch strings.ToLower(u.Scheme) {
	case "http":
		kind, defPort = kindHTTP, "80"
	case "https":
		kind, defPort = kindHTTPS, "443"
	case "socks5":
		kind, defPort = kindSOCKS5, "1080"
	case "socks5h":
		kind, defPort = kindSOCKS5H, "1080"
	case "":
		return fail(errUnknownScheme, "")
	default:
		return fail(errUnknownScheme, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fail(errNoHost, "")
	}
	port := u.Port()
	if port == "" {
		port = defPort
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fail(errBadPort, port)
	}
	if u.User != nil && (kind == kindSOCKS5 || kind == kindSOCKS5H) {
		// RFC 1929: a username of 1–255 bytes, a password of at most 255.
		pw, _ := u.User.Password()
		if n := len(u.User.Username()); n == 0 || n > 255 || len(pw) > 255 {
			return malformed("SOCKS5 credentials need a user of 1-255 bytes and a password of at most 255")
		}
	}
	addr := net.JoinHostPort(host, port)
	full := &url.URL{Scheme: strings.ToLower(u.Scheme), User: u.User, Host: addr}
	return parsedProxy{
		kind:     kind,
		url:      full,
		addr:     addr,
		redacted: full.Scheme + "://" + addr,
	}, nil
}

// redactProxy renders a proxy URL without credentials, for String methods
// of unvalidated endpoints. A URL that does not validate is shown as
// "<malformed proxy URL>": its host may hold a piece of a password.
func redactProxy(raw string) string {
	pp, err := parseProxy("", raw)
	if err != nil {
		return "<malformed proxy URL>"
	}
	return pp.redacted
}

// validateEndpoint checks everything about e but the uniqueness of its ID.
// i is its index in Config.Endpoints, used to name an endpoint without ID.
func validateEndpoint(e Endpoint, i int) (parsedProxy, error) {
	if e.ID == "" {
		field := "Endpoint.ID"
		if i >= 0 {
			field = fmt.Sprintf("Endpoints[%d].ID", i)
		}
		return parsedProxy{}, &configError{Field: field, Err: errEmptyID}
	}
	if e.Capacity < 0 {
		return parsedProxy{}, &configError{EndpointID: e.ID, Field: "Capacity", Value: strconv.Itoa(e.Capacity), Err: errBadCapacity}
	}
	if r := e.Rate; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return parsedProxy{}, &configError{EndpointID: e.ID, Field: "Rate", Value: strconv.FormatFloat(r, 'g', -1, 64), Err: errBadRate}
	}
	if w := e.Weight; w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
		return parsedProxy{}, &configError{EndpointID: e.ID, Field: "Weight", Value: strconv.FormatFloat(w, 'g', -1, 64), Err: errBadWeight}
	}
	return parseProxy(e.ID, e.Proxy)
}

// cloneLabels copies labels so that the caller's map can change freely.
func cloneLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
