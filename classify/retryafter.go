package classify

import (
	"net/http"
	"time"
)

// maxRetryAfter is the longest wait parseRetryAfter reports. A longer one
// (Retry-After: 99999999999, a date centuries ahead) is reported as
// maxRetryAfter, never ignored: a server that asks for a longer wait must
// never be contacted sooner than one that asks for a shorter one. The layers
// above cap what they honour: retry hands the response back instead of
// waiting past its MaxDelay, and ratelimit pauses the host for at most its
// MaxPause.
const maxRetryAfter = 365 * 24 * time.Hour

// epochThreshold tells a Unix time from a delay in the reset fields:
// values above it (2001-09-09) are absolute epoch seconds.
const epochThreshold = 1_000_000_000

// epochMillisThreshold tells a Unix time in milliseconds from one in
// seconds: a reset above it (the year 33658 in seconds) is milliseconds.
const epochMillisThreshold = 1_000_000_000_000

// maxNumber bounds every integer parsed here, so no parse can overflow.
const maxNumber = 1 << 50

// The header keys, in canonical form.
const (
	hRetryAfter         = "Retry-After"
	hRateLimit          = "Ratelimit"
	hRateLimitReset     = "Ratelimit-Reset"
	hRateLimitRemaining = "Ratelimit-Remaining"
	hXRateLimitReset    = "X-Ratelimit-Reset"
	hXRateLimitRemain   = "X-Ratelimit-Remaining"
	hXRateDashReset     = "X-Rate-Limit-Reset"
	hXRateDashRemain    = "X-Rate-Limit-Remaining"
)

// parseRetryAfter returns the wait a response asks for, relative to now,
// and whether it asks for one.
//
// Retry-After comes first: delay-seconds, or an HTTP-date in any of the
// three forms http.ParseTime accepts (IMF-fixdate, RFC 850, asctime). A
// date in the past means 0. Delay-seconds may carry a fraction ("2.0", as
// some APIs send), rounded up to the next whole second. A wait longer than
// maxRetryAfter, however long, is reported as maxRetryAfter. Only values
// that do not parse (negative, signed, garbage, an empty fraction) are
// ignored.
//
// When Retry-After is absent or ignored, the rate-limit fields are the
// fallback, in this order: the IETF RateLimit field (structured form
// `"default";r=0;t=30`, or the older `limit=10, remaining=0, reset=30`),
// RateLimit-Reset with RateLimit-Remaining, the legacy X-RateLimit-Reset
// with X-RateLimit-Remaining, and X-Rate-Limit-Reset with
// X-Rate-Limit-Remaining. The value of the three reset fields is a delay
// in seconds or, above 1e9, a Unix time in seconds (above 1e12, in
// milliseconds); a fraction rounds the wait up. A reset counts as a wait only when the
// matching remaining value is 0: a reset alone describes a quota window, not
// a request to wait. (The classifier also accepts a reset without remaining
// on a 429 or 503, whose status already says the quota is spent.) With
// several exhausted RateLimit policies the longest reset wins.
//
// parseRetryAfter does not allocate on success.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	d, src := parseWait(h, func() time.Time { return now }, false)
	return d, src != waitNone
}

// waitSource says which field a wait came from.
type waitSource uint8

const (
	waitNone waitSource = iota
	waitRetryAfter
	waitRateLimit
)

// parseWait implements parseRetryAfter. now is called only for the forms
// that need the time. anyReset accepts a rate-limit reset even when
// remaining is not known to be 0.
func parseWait(h http.Header, now func() time.Time, anyReset bool) (time.Duration, waitSource) {
	if vs := h[hRetryAfter]; len(vs) > 0 {
		if d, ok := parseRetryAfterValue(vs[0], now); ok {
			return d, waitRetryAfter
		}
	}
	if vs := h[hRateLimit]; len(vs) > 0 {
		if d, ok := parseRateLimitField(vs, anyReset); ok {
			return d, waitRateLimit
		}
	}
	for _, f := range resetFields {
		if vs := h[f.reset]; len(vs) > 0 {
			if exhausted(h[f.remaining], anyReset) {
				if d, ok := parseReset(vs[0], now); ok {
					return d, waitRateLimit
				}
			}
		}
	}
	return 0, waitNone
}

// resetFields are the reset fields read after the RateLimit field, each
// with the remaining count that says whether its quota is spent.
var resetFields = [...]struct{ reset, remaining string }{
	{hRateLimitReset, hRateLimitRemaining},
	{hXRateLimitReset, hXRateLimitRemain},
	{hXRateDashReset, hXRateDashRemain},
}

// parseRetryAfterValue parses one Retry-After value.
func parseRetryAfterValue(v string, now func() time.Time) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		n, ok := decimalCeil(v)
		if !ok {
			return 0, false
		}
		return seconds(n)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return until(t, now())
}

// parseReset parses a reset field: delay seconds, or a Unix time above
// epochThreshold; a fraction rounds the wait up.
func parseReset(v string, now func() time.Time) (time.Duration, bool) {
	d, _, ok := resetIn(v, now)
	return d, ok
}

// resetIn is parseReset that also reports whether the field was a Unix
// time (exact), not delay-seconds rounded up to a whole second.
func resetIn(v string, now func() time.Time) (d time.Duration, exact, ok bool) {
	n, ok := decimalCeil(trimOWS(v))
	if !ok {
		return 0, false, false
	}
	switch {
	case n > maxNumber:
		return maxRetryAfter, true, true
	case n > epochMillisThreshold:
		d, ok = until(time.UnixMilli(int64(n)), now())
		return d, true, ok
	case n > epochThreshold:
		d, ok = until(time.Unix(int64(n), 0), now())
		return d, true, ok
	}
	d, ok = seconds(n)
	return d, false, ok
}

// decimalCeil parses digits with an optional fraction (".5"; at least one
// digit on each side of the point) and rounds up. A value too large to
// hold is reported as maxNumber+1, which every caller saturates.
func decimalCeil(v string) (int, bool) {
	n, i := 0, 0
	for i < len(v) && isDigit(v[i]) {
		if n <= maxNumber {
			n = n*10 + int(v[i]-'0')
		}
		i++
	}
	if i == 0 {
		return 0, false
	}
	if i < len(v) {
		if v[i] != '.' || !isDigits(v[i+1:]) {
			return 0, false
		}
		for _, c := range []byte(v[i+1:]) {
			if c != '0' {
				n++
				break
			}
		}
	}
	return min(n, maxNumber+1), true
}

// parseRateLimitField parses the IETF RateLimit field, both the structured
// list of policies (`"burst";r=0;t=5, "day";r=90;t=3600`) and the older
// dictionary (`limit=10, remaining=0, reset=30`).
func parseRateLimitField(vs []string, anyReset bool) (time.Duration, bool) {
	var (
		best  time.Duration
		found bool
	)
	eachRateLimitPolicy(vs, func(rem, reset int) {
		if d, ok := policyWait(rem, reset, anyReset); ok && (!found || d > best) {
			best, found = d, true
		}
	})
	return best, found
}

// eachRateLimitPolicy calls fn with the remaining and reset values of each
// policy of the IETF RateLimit field: first every member of the structured
// list (`"burst";r=0;t=5`, from its r and t parameters), then, once, the
// policy the older dictionary form spreads over its members
// (`remaining=0, reset=30`). -1 means the value is absent.
func eachRateLimitPolicy(vs []string, fn func(rem, reset int)) {
	dictRem, dictReset := -1, -1
	for _, v := range vs {
		for len(v) > 0 {
			var member string
			member, v = nextMember(v)
			item, params := splitItem(member)
			if key, val, ok := cutKV(item); ok {
				switch key {
				case "remaining":
					dictRem = atoiOr(val, dictRem)
				case "reset":
					dictReset = atoiOr(val, dictReset)
				}
				continue
			}
			rem, reset := -1, -1
			for len(params) > 0 {
				var p string
				p, params = cutByte(params, ';')
				if key, val, ok := cutKV(p); ok {
					switch key {
					case "r":
						rem = atoiOr(val, rem)
					case "t":
						reset = atoiOr(val, reset)
					}
				}
			}
			fn(rem, reset)
		}
	}
	fn(dictRem, dictReset)
}

// policyWait returns the wait of one policy: its reset, when remaining is 0
// (or anyReset is set). -1 means the value is absent.
func policyWait(rem, reset int, anyReset bool) (time.Duration, bool) {
	if reset < 0 || !(rem == 0 || anyReset) {
		return 0, false
	}
	return seconds(reset)
}

// exhausted reports whether a remaining field says 0 (or anyReset is set).
func exhausted(vs []string, anyReset bool) bool {
	if anyReset {
		return true
	}
	if len(vs) == 0 {
		return false
	}
	n, ok := leadingUint(vs[0])
	return ok && n == 0
}

// nextMember splits off the first comma-separated member of a structured
// field, honouring quoted strings.
func nextMember(s string) (member, rest string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == ',':
			return trimOWS(s[:i]), s[i+1:]
		}
	}
	return trimOWS(s), ""
}

// splitItem splits a member into its item and its parameters (after the
// first ';' outside a quoted string).
func splitItem(m string) (item, params string) {
	inQuote := false
	for i := 0; i < len(m); i++ {
		switch c := m[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == ';':
			return trimOWS(m[:i]), m[i+1:]
		}
	}
	return trimOWS(m), ""
}

// cutKV splits "key=value" (not a quoted string) into its trimmed parts.
func cutKV(s string) (key, val string, ok bool) {
	s = trimOWS(s)
	if s == "" || s[0] == '"' {
		return "", "", false
	}
	key, val = cutByte(s, '=')
	if len(key) == len(s) {
		return "", "", false
	}
	return trimOWS(key), trimOWS(val), true
}

// cutByte splits s around the first c; rest is "" when c is absent.
func cutByte(s string, c byte) (before, rest string) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// atoiOr parses a non-negative integer made only of digits, else returns
// def.
func atoiOr(s string, def int) int {
	if !isDigits(s) {
		return def
	}
	n, _ := decimalCeil(s) // saturates: the caller's seconds caps it
	return n
}

// leadingUint parses the leading digits of s (after optional whitespace).
// It fails when there are none or the number exceeds maxNumber.
func leadingUint(s string) (int, bool) {
	s = trimOWS(s)
	n, i := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		if n > maxNumber {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, i > 0
}

// seconds converts a delay in seconds to a Duration, at most
// maxRetryAfter; it rejects only negative values.
func seconds(n int) (time.Duration, bool) {
	if n < 0 {
		return 0, false
	}
	if n > int(maxRetryAfter/time.Second) {
		return maxRetryAfter, true
	}
	return time.Duration(n) * time.Second, true
}

// until returns t - now, 0 for a past t, at most maxRetryAfter.
func until(t, now time.Time) (time.Duration, bool) {
	d := t.Sub(now)
	if d <= 0 {
		return 0, true
	}
	return min(d, maxRetryAfter), true
}

// parseQuota returns the rate, in requests a minute, that a response's
// rate-limit fields leave until their reset: remaining requests divided by
// the time to the reset (at least a second), from the IETF RateLimit field
// (the tightest of its policies), RateLimit-Remaining with RateLimit-Reset,
// X-RateLimit-Remaining with X-RateLimit-Reset, or X-Rate-Limit-Remaining
// with X-Rate-Limit-Reset, whichever comes first (resets are delays or Unix
// times, as for parseRetryAfter). A spent quota (0 remaining) is one
// request at the reset. It returns 0 when no field states both a remaining
// count and a reset. now is called only for Unix-time resets.
func parseQuota(h http.Header, now func() time.Time) float64 {
	if vs := h[hRateLimit]; len(vs) > 0 {
		if q := rateLimitQuota(vs); q > 0 {
			return q
		}
	}
	for _, f := range resetFields {
		// Most answers carry no quota: look the reset field up first and
		// the remaining count only when it is there.
		vs := h[f.reset]
		if len(vs) == 0 {
			continue
		}
		rs := h[f.remaining]
		if len(rs) == 0 {
			continue
		}
		rem := atoiOr(trimOWS(rs[0]), -1)
		if d, exact, ok := resetIn(vs[0], now); rem >= 0 && ok {
			return quota(rem, d, exact)
		}
	}
	return 0
}

// quota is the rate, per minute, of rem requests over the time d to the
// reset. A reset in delay-seconds (not exact) is the time left rounded up
// to whole seconds, as servers send it: the requests are spread over half
// a second less (the middle of that last second; spread a little too fast,
// the last of them are counted in the next window, which is no excess). A
// spent quota is one request at the reset, d (at least a second) away.
func quota(rem int, d time.Duration, exact bool) float64 {
	if rem == 0 {
		return float64(time.Minute) / float64(max(d, time.Second))
	}
	if !exact {
		d -= time.Second / 2
	}
	return float64(rem) * float64(time.Minute) / float64(max(d, time.Second/2))
}

// rateLimitQuota is the tightest quota of the IETF RateLimit field's
// policies (structured `"p";r=5;t=30`, or the dictionary
// `remaining=5, reset=30`).
func rateLimitQuota(vs []string) float64 {
	best := 0.0
	eachRateLimitPolicy(vs, func(rem, reset int) {
		if rem >= 0 && reset >= 0 {
			d, _ := seconds(reset)
			if q := quota(rem, d, false); best == 0 || q < best {
				best = q
			}
		}
	})
	return best
}

// secondaryRateLimit is the phrase of GitHub's secondary rate limit: a 403
// whose JSON body says "You have exceeded a secondary rate limit", with no
// rate-limit header. The classifier reads such a 403 as Throttled, with a
// wait of secondaryRateLimitWait unless a header states one.
const secondaryRateLimit = "secondary rate limit"

// secondaryRateLimitWait is the wait of a secondary rate limit that states
// none: GitHub asks clients to wait at least a minute.
const secondaryRateLimitWait = time.Minute

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// trimOWS trims HTTP optional whitespace (spaces and tabs).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
