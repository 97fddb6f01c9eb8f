package egress

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/egresskit/egresskit/internal/configerr"
)

// The reasons of configuration errors, in a *configError.
var (
	// errEmptyPool: the pool has no endpoint. Use Proxy "direct" for a
	// pool that may send without a proxy.
	errEmptyPool = errors.New("egress: no endpoints")
	// errEmptyID: an endpoint has no ID.
	errEmptyID = errors.New("egress: endpoint without ID")
	// errDuplicateID: two endpoints share an ID.
	errDuplicateID = errors.New("egress: duplicate endpoint ID")
	// errUnknownScheme: the proxy URL's scheme is not http, https,
	// socks5 or socks5h.
	errUnknownScheme = errors.New("egress: unknown proxy scheme")
	// errNoHost: the proxy URL names no host.
	errNoHost = errors.New("egress: proxy URL has no host")
	// errBadPort: the proxy URL's port is outside 1–65535.
	errBadPort = errors.New("egress: proxy port out of range")
	// errMalformedProxy: the proxy URL cannot be parsed, lacks its
	// "scheme://", or carries credentials its scheme cannot use.
	errMalformedProxy = errors.New("egress: malformed proxy URL")
	// errBadCapacity: an endpoint's Capacity is negative.
	errBadCapacity = errors.New("egress: negative capacity")
	// errBadRate: an endpoint's Rate is negative, NaN or infinite.
	errBadRate = errors.New("egress: rate not a finite number >= 0")
	// errBadWeight: an endpoint's Weight is negative, NaN or infinite.
	errBadWeight = errors.New("egress: weight must be finite and not negative")
	// errBadSetting: a pool-level setting is out of range.
	errBadSetting = errors.New("egress: setting out of range")
)

// Errors of selection and of RoundTrip.
var (
	// ErrUnknownEndpoint: no endpoint has the given ID.
	ErrUnknownEndpoint = errors.New("egress: unknown endpoint")
	// ErrBindingUnavailable: the endpoint a request is bound to (see
	// WithBinding) is absent, draining or quarantined. The request was
	// not sent; it is never moved to another endpoint.
	ErrBindingUnavailable = errors.New("egress: bound endpoint unavailable")
	// ErrNoEndpoint: every endpoint is quarantined or draining, or the pool
	// is empty. From RoundTrip it comes with the last failure of the
	// quarantined endpoints, which errors.As finds as a *ProxyError (and
	// errors.Is as its cause: ErrProxyAuthRejected, an x509 error, ...).
	ErrNoEndpoint = errors.New("egress: no usable endpoint")
	// ErrAtCapacity: every usable endpoint is at capacity, and the caller
	// asked not to wait (Select, or Config.FailWhenFull).
	ErrAtCapacity = errors.New("egress: every usable endpoint is at capacity")
	// ErrClosed: the pool has been closed.
	ErrClosed = errors.New("egress: pool closed")
)

// Causes of a *ProxyError of Kind "auth", in its Err field.
var (
	// ErrProxyAuthRequired: the proxy wants credentials and the endpoint's
	// proxy URL has none.
	ErrProxyAuthRequired = errors.New("egress: proxy wants credentials, none configured")
	// ErrProxyAuthRejected: the proxy refused the endpoint's credentials.
	ErrProxyAuthRejected = errors.New("egress: proxy rejected the credentials")
)

// notSentError wraps an error of selection (ErrBindingUnavailable,
// ErrNoEndpoint, ErrAtCapacity, ErrUnknownEndpoint, ErrClosed, a *RuleError)
// returned by RoundTrip: the request never left, so it says nothing about
// the target.
// Layers above recognise it by its NotSent method.
type notSentError struct {
	Err error
}

func (e *notSentError) Error() string { return e.Err.Error() }

// Unwrap returns the selection error.
func (e *notSentError) Unwrap() error { return e.Err }

// NotSent reports true: the request was not sent.
func (e *notSentError) NotSent() bool { return true }

// configError reports an invalid endpoint or setting: errors.Is matches
// egresskit.ErrInvalidConfig. It names the endpoint by ID and never
// contains the proxy's credentials.
type configError struct {
	// EndpointID is the offending endpoint, or "" for a pool-level setting.
	EndpointID string
	// Field is the offending field, e.g. "Proxy", "Capacity",
	// "Health.Smoothing", or "Endpoints[3].ID" when the ID itself is missing.
	Field string
	// Value is the offending value when it is not secret (a scheme, a
	// port, a number), else "".
	Value string
	// Err is the reason: a malformed proxy URL, a duplicate ID, a port
	// out of range, ... (its message says which).
	Err error
}

func (e *configError) Error() string {
	var b strings.Builder
	b.WriteString("egress: ")
	if e.EndpointID != "" {
		fmt.Fprintf(&b, "endpoint %q: ", e.EndpointID)
	} else if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "egress: "))
	}
	if e.Value != "" {
		fmt.Fprintf(&b, " %q", e.Value)
	}
	return b.String()
}

// Unwrap returns the reason.
func (e *configError) Unwrap() error { return e.Err }

// Is reports whether target is egresskit.ErrInvalidConfig, which every
// configError is.
func (e *configError) Is(target error) bool { return target == configerr.ErrInvalid }

// The kinds of egress failure, the values of ProxyError.Kind.
const (
	failDial        = "dial"
	failTLS         = "tls"
	failAuth        = "auth"
	failHandshake   = "handshake"
	failProxy       = "proxy"
	failDestination = "destination"
)

// ProxyError is an error of the egress path itself, returned by RoundTrip
// instead of the proxy's response or Go's untyped proxy error. It never
// contains the proxy's credentials. Its Kind is one of:
//
//   - "dial": the proxy could not be reached (refused, timeout,
//     unreachable).
//   - "tls": the TLS handshake with an https:// proxy failed. When the
//     proxy's certificate is not trusted (Err wraps an x509 error),
//     the endpoint is quarantined at once.
//   - "auth": the proxy rejected our credentials, or wanted some and
//     got none: HTTP 407; a 401 from the proxy itself (any 401 to
//     CONNECT; on an absolute-form request, a 401 carrying only
//     Proxy-Authenticate, or one marked as the proxy's own page, as
//     tinyproxy answers a wrong password); SOCKS authentication
//     failure or no acceptable method. Err is ErrProxyAuthRequired or
//     ErrProxyAuthRejected. The endpoint is quarantined at once:
//     credentials do not heal by themselves.
//   - "handshake": the proxy broke its protocol (a malformed SOCKS
//     reply, a SOCKS command or address type it refuses).
//   - "proxy": the proxy answered with an error of its own: a non-200
//     CONNECT response, or a Proxy-Status error that is the proxy's
//     (dns_timeout, proxy_internal_error, connection_limit_reached,
//     ...), or a SOCKS general failure.
//   - "destination": the proxy reports that it could not reach the
//     target (Proxy-Status connection_refused,
//     destination_unavailable, ...; SOCKS host unreachable, connection
//     refused). The endpoint did its job; this is not held against it.
type ProxyError struct {
	// EndpointID is the endpoint that failed.
	EndpointID string
	// Kind says how the endpoint failed, for a crawler author or an
	// operator deciding what to fix: "dial", "tls", "auth", "handshake",
	// "proxy" or "destination" (listed in the type's documentation). All kinds but
	// "destination" count against the endpoint's health.
	Kind string
	// Status is the status code of the proxy's own response (407, 502,
	// ...), or 0 when the proxy sent none.
	Status int
	// ProxyStatus is the RFC 9209 error type the proxy reported in its
	// Proxy-Status header, e.g. "dns_timeout", or "".
	ProxyStatus string
	// ProxyCode is the proxy's own error code when it sent one in a
	// product-specific form: squid's X-Squid-Error code (e.g.
	// "ERR_CONNECT_FAIL"), or tinyproxy's reason phrase (e.g. "Unable to
	// connect"); else "".
	ProxyCode string
	// Err is the underlying dial, TLS or SOCKS error, or nil.
	Err error
}

func (e *ProxyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "egress: endpoint %q: ", e.EndpointID)
	switch e.Kind {
	case failDial:
		b.WriteString("proxy unreachable")
	case failTLS:
		b.WriteString("TLS handshake with proxy failed")
	case failAuth:
		b.WriteString("proxy authentication failed")
	case failHandshake:
		b.WriteString("proxy handshake failed")
	case failDestination:
		b.WriteString("proxy could not reach the target")
	default:
		b.WriteString("proxy error")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (status %d)", e.Status)
	}
	if e.ProxyStatus != "" {
		fmt.Fprintf(&b, " (Proxy-Status error=%s)", e.ProxyStatus)
	}
	if e.ProxyCode != "" {
		fmt.Fprintf(&b, " (%q)", e.ProxyCode)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "egress: "))
	}
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *ProxyError) Unwrap() error { return e.Err }

// hard reports whether the failure will not heal by waiting: refused
// credentials, or a proxy certificate that is not trusted.
func (e *ProxyError) hard() bool {
	if e.Kind == failAuth {
		return true
	}
	var cve *tls.CertificateVerificationError
	return e.Kind == failTLS && errors.As(e.Err, &cve)
}

// noEndpointError is ErrNoEndpoint with the last failure of the endpoints
// that are now quarantined: errors.Is matches ErrNoEndpoint, errors.As
// finds the *ProxyError and, through it, its cause.
type noEndpointError struct {
	cause *ProxyError
}

func (e *noEndpointError) Error() string {
	return ErrNoEndpoint.Error() + " (last failure: " + strings.TrimPrefix(e.cause.Error(), "egress: ") + ")"
}

// Unwrap returns ErrNoEndpoint and the last failure.
func (e *noEndpointError) Unwrap() []error { return []error{ErrNoEndpoint, e.cause} }

// EndpointFault reports whether the failure counts against the endpoint:
// true for every Kind but "destination".
func (e *ProxyError) EndpointFault() bool { return e.Kind != failDestination }
