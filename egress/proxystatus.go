package egress

import "strings"

// proxyStatus is the member of an RFC 9209 Proxy-Status field written by
// the intermediary closest to us: the last member of the list.
type proxyStatus struct {
	name  string // the intermediary's name (token or string)
	error string // the error parameter (a token), or ""
}

// parseProxyStatus parses the Proxy-Status field lines (an RFC 8941 List
// of Items; each line continues the list) and returns the last member.
// It reports false when the field is absent or not a valid list; a
// malformed field is ignored rather than guessed at.
func parseProxyStatus(lines []string) (proxyStatus, bool) {
	var last proxyStatus
	found := false
	for _, s := range lines {
		s = trimOWS(s)
		for s != "" {
			m, rest, ok := parseMember(s)
			if !ok {
				return proxyStatus{}, false
			}
			last, found = m, true
			rest = trimOWS(rest)
			if rest == "" {
				break
			}
			if rest[0] != ',' {
				return proxyStatus{}, false
			}
			rest = trimOWS(rest[1:])
			if rest == "" {
				return proxyStatus{}, false // trailing comma
			}
			s = rest
		}
	}
	return last, found
}

// parseMember parses one Item: a bare item naming the intermediary and its
// parameters.
func parseMember(s string) (proxyStatus, string, bool) {
	var m proxyStatus
	name, kind, rest, ok := bareItem(s)
	if !ok || (kind != itemToken && kind != itemString) {
		return m, s, false
	}
	m.name = name
	for strings.HasPrefix(rest, ";") {
		rest = strings.TrimLeft(rest[1:], " ")
		key, r, ok := paramKey(rest)
		if !ok {
			return m, s, false
		}
		rest = r
		if !strings.HasPrefix(rest, "=") {
			continue // boolean true
		}
		val, vk, r, ok := bareItem(rest[1:])
		if !ok {
			return m, s, false
		}
		rest = r
		if key == "error" && vk == itemToken {
			m.error = val
		}
	}
	return m, rest, true
}

// itemKind is the type of an RFC 8941 bare item.
type itemKind uint8

const (
	itemToken itemKind = iota
	itemString
	itemNumber
	itemBoolean
	itemBytes
)

// bareItem parses one RFC 8941 bare item at the start of s. For tokens and
// strings it returns the value; for the other types only their extent.
func bareItem(s string) (val string, kind itemKind, rest string, ok bool) {
	if s == "" {
		return "", 0, s, false
	}
	switch c := s[0]; {
	case c == '"':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\':
				i++
				if i == len(s) || (s[i] != '"' && s[i] != '\\') {
					return "", 0, s, false
				}
				b.WriteByte(s[i])
			case c == '"':
				return b.String(), itemString, s[i+1:], true
			case c < 0x20 || c > 0x7e:
				return "", 0, s, false
			default:
				b.WriteByte(c)
			}
		}
		return "", 0, s, false
	case c == '*' || isAlpha(c):
		i := 1
		for i < len(s) && (isTchar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return s[:i], itemToken, s[i:], true
	case c == '-' || isDigit(c):
		i := 0
		if c == '-' {
			i++
		}
		start := i
		for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
			i++
		}
		if i == start {
			return "", 0, s, false
		}
		return s[:i], itemNumber, s[i:], true
	case c == '?':
		if len(s) < 2 || (s[1] != '0' && s[1] != '1') {
			return "", 0, s, false
		}
		return s[:2], itemBoolean, s[2:], true
	case c == ':':
		end := strings.IndexByte(s[1:], ':')
		if end < 0 {
			return "", 0, s, false
		}
		return s[:end+2], itemBytes, s[end+2:], true
	default:
		return "", 0, s, false
	}
}

// paramKey parses an RFC 8941 key: ( lcalpha / "*" ) *( lcalpha / DIGIT /
// "_" / "-" / "." / "*" ).
func paramKey(s string) (key, rest string, ok bool) {
	if s == "" || !(s[0] == '*' || ('a' <= s[0] && s[0] <= 'z')) {
		return "", s, false
	}
	i := 1
	for i < len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		i++
	}
	return s[:i], s[i:], true
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// proxyStatusKind says whom an RFC 9209 error type blames. Errors of the
// proxy itself (its resolver, its limits, its policy, its configuration)
// count against the endpoint; errors about the next hop — the target —
// do not, or egress would learn to route around a target that refuses us.
// It reports false for types it does not know, which blame no one.
func proxyStatusKind(errType string) (string, bool) {
	switch errType {
	case "dns_timeout", // the proxy's resolver
		"destination_not_found",     // the proxy has no route configured
		"destination_ip_prohibited", // the proxy's policy
		"destination_ip_unroutable", // the proxy's network
		"connection_limit_reached",  // the proxy's limits
		"http_request_denied",       // the proxy's policy
		"proxy_internal_error",
		"proxy_configuration_error",
		"proxy_loop_detected":
		return failProxy, true
	case "dns_error",
		"destination_unavailable",
		"connection_refused",
		"connection_terminated",
		"connection_timeout",
		"connection_read_timeout",
		"connection_write_timeout",
		"tls_protocol_error",
		"tls_certificate_error",
		"tls_alert_received",
		"http_request_error",
		"http_response_incomplete",
		"http_response_header_section_size",
		"http_response_header_size",
		"http_response_body_size",
		"http_response_trailer_section_size",
		"http_response_trailer_size",
		"http_response_transfer_coding",
		"http_response_content_coding",
		"http_response_timeout",
		"http_upgrade_failed",
		"http_protocol_error",
		"proxy_internal_response":
		return failDestination, true
	}
	return "", false
}
