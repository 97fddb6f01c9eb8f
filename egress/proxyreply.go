package egress

import (
	"net/http"
	"strings"
)

// Telling a proxy's own answers from the target's.
//
// A response to CONNECT other than 200 is always the proxy's: the target
// has not been reached yet. A response to an absolute-form request (an
// http:// target through an HTTP proxy) is the target's unless something
// marks it as the proxy's own, and then the mark also says whom the proxy
// blames:
//
//   - RFC 9209 Proxy-Status with an error parameter (see proxyStatusKind);
//   - squid's X-Squid-Error header, present on squid's own error pages and
//     only there (see squidErrorKind); checked against squid 5.7;
//   - tinyproxy's own pages, which carry "Server: tinyproxy/..." and no Via
//     header, while every response it forwards gets a Via; checked against
//     tinyproxy 1.11.1, which answers a wrong password with 401 and
//     WWW-Authenticate (407 only when no credentials are sent) and a
//     target it cannot reach with "500 Unable to connect".
//
// Refusals of credentials are egress faults whatever their form: 407; a 401
// carrying only Proxy-Authenticate; a 401 marked as the proxy's own. On
// plain http a target could forge these marks, as it could forge any
// byte of its answer; it would only move its own traffic to another
// endpoint, at the price of failed attempts.

// verdict is what a proxy's own answer says.
type verdict struct {
	kind string
	ps   string // Proxy-Status error type, if any
	code string // X-Squid-Error code or tinyproxy's reason phrase, if any
}

// proxyVerdict reports whether resp is marked as the proxy's own answer,
// and whom it blames.
func proxyVerdict(resp *http.Response) (verdict, bool) {
	// net/http canonicalises the keys of a received header: index the map
	// directly, as this runs on every response through an HTTP proxy.
	h := resp.Header
	if ps, ok := parseProxyStatus(h["Proxy-Status"]); ok && ps.error != "" {
		if k, known := proxyStatusKind(ps.error); known {
			return verdict{kind: k, ps: ps.error}, true
		}
	}
	if v := first(h["X-Squid-Error"]); v != "" {
		code, _, _ := strings.Cut(v, " ")
		if k, known := squidErrorKind(code); known {
			return verdict{kind: k, code: code}, true
		}
		return verdict{kind: failProxy, code: code}, true
	}
	if strings.HasPrefix(first(h["Server"]), "tinyproxy/") && len(h["Via"]) == 0 {
		_, reason, _ := strings.Cut(resp.Status, " ")
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusProxyAuthRequired:
			return verdict{kind: failAuth, code: reason}, true
		case reason == "Unable to connect":
			return verdict{kind: failDestination, code: reason}, true
		}
		return verdict{kind: failProxy, code: reason}, true
	}
	return verdict{}, false
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// squidErrorKind says whom a squid error page blames, by its X-Squid-Error
// code. It reports false for codes about our own request (ERR_INVALID_URL,
// ERR_UNSUP_REQ, ...), which blame no one.
func squidErrorKind(code string) (string, bool) {
	switch code {
	case "ERR_CACHE_ACCESS_DENIED": // 407: credentials missing or wrong
		return failAuth, true
	case "ERR_ACCESS_DENIED", "ERR_FORWARDING_DENIED", "ERR_CACHE_MGR_ACCESS_DENIED",
		"ERR_ACL_TIME_QUOTA_EXCEEDED", "ERR_SHUTTING_DOWN", "ERR_SOCKET_FAILURE",
		"ERR_ICAP_FAILURE", "ERR_NO_RELAY", "ERR_CANNOT_FORWARD", "ERR_GATEWAY_FAILURE",
		"ERR_TOO_BIG":
		return failProxy, true
	case "ERR_CONNECT_FAIL", "ERR_DNS_FAIL", "ERR_READ_TIMEOUT", "ERR_LIFETIME_EXP",
		"ERR_READ_ERROR", "ERR_WRITE_ERROR", "ERR_ZERO_SIZE_OBJECT", "ERR_INVALID_RESP",
		"ERR_SECURE_CONNECT_FAIL":
		return failDestination, true
	}
	return "", false
}

// authCause is the error of a refusal of credentials: none were sent, or
// the ones sent were refused.
func authCause(sentCredentials bool) error {
	if sentCredentials {
		return ErrProxyAuthRejected
	}
	return ErrProxyAuthRequired
}

// connectFailure turns the proxy's non-200 answer to CONNECT into a
// *ProxyError. Go would return only the status text.
func connectFailure(id string, resp *http.Response, sentCredentials bool) *ProxyError {
	pe := &ProxyError{EndpointID: id, Kind: failProxy, Status: resp.StatusCode}
	if v, ok := proxyVerdict(resp); ok {
		pe.Kind, pe.ProxyStatus, pe.ProxyCode = v.kind, v.ps, v.code
	}
	if resp.StatusCode == http.StatusProxyAuthRequired || resp.StatusCode == http.StatusUnauthorized {
		pe.Kind = failAuth
	}
	if pe.Kind == failAuth {
		pe.Err = authCause(sentCredentials)
	}
	return pe
}

// forwardedFailure reports whether a response to an absolute-form request
// sent through an HTTP proxy is the proxy's own refusal of our credentials
// or an error it blames on itself. Any other response — whatever its
// status, and a proxy's report that it could not reach the target
// included — is the target's and goes to the caller.
func forwardedFailure(id string, resp *http.Response, sentCredentials bool) *ProxyError {
	h := resp.Header
	v, own := proxyVerdict(resp)
	switch {
	case resp.StatusCode == http.StatusProxyAuthRequired,
		resp.StatusCode == http.StatusUnauthorized && h.Get("Proxy-Authenticate") != "" && h.Get("Www-Authenticate") == "",
		resp.StatusCode == http.StatusUnauthorized && own && v.kind == failAuth:
		return &ProxyError{EndpointID: id, Kind: failAuth, Status: resp.StatusCode,
			ProxyStatus: v.ps, ProxyCode: v.code, Err: authCause(sentCredentials)}
	case own && v.kind != failDestination && v.kind != failAuth:
		return &ProxyError{EndpointID: id, Kind: v.kind, Status: resp.StatusCode, ProxyStatus: v.ps, ProxyCode: v.code}
	}
	return nil
}
