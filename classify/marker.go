package classify

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// A Marker recognises a bot-management challenge or block page. Markers are
// data: the built-in table is DefaultMarkers, and Config.Markers adds to it.
//
// Every condition that is set must hold for the marker to match:
//
//   - Header names a response header field; the marker needs that field with
//     a value containing Value (any value when Value is empty).
//   - Body must occur in the first Config.PeekSize bytes of the body, and
//     AlsoBody too when it is set.
//   - Statuses, when not empty, restricts the marker to those status codes.
//
// Matching is ASCII case-insensitive. A marker with neither Header nor Body
// would match every response; New ignores it. Result.Markers names each
// matching marker once: those without a body condition first, then the
// others, each group in table order.
type Marker struct {
	// Name identifies the marker in Result.Markers, e.g. "cloudflare".
	// Several entries may share a name; it is reported once. Empty means
	// "custom".
	Name string
	// Header is the name of a response header field to inspect.
	Header string
	// Value is a substring of the Header field's value; empty matches any
	// value, i.e. the field's presence.
	Value string
	// Body is a substring of the body head.
	Body string
	// AlsoBody is a second substring of the body head that must also be
	// present; empty means no second condition.
	AlsoBody string
	// Statuses restricts the marker to these status codes; empty means any.
	Statuses []int
}

// DefaultMarkers returns a fresh copy of the built-in marker table. Each
// entry names a page or header that a bot-management product serves instead
// of the requested content. Headers that only reveal a product's presence
// (Server: cloudflare, CF-Ray, X-Sucuri-ID, X-DataDome) are deliberately
// absent: they are on every normal response too.
func DefaultMarkers() []Marker {
	return []Marker{
		// Cloudflare: the header is set on every challenge response; the
		// page texts are early in the challenge page's head.
		{Name: "cloudflare", Header: "Cf-Mitigated", Value: "challenge"},
		{Name: "cloudflare", Body: "_cf_chl_opt"},
		{Name: "cloudflare", Body: "Just a moment...", AlsoBody: "/cdn-cgi/"},
		{Name: "cloudflare", Body: "Just a moment...", Statuses: []int{403, 429, 503}},
		// Normal pages embed /cdn-cgi/challenge-platform/scripts/jsd/ for
		// bot detection; only the challenge orchestration is a challenge.
		{Name: "cloudflare", Body: "/cdn-cgi/challenge-platform/", AlsoBody: "orchestrate"},
		{Name: "cloudflare", Body: "/cdn-cgi/challenge-platform/", Statuses: []int{403, 429, 503}},
		// AWS WAF answers a challenge with 202 and a CAPTCHA with 405.
		{Name: "aws-waf", Header: "X-Amzn-Waf-Action", Value: "challenge"},
		{Name: "aws-waf", Header: "X-Amzn-Waf-Action", Value: "captcha"},
		{Name: "aws-waf", Body: "gokuProps", Statuses: []int{202, 405}},
		// PerimeterX / HUMAN block page.
		{Name: "perimeterx", Body: "px-captcha"},
		{Name: "perimeterx", Body: "Access to this page has been denied"},
		// Imperva (Incapsula): normal pages load /_Incapsula_Resource
		// scripts too, so the resource alone needs the incident reference.
		{Name: "imperva", Body: "Incapsula incident ID"},
		{Name: "imperva", Body: "_Incapsula_Resource", AlsoBody: "incident"},
		// DataDome serves its CAPTCHA from captcha-delivery.com.
		{Name: "datadome", Body: "captcha-delivery.com"},
		// Sucuri WebSite Firewall block page.
		{Name: "sucuri", Header: "X-Sucuri-Block"},
		{Name: "sucuri", Body: "Sucuri WebSite Firewall", AlsoBody: "Access Denied"},
		// F5 BIG-IP ASM rejection page (often served with status 200).
		{Name: "f5-asm", Body: "The requested URL was rejected"},
		// Akamai edge denial; its page spells the reference with entities.
		{Name: "akamai", Body: "Access Denied", AlsoBody: "Reference #"},
		{Name: "akamai", Body: "Access Denied", AlsoBody: "Reference&#32;&#35;"},
	}
}

// matcher is a compiled Marker: canonical header name, lower-cased needles.
type matcher struct {
	name     string
	header   string  // canonical MIME header key; "" when no header condition
	value    string  // lower-cased
	body     *needle // nil when no body condition
	also     *needle // nil when no second condition
	statuses []int
}

func compile(ms []Marker) []matcher {
	out := make([]matcher, 0, len(ms))
	for _, m := range ms {
		if m.Header == "" && m.Body == "" {
			continue
		}
		name := m.Name
		if name == "" {
			name = "custom"
		}
		mt := matcher{
			name:     name,
			value:    lowerASCII(m.Value),
			body:     newNeedle(m.Body),
			also:     newNeedle(m.AlsoBody),
			statuses: slices.Clone(m.Statuses),
		}
		if m.Header != "" {
			mt.header = textproto.CanonicalMIMEHeaderKey(m.Header)
		}
		if mt.body == nil {
			mt.also = nil
		}
		out = append(out, mt)
	}
	return out
}

func (m *matcher) appliesTo(status int) bool {
	return len(m.statuses) == 0 || slices.Contains(m.statuses, status)
}

// matchHeader reports whether the header condition holds (true when there
// is none).
func (m *matcher) matchHeader(h http.Header) bool {
	return m.header == "" || m.matchValues(h[m.header])
}

// matchValues reports whether one of the header field's values satisfies
// the marker (any value when the marker names none).
func (m *matcher) matchValues(vs []string) bool {
	if len(vs) == 0 {
		return false
	}
	if m.value == "" {
		return true
	}
	for _, v := range vs {
		if containsFold(v, m.value) {
			return true
		}
	}
	return false
}

// matchBody reports whether the body condition holds against folded, the
// lower-cased body head (true when there is no body condition).
func (m *matcher) matchBody(folded []byte) bool {
	if m.body == nil {
		return true
	}
	if !m.body.in(folded) {
		return false
	}
	return m.also == nil || m.also.in(folded)
}

// lowerASCII lower-cases the ASCII letters of s.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = foldByte(b[j])
			}
			return string(b)
		}
	}
	return s
}

// foldInto writes the ASCII lower-case form of src into dst, which must
// be at least as long. It folds eight bytes at a time.
func foldInto(dst, src []byte) {
	const (
		ones = 0x0101010101010101
		high = ones * 0x80
	)
	dst = dst[:len(src)]
	i := 0
	for ; i+8 <= len(src); i += 8 {
		w := binary.LittleEndian.Uint64(src[i:])
		low := w &^ high                                   // each byte's low seven bits
		geA := low + ones*(0x80-'A')                       // high bit set where low >= 'A'
		gtZ := low + ones*(0x80-'Z'-1)                     // high bit set where low > 'Z'
		upper := geA &^ gtZ &^ w & high                    // ASCII 'A'..'Z'
		binary.LittleEndian.PutUint64(dst[i:], w|upper>>2) // +0x20
	}
	for ; i < len(src); i++ {
		dst[i] = foldByte(src[i])
	}
}

func foldByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// containsFold reports whether s contains needle (already lower-case),
// ignoring ASCII case. It does not allocate.
func containsFold(s, needle string) bool {
	n := len(needle)
	if n == 0 {
		return true
	}
	for i := 0; i+n <= len(s); i++ {
		if foldByte(s[i]) != needle[0] {
			continue
		}
		j := 1
		for j < n && foldByte(s[i+j]) == needle[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// commonness lists bytes from most to least frequent in HTML and English
// text, roughly; bytes not listed count as rarest.
const commonness = " etaoinsrhldcu<>=\"/p.mfgwy-b:v;k,x'j0123456789_#&q()z!?%@*+[]{}|\\^~`$"

// A needle is a lower-cased substring to find in a folded body head. The
// search jumps between occurrences of its rarest byte (the anchor) with
// bytes.IndexByte, which is far cheaper on HTML than bytes.Index keyed on
// the first byte.
type needle struct {
	b      []byte
	anchor int // index in b of the rarest byte
}

// newNeedle returns the needle for s, or nil when s is empty.
func newNeedle(s string) *needle {
	if s == "" {
		return nil
	}
	n := &needle{b: []byte(lowerASCII(s))}
	best := -1
	for i, c := range n.b {
		rank := strings.IndexByte(commonness, c)
		if rank < 0 {
			rank = len(commonness)
		}
		if rank > best {
			best, n.anchor = rank, i
		}
	}
	return n
}

// maxAnchorMisses bounds the anchored verifications of needle.in before it
// falls back to bytes.Contains, so a hostile body full of anchor bytes
// costs no more than the plain search.
const maxAnchorMisses = 32

// in reports whether the needle occurs in hay (already lower-case).
func (n *needle) in(hay []byte) bool {
	k, c := n.anchor, n.b[n.anchor]
	end := len(hay) - (len(n.b) - 1 - k) // anchor positions are < end
	misses := 0
	for i := k; i < end; {
		j := bytes.IndexByte(hay[i:end], c)
		if j < 0 {
			return false
		}
		start := i + j - k
		if bytes.Equal(hay[start:start+len(n.b)], n.b) {
			return true
		}
		if misses++; misses > maxAnchorMisses {
			return bytes.Contains(hay[start+1:], n.b)
		}
		i += j + 1
	}
	return false
}
