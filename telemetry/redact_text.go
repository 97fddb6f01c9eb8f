package telemetry

import (
	"net/url"
	"strings"
)

// Substrings that make a parameter or header name secret wherever they
// occur in it (lower case).
var secretSubstrings = [...]string{
	"token", "secret", "passw", "pwd", "signature", "credential", "session",
	"sessid", "apikey", "api_key", "authorization", "cookie", "private",
	"access_key", "jwt",
}

// Words that make a name secret when one of its words equals them. They are
// too short to match as substrings ("key" is in "monkey", "code" in
// "zipcode").
var secretWords = [...]string{
	"key", "sig", "pass", "code", "auth", "sid", "otp", "pin", "pw", "hmac", "ticket",
}

// secretName applies the built-in rules to a parameter or header name,
// which may be percent-encoded.
func secretName(name string) bool {
	if strings.IndexByte(name, '%') >= 0 || strings.IndexByte(name, '+') >= 0 {
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
	}
	for _, sub := range secretSubstrings {
		if indexFold(name, sub) >= 0 {
			return true
		}
	}
	// Split into words at non-alphanumerics and lower-to-upper changes.
	start := -1
	for i := 0; i <= len(name); i++ {
		boundary := i == len(name) || !isAlnum(name[i]) ||
			(i > 0 && isLower(name[i-1]) && isUpper(name[i]))
		if boundary && start >= 0 {
			if secretWord(name[start:i]) {
				return true
			}
			start = -1
		}
		if i < len(name) && isAlnum(name[i]) && start < 0 {
			start = i
		}
	}
	return false
}

func secretWord(w string) bool {
	for _, s := range secretWords {
		if strings.EqualFold(w, s) {
			return true
		}
	}
	return false
}

// redactUserinfo removes "user:pass@" after every "://" in s.
func redactUserinfo(s string) string {
	var b strings.Builder
	last := 0 // s[last:] is not yet copied to b
	for i := 0; ; {
		k := strings.Index(s[i:], "://")
		if k < 0 {
			break
		}
		start := i + k + 3
		end := start
		at := -1
		for end < len(s) && !authorityEnd(s[end]) {
			if s[end] == '@' {
				at = end
			}
			end++
		}
		if at >= 0 {
			if b.Len() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[last:start])
			last = at + 1
		}
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactPairs replaces the values of secret name=value pairs in s.
func (r Redactor) redactPairs(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			continue
		}
		k := i
		for k > 0 && isNameChar(s[k-1]) {
			k--
		}
		if k == i || !r.isSecretParam(s[k:i]) {
			continue
		}
		v := i + 1
		for v < len(s) && !valueEnd(s[v]) {
			v++
		}
		if v == i+1 || s[i+1:v] == Redacted {
			continue
		}
		if b.Len() == 0 && last == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last : i+1])
		b.WriteString(Redacted)
		last = v
		i = v - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactAuthSchemes replaces the credential after "Bearer " and "Basic ".
func redactAuthSchemes(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		var scheme string
		switch {
		case hasPrefixFold(s[i:], "bearer"):
			scheme = "bearer"
		case hasPrefixFold(s[i:], "basic"):
			scheme = "basic"
		default:
			continue
		}
		if i > 0 && isAlnum(s[i-1]) {
			continue
		}
		j := i + len(scheme)
		sp := j
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j == sp {
			continue
		}
		t := j
		for t < len(s) && isToken68(s[t]) && s[t] != '=' {
			t++
		}
		e := t
		for e < len(s) && s[e] == '=' {
			e++
		}
		if e > t && e < len(s) && (isToken68(s[e]) || s[e] == '"') {
			continue // an auth-param such as realm="x", not a credential
		}
		t = e
		minLen := 1
		if scheme == "basic" {
			minLen = 8
		}
		if t-j < minLen || s[j:t] == Redacted {
			continue
		}
		b.WriteString(s[last:j])
		b.WriteString(Redacted)
		last = t
		i = t - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func authorityEnd(c byte) bool {
	switch c {
	case '/', '?', '#', ' ', '\t', '\n', '\r', '"', '\'', '<', '>', '`', '\\':
		return true
	}
	return false
}

func valueEnd(c byte) bool {
	switch c {
	case '&', ';', '#', ' ', '\t', '\n', '\r', '"', '\'', '<', '>', '`':
		return true
	}
	return false
}

func isNameChar(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '%' || c == '[' || c == ']'
}

func isToken68(c byte) bool {
	return isAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '='
}

func isAlnum(c byte) bool { return isLower(c) || isUpper(c) || ('0' <= c && c <= '9') }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// indexFold is strings.Index ignoring ASCII case; sub must be lower case
// or is compared as if it were.
func indexFold(s, sub string) int {
	n := len(sub)
	if n == 0 {
		return 0
	}
	c0 := sub[0]
	if isUpper(c0) {
		c0 += 'a' - 'A'
	}
	for i := 0; i+n <= len(s); i++ {
		c := s[i]
		if isUpper(c) {
			c += 'a' - 'A'
		}
		if c == c0 && hasPrefixFold(s[i:], sub) {
			return i
		}
	}
	return -1
}

func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if isUpper(a) {
			a += 'a' - 'A'
		}
		if isUpper(b) {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
