package telemetry

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Redacted replaces every secret value removed by a Redactor: the word an
// operator finds in logs, events and audit lines where a credential was.
const Redacted = "REDACTED"

// Redactor removes credentials from URLs, headers and error text. It is the
// one place where egresskit decides what is secret; every package redacts
// through it before a URL, header or error reaches a log, an event, a
// report or an error string.
//
// What it removes:
//
//   - URL userinfo (user and password), including proxy URLs;
//   - the values of query, fragment and path parameters whose names look
//     secret: names containing token, secret, passw, pwd, signature,
//     credential, session, sessid, apikey, api_key, authorization, cookie,
//     private, access_key or jwt, and names with a word equal to key, sig,
//     pass, code, auth, sid, otp, pin, pw, hmac or ticket (words split at
//     punctuation and lower-to-upper case changes, so "apiKey" and
//     "X-Amz-Signature" match and "keyword" and "author" do not),
//     compared case-insensitively, plus SecretParams;
//   - the values of the headers Authorization, Proxy-Authorization, Cookie,
//     Set-Cookie and of every header whose name looks secret by the same
//     rules (X-Api-Key, X-Auth-Token, ...), plus SecretHeaders;
//   - Bearer and Basic credentials in free text; in free text too, the
//     values of header lines with a secret name ("X-Api-Key: v",
//     "Cookie: prefs=v", "Authorization: Token v", "Authorization:
//     Digest ..."), of JSON members with a secret name ("password":"v"),
//     and of name=value pairs with spaces around "=" ("password = v").
//
// The zero Redactor is ready to use and applies the built-in rules: a
// crawler author redacting what it logs itself writes
// telemetry.Redactor{}.RedactError(err), or keeps one Redactor with extra
// rules and gives the same to the chain (egresskit.Config.Redactor). A
// Redactor is safe for concurrent use; do not change its fields while it
// is in use.
type Redactor struct {
	// SecretParams lists extra parameter names whose values are secret; a
	// parameter matches when its name contains one of them, ignoring case.
	// Nil adds none.
	SecretParams []string
	// SecretHeaders lists extra header names whose values are secret,
	// compared case-insensitively. Nil adds none.
	SecretHeaders []string
}

// RedactURL returns u as a string without userinfo and with the values of
// secret-looking parameters replaced by Redacted. A nil u yields "". The
// common case, a URL without userinfo and without '=' anywhere, costs one
// call to u.String.
func (r Redactor) RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	if u.User != nil {
		c := *u
		c.User = nil
		u = &c
	}
	s := u.String()
	if u.Opaque != "" {
		return r.RedactString(s)
	}
	if strings.IndexByte(s, '=') < 0 {
		return s
	}
	// u.String escapes '?' in the path, so the first '?' starts the query;
	// redact the path and the rest apart so a path parameter's value
	// cannot swallow the query.
	if q := strings.IndexByte(s, '?'); q >= 0 {
		return r.redactPairs(s[:q]) + r.redactPairs(s[q:])
	}
	return r.redactPairs(s)
}

// RedactURLString is RedactURL for a URL held as text. Text that does not
// parse as a URL is redacted as free text (RedactString).
func (r Redactor) RedactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return r.RedactString(s)
	}
	return r.RedactURL(u)
}

// RedactHeader returns a copy of h in which the values of secret headers
// are replaced by Redacted and URLs and secret parameters inside the other
// values are redacted as by RedactString. h itself is not changed; a nil h
// yields nil.
func (r Redactor) RedactHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		nv := make([]string, len(vs))
		secret := r.secretHeader(k)
		for i, v := range vs {
			if secret {
				nv[i] = Redacted
			} else {
				nv[i] = r.RedactString(v)
			}
		}
		out[k] = nv
	}
	return out
}

// RedactError returns the text of err with URL userinfo, secret parameter
// values and Bearer/Basic credentials removed. A nil err yields "".
// The URL of every *url.Error in err's chain is redacted as a URL first,
// so a secret survives neither in the URL nor in the wrapped text.
func (r Redactor) RedactError(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	for e := err; e != nil; {
		var ue *url.Error
		if !errors.As(e, &ue) {
			break
		}
		if ue.URL != "" {
			s = strings.ReplaceAll(s, ue.URL, r.RedactURLString(ue.URL))
		}
		e = ue.Err
	}
	return r.RedactString(s)
}

// RedactString removes credentials from free text: the userinfo of every
// URL in it ("scheme://user:pass@host"), the values of secret-looking
// name=value pairs, and Bearer or Basic credentials. Text without any of
// these is returned as is, without allocating.
func (r Redactor) RedactString(s string) string {
	if strings.Contains(s, "://") {
		s = redactUserinfo(s)
	}
	if strings.IndexByte(s, ':') >= 0 {
		s = r.redactHeaderLines(s)
		if strings.IndexByte(s, '"') >= 0 {
			s = r.redactJSON(s)
		}
	}
	if strings.IndexByte(s, '=') >= 0 {
		s = r.redactPairs(s)
	}
	if indexFold(s, "bearer") >= 0 || indexFold(s, "basic") >= 0 {
		s = redactAuthSchemes(s)
	}
	return s
}

// isSecretParam reports whether a parameter (or cookie) named name has a
// secret value by r's rules.
func (r Redactor) isSecretParam(name string) bool {
	if secretName(name) {
		return true
	}
	for _, p := range r.SecretParams {
		if p != "" && indexFold(name, p) >= 0 {
			return true
		}
	}
	return false
}

// secretHeader reports whether the values of the header named name are
// secret by r's rules.
func (r Redactor) secretHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie":
		return true
	}
	if secretName(name) {
		return true
	}
	for _, h := range r.SecretHeaders {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}
