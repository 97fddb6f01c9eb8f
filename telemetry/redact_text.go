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

// redactPairs replaces the values of secret name=value pairs in s, with
// or without spaces around the "=" ("password = v").
func (r Redactor) redactPairs(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			continue
		}
		j := i
		for j > 0 && s[j-1] == ' ' {
			j--
		}
		k := j
		for k > 0 && isNameChar(s[k-1]) {
			k--
		}
		if k == j || !r.isSecretParam(s[k:j]) {
			continue
		}
		start := i + 1
		if j < i { // "name = value": the spaces after "=" too
			for start < len(s) && s[start] == ' ' {
				start++
			}
		}
		v := start
		for v < len(s) && !valueEnd(s[v]) {
			v++
		}
		if v == start || s[start:v] == Redacted {
			continue
		}
		b.WriteString(s[last:start])
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

// headerName reports whether name, before a ":" in free text, names a
// header (or a setting) whose whole value is secret: Authorization,
// Proxy-Authorization, Cookie, Set-Cookie and SecretHeaders; a
// hyphenated name that looks secret (X-Api-Key, X-Auth-Token); a name
// with passw, pwd, secret, apikey, api_key, access_key or private in it.
// A bare "session" or "token" does not count: "session: lease lost" is a
// package's error, not a credential.
func (r Redactor) headerName(name string) bool {
	if len(name) < 3 || len(name) > 64 || !isLower(name[0]|0x20) {
		return false
	}
	for _, h := range [...]string{"authorization", "proxy-authorization", "cookie", "set-cookie"} {
		if len(name) == len(h) && hasPrefixFold(name, h) {
			return true
		}
	}
	for _, h := range r.SecretHeaders {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	if !r.isSecretParam(name) {
		return false
	}
	if strings.IndexByte(name, '-') >= 0 {
		return true
	}
	for _, sub := range [...]string{"passw", "pwd", "secret", "apikey", "api_key", "access_key", "private"} {
		if indexFold(name, sub) >= 0 {
			return true
		}
	}
	return false
}

// redactHeaderLines replaces the value of every "Name: value" whose name
// is secret (see headerName), to the end of the line, or to the closing
// quote when the name opens a quoted string. An Authorization value of
// the Bearer or Basic scheme is left to redactAuthSchemes, which keeps
// the scheme.
func (r Redactor) redactHeaderLines(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		k := i
		for k > 0 && (isAlnum(s[k-1]) || s[k-1] == '-' || s[k-1] == '_') {
			k--
		}
		if k == i || !r.headerName(s[k:i]) {
			continue
		}
		quoted := k > 0 && s[k-1] == '"'
		start := i + 1
		for start < len(s) && (s[start] == ' ' || s[start] == '\t') {
			start++
		}
		if quoted && start < len(s) && s[start] == '"' {
			continue // a JSON key ("Cookie":"..."): redactJSON's
		}
		end := start
		for end < len(s) && s[end] != '\n' && s[end] != '\r' && !(quoted && s[end] == '"' && s[end-1] != '\\') {
			end++
		}
		v := strings.TrimRight(s[start:end], " \t")
		if v == "" || v == Redacted || hasPrefixFold(v, "bearer ") || hasPrefixFold(v, "basic ") {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = start + len(v)
		i = last - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactJSON replaces the values of secret members of JSON objects in s
// ("password":"v", "pin": 1234), a string's content or a bare value.
func (r Redactor) redactJSON(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		j := i
		for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
			j--
		}
		if j == 0 || s[j-1] != '"' {
			continue
		}
		k := j - 1 // the key's closing quote; a key is a name, not any text
		for k > 0 && isNameChar(s[k-1]) {
			k--
		}
		if k == 0 || k == j-1 || s[k-1] != '"' || !r.isSecretParam(s[k:j-1]) {
			continue
		}
		start := i + 1
		for start < len(s) && (s[start] == ' ' || s[start] == '\t') {
			start++
		}
		if start == len(s) || s[start] == '{' || s[start] == '[' {
			continue
		}
		end := start
		if s[start] == '"' {
			start++
			end = start
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			end = min(end, len(s))
		} else {
			for end < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[end])) {
				end++
			}
		}
		if v := s[start:end]; v == "" || v == Redacted || v == "null" {
			continue
		}
		if s[start-1] != '"' {
			b.WriteString(s[last:start])
			b.WriteString(`"` + Redacted + `"`)
		} else {
			b.WriteString(s[last:start])
			b.WriteString(Redacted)
		}
		last = end
		i = end - 1
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
