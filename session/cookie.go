package session

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Cookie rules beyond net/http/cookiejar, after RFC 6265bis and browsers.
const (
	// maxCookieAge caps a persistent cookie's lifetime (RFC 6265bis §5.5).
	maxCookieAge = 400 * 24 * time.Hour
	// maxAttrLen caps the Domain and Path attributes (RFC 6265bis §5.6).
	maxAttrLen = 1024
)

// Reasons a cookie is dropped.
var (
	errCookieTooLarge = errors.New("cookie too large")
	errCookieDomain   = errors.New("cookie domain not allowed for host")
)

// canonicalHost strips the port and a trailing dot from host, and returns
// it lower case and in ASCII (IDNA), as net/http/cookiejar does.
func canonicalHost(host string) (string, error) {
	if strings.LastIndexByte(host, ':') > strings.LastIndexByte(host, ']') {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			return "", err
		}
		host = h
	}
	host = strings.TrimPrefix(strings.TrimSuffix(host, "]"), "[")
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", errors.New("empty host")
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			a, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", err
			}
			return strings.ToLower(a), nil
		}
	}
	return strings.ToLower(host), nil
}

func isIP(host string) bool { return net.ParseIP(host) != nil }

// defaultPath is the directory of the request path (RFC 6265 §5.1.4).
func defaultPath(path string) string {
	if path == "" || path[0] != '/' {
		return "/"
	}
	i := strings.LastIndexByte(path, '/')
	if i == 0 {
		return "/"
	}
	return path[:i]
}

// hasDotSuffix reports whether s ends with "." + suffix.
func hasDotSuffix(s, suffix string) bool {
	return len(s) > len(suffix) && s[len(s)-len(suffix)-1] == '.' && s[len(s)-len(suffix):] == suffix
}

// registrable returns host's registrable domain (eTLD+1) by psl, or host
// itself when host is a public suffix or psl is nil.
func registrable(psl cookiejar.PublicSuffixList, host string) string {
	if psl == nil {
		return host
	}
	ps := psl.PublicSuffix(host)
	if ps == "" || ps == host || !hasDotSuffix(host, ps) {
		return host
	}
	rest := host[:len(host)-len(ps)-1]
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		rest = rest[i+1:]
	}
	return rest + "." + ps
}

// domainAndType returns the domain a cookie is stored under and whether it
// is host-only, following net/http/cookiejar: no Domain attribute makes a
// host-only cookie; an IP host accepts only its own address; a Domain
// attribute that is a public suffix is accepted only when it is the host
// itself (then host-only); otherwise the host must domain-match it. Beyond
// cookiejar, a Domain above the host's registrable domain (eTLD+1, by the
// list's private section too) is refused: bucket.s3.amazonaws.com may not
// set Domain=amazonaws.com, since s3.amazonaws.com is a public suffix.
// cookiejar stores such a cookie but keeps it to hosts of the setter's
// registrable domain; the Jar has one cookie space per session, so it
// refuses it instead.
func domainAndType(psl cookiejar.PublicSuffixList, host, domain string) (string, bool, error) {
	if domain == "" {
		return host, true, nil
	}
	if isIP(host) {
		if host != domain {
			return "", false, errCookieDomain
		}
		return host, true, nil
	}
	domain = strings.TrimPrefix(domain, ".")
	if domain == "" || domain[0] == '.' || domain[len(domain)-1] == '.' {
		return "", false, errCookieDomain
	}
	for i := 0; i < len(domain); i++ {
		if domain[i] >= utf8.RuneSelf {
			return "", false, errCookieDomain // as net/http/cookiejar
		}
	}
	domain = strings.ToLower(domain)
	if psl != nil {
		if ps := psl.PublicSuffix(domain); ps != "" && !hasDotSuffix(domain, ps) {
			if host == domain {
				return host, true, nil
			}
			return "", false, errCookieDomain
		}
	}
	if host != domain && !hasDotSuffix(host, domain) {
		return "", false, errCookieDomain
	}
	if reg := registrable(psl, host); domain != reg && !hasDotSuffix(domain, reg) {
		return "", false, errCookieDomain // above the registrable domain
	}
	return domain, false, nil
}

// newEntry turns a received cookie into an entry. remove is true when the
// cookie deletes a stored one (Max-Age < 0 or Expires in the past).
func newEntry(psl cookiejar.PublicSuffixList, c *http.Cookie, host, defPath string, now time.Time, maxSize int) (e *entry, remove bool, err error) {
	if len(c.Name)+len(c.Value) > maxSize || len(c.Domain) > maxAttrLen || len(c.Path) > maxAttrLen {
		return nil, false, errCookieTooLarge
	}
	e = &entry{Name: c.Name, Value: c.Value, Quoted: c.Quoted, Secure: c.Secure, HTTPOnly: c.HttpOnly, SameSite: c.SameSite, Creation: now}
	e.Path = c.Path
	if e.Path == "" || e.Path[0] != '/' {
		e.Path = defPath
	}
	e.Domain, e.HostOnly, err = domainAndType(psl, host, c.Domain)
	if err != nil {
		return nil, false, err
	}
	switch {
	case c.MaxAge < 0:
		return e, true, nil
	case c.MaxAge > 0:
		e.Expires = now.Add(min(time.Duration(c.MaxAge)*time.Second, maxCookieAge))
		e.Persistent = true
	case c.Expires.IsZero():
		// A session cookie: it lives as long as the session record.
	case !c.Expires.After(now):
		return e, true, nil
	default:
		e.Expires = c.Expires
		if e.Expires.After(now.Add(maxCookieAge)) {
			e.Expires = now.Add(maxCookieAge)
		}
		e.Persistent = true
	}
	return e, false, nil
}

// expired reports whether a persistent cookie has expired at now.
func (e *entry) expired(now time.Time) bool { return e.Persistent && !e.Expires.After(now) }

// shouldSend reports whether e goes with a request to host and path. A
// Secure cookie goes over https, or to localhost or a loopback address
// over http too: browsers, and net/http/cookiejar, take those for secure
// origins.
func (e *entry) shouldSend(https bool, host, path string) bool {
	return e.domainMatch(host) && e.pathMatch(path) && (https || !e.Secure || loopbackDomain(e.Domain))
}

// loopbackDomain reports whether a cookie's domain is localhost (or a name
// under it) or a loopback address.
func loopbackDomain(d string) bool {
	d = strings.TrimSuffix(d, ".")
	if d == "localhost" || strings.HasSuffix(d, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(d)
	return err == nil && ip.IsLoopback()
}

func (e *entry) domainMatch(host string) bool {
	return e.Domain == host || (!e.HostOnly && hasDotSuffix(host, e.Domain))
}

// pathMatch implements RFC 6265 §5.1.4.
func (e *entry) pathMatch(path string) bool {
	if path == e.Path {
		return true
	}
	if e.Path == "" {
		return false
	}
	if strings.HasPrefix(path, e.Path) {
		return e.Path[len(e.Path)-1] == '/' || path[len(e.Path)] == '/'
	}
	return false
}

// cookieField names the store field of a cookie: a hash of the session ID
// and the cookie's identity (domain, path, name), so a store sees neither
// names nor domains, and equal cookies of two sessions do not correlate.
func cookieField(id, domain, path, name string) string {
	h := sha256.New()
	for _, s := range [...]string{id, domain, path, name} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return "c/" + base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:16])
}
