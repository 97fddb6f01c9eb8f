// Package hostkey decides the key under which egresskit keeps per-host state
// (circuit breaker, halt, pacing budget, robots.txt). Every layer that keeps
// state per host derives its key with Of, so that they all agree on what "one
// host" is.
//
// A key is the scheme-less host[:port] of a URL, normalised so that spellings
// of one host give one key: letters are lower-cased, one trailing dot is
// dropped, internationalised names are converted to their ASCII (IDNA, "xn--")
// form, IP addresses are written canonically, and the default ports 80 and
// 443 are dropped whatever the scheme. With ByDomain the host part is replaced
// by its registrable domain (eTLD+1 from the Public Suffix List), so that
// a.example.com and b.example.com share one key.
package hostkey

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Mode selects how much of the host the key keeps.
type Mode uint8

// The modes.
const (
	// ByHost keys by the full host name and non-default port
	// ("a.example.com", "example.com:8080"). It is the zero value.
	ByHost Mode = iota
	// ByDomain keys by the registrable domain (eTLD+1) and non-default port
	// ("example.com" for a.example.com and b.example.com). IP addresses,
	// public suffixes themselves and single-label names ("localhost") are
	// kept whole.
	ByDomain
)

// String returns "host" or "domain".
func (m Mode) String() string {
	switch m {
	case ByHost:
		return "host"
	case ByDomain:
		return "domain"
	}
	return "unknown"
}

// Errors returned by Of. Errors never repeat the host they reject.
var (
	// ErrEmptyHost: the URL has no host, or a port without a host.
	ErrEmptyHost = errors.New("hostkey: empty host")
	// ErrInvalidHost: the host or port is malformed.
	ErrInvalidHost = errors.New("hostkey: invalid host")
)

// Limits of a DNS name (RFC 1035 §2.3.4) in its ASCII form.
const (
	maxName  = 253
	maxLabel = 63
)

// profile maps internationalised names for lookup (UTS #46, non-transitional)
// but, like browsers, accepts '_' and labels such as "r3---sn-abc" that the
// strict lookup profile rejects.
var profile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
)

// Of returns the key of u's host under mode.
//
// It returns an error wrapping ErrEmptyHost when u is nil, has no host or
// has only a port, and one wrapping ErrInvalidHost when the host is not a
// valid DNS name or IP literal, the port is not in 1..65535, or mode is
// unknown.
//
// Of does not allocate when u.Host is already a key: a lower-case ASCII
// name without A-labels, or an IP address as netip.Addr.String writes it
// (bracketed for IPv6, without zone), with no port or a non-default one
// written canonically. Under ByDomain such a name still costs the one
// allocation of the Public Suffix List lookup.
func Of(u *url.URL, mode Mode) (string, error) {
	if u == nil || u.Host == "" {
		return "", ErrEmptyHost
	}
	if mode > ByDomain {
		return "", fmt.Errorf("%w: unknown mode %d", ErrInvalidHost, mode)
	}
	if key, ok := fast(u.Host, mode); ok {
		return key, nil // already a key, or a part of one: no allocation
	}
	return slow(u.Host, mode)
}

// slow is Of for any hostport: it parses, normalises and rebuilds the key.
func slow(hostport string, mode Mode) (string, error) {
	host, port, literal, err := split(hostport)
	if err != nil {
		return "", err
	}
	if host == "" {
		if port != "" {
			return "", fmt.Errorf("%w: port without host", ErrEmptyHost)
		}
		return "", ErrEmptyHost
	}
	var key string
	var ip bool
	if key, ip, err = normalise(host); err != nil {
		return "", err
	}
	if literal && !ip {
		return "", fmt.Errorf("%w: brackets around a name", ErrInvalidHost)
	}
	if mode == ByDomain && !ip {
		if d, err := publicsuffix.EffectiveTLDPlusOne(key); err == nil {
			key = d
		}
	}
	if ip && strings.IndexByte(key, ':') >= 0 {
		key = "[" + key + "]"
	}
	if port != "" {
		key += ":" + port
	}
	return key, nil
}

// split separates hostport into host and canonical port ("" for none or a
// default port). Brackets around an IP literal are removed and reported.
func split(hostport string) (host, port string, literal bool, err error) {
	host = hostport
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", false, fmt.Errorf("%w: missing ']'", ErrInvalidHost)
		}
		host, port = hostport[1:end], hostport[end+1:]
		if host == "" {
			return "", "", false, fmt.Errorf("%w: empty IP literal", ErrInvalidHost)
		}
		if port != "" && port[0] != ':' {
			return "", "", false, fmt.Errorf("%w: text after ']'", ErrInvalidHost)
		}
		port, literal = strings.TrimPrefix(port, ":"), true
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	if port == "" {
		return host, "", literal, nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || port[0] == '+' {
		return "", "", false, fmt.Errorf("%w: port out of range", ErrInvalidHost)
	}
	if n == 80 || n == 443 {
		return host, "", literal, nil
	}
	return host, strconv.FormatUint(n, 10), literal, nil
}

// normalise returns the canonical form of a host without port and whether
// it is an IP address (without brackets).
func normalise(host string) (string, bool, error) {
	if mayBeIP(host) {
		if a, err := netip.ParseAddr(host); err == nil {
			if !validZone(a.Zone()) {
				return "", false, fmt.Errorf("%w: malformed IPv6 zone", ErrInvalidHost)
			}
			return a.String(), true, nil
		}
	}
	if strings.IndexByte(host, ':') >= 0 || strings.IndexByte(host, '%') >= 0 {
		return "", false, fmt.Errorf("%w: malformed IP literal or port", ErrInvalidHost)
	}
	if !utf8.ValidString(host) {
		return "", false, fmt.Errorf("%w: not UTF-8", ErrInvalidHost)
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", false, ErrEmptyHost
	}
	if ascii(host) {
		host = strings.ToLower(host)
	}
	if !ascii(host) || strings.HasPrefix(host, "xn--") || strings.Contains(host, ".xn--") {
		a, err := profile.ToASCII(host)
		if err != nil {
			return "", false, fmt.Errorf("%w: not a valid internationalised name", ErrInvalidHost)
		}
		host = strings.TrimSuffix(a, ".")
	}
	if err := check(host); err != nil {
		return "", false, err
	}
	return host, false, nil
}

// validZone reports whether zone is an IPv6 zone identifier made of
// unreserved URI characters (RFC 6874 §2), as interface names are.
func validZone(zone string) bool {
	for i := 0; i < len(zone); i++ {
		switch c := zone[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// fast returns the key of hostport without allocating when hostport is
// already in key form, as a canonical host makes it: a lower-case name of
// ASCII letters, digits, '-', '_' and '.' (no A-label, which only the IDNA
// check can validate), a dotted-quad IPv4 address without leading zeros, or
// a bracketed IPv6 address as netip.Addr.String writes it (no zone), each
// optionally followed by a port in 1..65535 other than 80 and 443 without
// leading zeros. Under ByDomain a name's key is the tail of hostport from
// its registrable domain on. It reports false for anything else, which
// slow then handles; for every input on which fast succeeds, slow returns
// the same key (FuzzOf checks it).
func fast(hostport string, mode Mode) (string, bool) {
	host, port := hostport, ""
	if hostport[0] == '[' {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", false
		}
		host, port = hostport[1:end], hostport[end+1:]
		if port != "" {
			if port[0] != ':' || !canonicalPort(port[1:]) {
				return "", false
			}
		}
		return hostport, canonicalIPv6(host) // IP addresses are kept whole
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
		if !canonicalPort(port) {
			return "", false
		}
	}
	if canonicalIPv4(host) {
		return hostport, true
	}
	if !canonicalName(host) {
		return "", false
	}
	if mode == ByDomain {
		// The registrable domain is a suffix of host, so the key is a
		// suffix of hostport.
		return hostport[len(host)-len(registrable(host)):], true
	}
	return hostport, true
}

// canonicalPort reports whether port is as split writes it: decimal
// without leading zeros, in 1..65535, not a default port.
func canonicalPort(port string) bool {
	if len(port) == 0 || len(port) > 5 || port[0] == '0' {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535 && n != 80 && n != 443
}

// canonicalIPv4 reports whether host is an IPv4 address as
// netip.Addr.String writes it: four decimal octets without leading zeros.
func canonicalIPv4(host string) bool {
	octets := 0
	for len(host) > 0 && octets < 4 {
		i := 0
		n := 0
		for i < len(host) && i < 3 && '0' <= host[i] && host[i] <= '9' {
			n = n*10 + int(host[i]-'0')
			i++
		}
		if i == 0 || n > 255 || (i > 1 && host[0] == '0') {
			return false
		}
		octets++
		host = host[i:]
		if octets < 4 {
			if len(host) == 0 || host[0] != '.' {
				return false
			}
			host = host[1:]
		}
	}
	return octets == 4 && host == ""
}

// canonicalIPv6 reports whether host is an IPv6 address without zone as
// netip.Addr.String writes it.
func canonicalIPv6(host string) bool {
	if strings.IndexByte(host, ':') < 0 {
		return false // an IPv4 address in brackets loses them
	}
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', c == ':', c == '.':
		default:
			return false // upper case, a zone, or not an address
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")]byte
	return string(a.AppendTo(buf[:0])) == host
}

// canonicalName reports whether host (without port) is a host name that is
// already in its key form: lower-case letters, digits, '-', '_' and '.', at
// least one letter, no A-label, and valid label and name lengths. It is
// check, the A-label test and the byte test in one pass over host.
func canonicalName(host string) bool {
	if len(host) > maxName {
		return false
	}
	letter := false
	label := 0
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case 'a' <= c && c <= 'z':
			letter = true
			if c == 'x' && label == 0 && strings.HasPrefix(host[i:], "xn--") {
				return false // an A-label
			}
		case '0' <= c && c <= '9', c == '-', c == '_':
		case c == '.':
			if label == 0 {
				return false // an empty label
			}
			label = 0
			continue
		default:
			return false
		}
		label++
		if label > maxLabel {
			return false
		}
	}
	return letter && label > 0 // label 0: empty, or a trailing dot
}

// registrable returns the registrable domain of a canonical name, as
// publicsuffix.EffectiveTLDPlusOne does, or the whole name where that
// fails (a public suffix, a single label): without the error, which
// allocates.
func registrable(host string) string {
	suffix, _ := publicsuffix.PublicSuffix(host)
	if len(host) <= len(suffix) {
		return host
	}
	i := len(host) - len(suffix) - 1
	if host[i] != '.' {
		return host
	}
	return host[1+strings.LastIndexByte(host[:i], '.'):]
}

// mayBeIP reports whether host could parse as an IP address: IPv4 is digits
// and dots only, IPv6 has a colon. Other names skip the parse, which
// allocates an error.
func mayBeIP(host string) bool {
	if strings.IndexByte(host, ':') >= 0 {
		return true
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// check validates the final ASCII form: allowed bytes, no empty label,
// label and name lengths.
func check(host string) error {
	if len(host) > maxName {
		return fmt.Errorf("%w: name longer than %d bytes", ErrInvalidHost, maxName)
	}
	label := 0
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c == '.':
			if label == 0 {
				return fmt.Errorf("%w: empty label", ErrInvalidHost)
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return fmt.Errorf("%w: byte %#02x not allowed in a host name", ErrInvalidHost, c)
		}
		label++
		if label > maxLabel {
			return fmt.Errorf("%w: label longer than %d bytes", ErrInvalidHost, maxLabel)
		}
	}
	if label == 0 {
		return fmt.Errorf("%w: empty label", ErrInvalidHost)
	}
	return nil
}
