package robotstxt

import (
	"cmp"
	"errors"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jimsmart/grobotstxt"
)

// maxParsedDelay bounds the Crawl-delay Parse reports; the Checker clamps it
// further to Config.MaxCrawlDelay.
const maxParsedDelay = 24 * time.Hour

// Rules are the rules of one robots.txt that apply to one agent token,
// compiled for matching. A nil *Rules allows everything. Rules are
// immutable and safe for concurrent use.
type Rules struct {
	patterns string // every applicable pattern, concatenated
	// rules holds the patterns longest first, Allow first on equal length;
	// when index is set, they are grouped by literal prefix first.
	rules    []rule
	index    map[string]span // literal prefix → its rules; nil for few rules
	lens     []int           // the distinct lengths of the index's keys, ascending
	delay    time.Duration
	hasDelay bool
}

// span is the range rules[start:end].
type span struct{ start, end uint32 }

// indexMin is the number of rules from which Rules indexes them by literal
// prefix: below it, a scan is as fast as the lookups.
const indexMin = 16

// rule is one Allow or Disallow pattern, a slice of Rules.patterns.
type rule struct {
	off, n uint32
	lit    uint32 // length of the literal prefix, before any '*'
	allow  bool
}

// Parse compiles body, the content of a robots.txt file, for the agent
// token agent (see AgentToken). It never fails: lines that are not
// directives are ignored, as RFC 9309 section 2.2 requires, so binary
// garbage yields Rules that allow everything. A UTF-8 byte order mark, CR,
// LF and CRLF line ends are accepted and lines longer than 16,664 bytes are
// cut, as in Google's parser.
//
// Parse reads all of body; a caller fetching robots.txt itself should cap
// the body, at no less than the 500 KiB RFC 9309 section 2.5 requires.
func Parse(body []byte, agent string) *Rules {
	c := compiler{agent: agent}
	grobotstxt.Parse(string(body), &c)
	return c.compile()
}

// Allowed reports whether u may be fetched under r. Only u's path and query
// are used; octets outside US-ASCII are percent-encoded before matching, as
// RFC 9309 section 2.2.2 requires. /robots.txt is always allowed.
func (r *Rules) Allowed(u *url.URL) bool {
	p := escapedPath(u)
	if p == "/robots.txt" {
		return true
	}
	return r.allowed(matchTarget(p, u))
}

// CrawlDelay returns the Crawl-delay, in seconds in the file, of the group
// that applies to the agent, and whether there is one; of several lines the
// largest counts. Values that are not positive numbers ("-1", "0", "abc",
// "10s") are ignored; values above 24 hours ("1e9", "Inf") are cut to 24
// hours.
func (r *Rules) CrawlDelay() (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	return r.delay, r.hasDelay
}

// allowed matches target, an escaped path with its query, against r.
func (r *Rules) allowed(target string) bool {
	if r == nil {
		return true
	}
	if r.index == nil {
		return verdict(r.first(target, r.rules))
	}
	// Only rules whose literal prefix is a prefix of target can match.
	var best rule
	found := false
	for _, l := range r.lens {
		if l > len(target) {
			break
		}
		sp, ok := r.index[target[:l]]
		if !ok {
			continue
		}
		if rl, ok := r.first(target, r.rules[sp.start:sp.end]); ok {
			if !found || rl.n > best.n || rl.n == best.n && rl.allow {
				best, found = rl, true
			}
		}
	}
	return verdict(best, found)
}

// first returns the first rule of rules that matches target.
func (r *Rules) first(target string, rules []rule) (rule, bool) {
	for _, rl := range rules {
		if match(target, r.patterns[rl.off:rl.off+rl.n]) {
			return rl, true
		}
	}
	return rule{}, false
}

// verdict turns the longest matching rule into an answer. An empty pattern
// matches with no weight: when it is the longest match, the URL is allowed.
func verdict(longest rule, found bool) bool {
	return !found || longest.allow || longest.n == 0
}

// literal returns the part of pattern before its first wildcard.
func literal(pattern string) string {
	if i := strings.IndexByte(pattern, '*'); i >= 0 {
		return pattern[:i]
	}
	return strings.TrimSuffix(pattern, "$")
}

// size estimates the bytes r retains.
func (r *Rules) size() int64 {
	if r == nil {
		return 0
	}
	return int64(96 + len(r.patterns) + 16*len(r.rules) + 48*len(r.index) + 8*len(r.lens))
}

// match reports whether path matches pattern: pattern is anchored at the
// start of path, '*' matches any sequence of octets and a '$' ending the
// pattern anchors it at the end of path; anywhere else '$' is literal.
// Matching is linear in len(path) per literal segment and allocates nothing.
func match(path, pattern string) bool {
	anchored := strings.HasSuffix(pattern, "$")
	if anchored {
		pattern = pattern[:len(pattern)-1]
	}
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		if anchored {
			return path == pattern
		}
		return strings.HasPrefix(path, pattern)
	}
	if !strings.HasPrefix(path, pattern[:star]) {
		return false
	}
	path, pattern = path[star:], pattern[star+1:]
	// Place each literal segment between stars at its leftmost
	// occurrence: that leaves the most room for the segments after it.
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			break
		}
		i := strings.Index(path, pattern[:star])
		if i < 0 {
			return false
		}
		path, pattern = path[i+star:], pattern[star+1:]
	}
	if anchored {
		return strings.HasSuffix(path, pattern)
	}
	return strings.Contains(path, pattern)
}

// compiler receives the directives of one robots.txt from grobotstxt and
// keeps those of the groups that apply to agent. Its grouping follows
// Google's matcher: consecutive user-agent lines open one group, the first
// Allow or Disallow after them closes the list of agents, other lines
// (sitemap, crawl-delay, unknown) do not, and rules outside any group are
// ignored.
type compiler struct {
	agent string

	inStar, inAgent bool // the current group names "*" / agent
	closed          bool // a rule was seen since the last user-agent line
	sawAgent        bool // some group names agent

	star, own           []pattern
	starDelay, ownDelay float64 // largest valid Crawl-delay, seconds; 0 if none
}

type pattern struct {
	value string
	allow bool
}

var _ grobotstxt.ParseHandler = (*compiler)(nil)

func (c *compiler) HandleRobotsStart()                         {}
func (c *compiler) HandleRobotsEnd()                           {}
func (c *compiler) HandleSitemap(int, string)                  {}
func (c *compiler) HandleAllow(_ int, value string)            { c.add(value, true) }
func (c *compiler) HandleDisallow(_ int, value string)         { c.add(value, false) }
func (c *compiler) HandleUnknownAction(_ int, key, val string) { c.unknown(key, val) }

func (c *compiler) HandleUserAgent(_ int, value string) {
	if c.closed {
		c.inStar, c.inAgent, c.closed = false, false, false
	}
	// "*" alone, or followed by a space and anything, names every agent.
	if value == "*" || strings.HasPrefix(value, "* ") || strings.HasPrefix(value, "*\t") {
		c.inStar = true
		return
	}
	if c.agent != "" && strings.EqualFold(tokenPrefix(value), c.agent) {
		c.inAgent, c.sawAgent = true, true
	}
}

func (c *compiler) add(value string, allow bool) {
	if !c.inStar && !c.inAgent {
		return
	}
	c.closed = true
	p := pattern{value: value, allow: allow}
	if c.inAgent {
		c.own = append(c.own, p)
	} else {
		c.star = append(c.star, p)
	}
}

func (c *compiler) unknown(key, value string) {
	if !strings.EqualFold(key, "crawl-delay") || (!c.inStar && !c.inAgent) {
		return
	}
	secs, ok := parseDelay(value)
	if !ok {
		return
	}
	if c.inAgent {
		c.ownDelay = max(c.ownDelay, secs)
	} else {
		c.starDelay = max(c.starDelay, secs)
	}
}

// compile builds the Rules of the group that applies: the agent's own
// groups when some group names it, else the "*" groups.
func (c *compiler) compile() *Rules {
	ps, delay := c.star, c.starDelay
	if c.sawAgent {
		ps, delay = c.own, c.ownDelay
	}
	r := &Rules{}
	if delay > 0 {
		r.delay, r.hasDelay = time.Duration(delay*float64(time.Second)), true
	}
	var b strings.Builder
	addRule := func(value string, allow bool) {
		if b.Len()+len(value) > math.MaxUint32 {
			return
		}
		r.rules = append(r.rules, rule{
			off: uint32(b.Len()), n: uint32(len(value)), lit: uint32(len(literal(value))), allow: allow,
		})
		b.WriteString(value)
	}
	for _, p := range ps {
		addRule(p.value, p.allow)
		// Google: allowing ".../index.htm[l]" allows the directory too.
		// The extra pattern only matters when the original does not
		// match, since it is shorter, so adding it as a rule is exact.
		if p.allow {
			if i := strings.LastIndexByte(p.value, '/'); i >= 0 && strings.HasPrefix(p.value[i:], "/index.htm") {
				addRule(p.value[:i+1]+"$", true)
			}
		}
	}
	r.patterns = b.String()
	if len(r.rules) < indexMin {
		slices.SortFunc(r.rules, byWeight)
		return r
	}
	lit := func(rl rule) string { return r.patterns[rl.off : rl.off+rl.lit] }
	slices.SortFunc(r.rules, func(x, y rule) int {
		if c := strings.Compare(lit(x), lit(y)); c != 0 {
			return c
		}
		return byWeight(x, y)
	})
	r.index = make(map[string]span)
	for i := 0; i < len(r.rules); {
		key := lit(r.rules[i])
		j := i + 1
		for j < len(r.rules) && lit(r.rules[j]) == key {
			j++
		}
		r.index[key] = span{start: uint32(i), end: uint32(j)}
		if !slices.Contains(r.lens, len(key)) {
			r.lens = append(r.lens, len(key))
		}
		i = j
	}
	slices.Sort(r.lens)
	return r
}

// byWeight orders rules longest first, and Allow first on equal length, so
// that the first match is the one RFC 9309 section 2.2.2 applies; file
// order breaks the remaining ties.
func byWeight(x, y rule) int {
	if c := cmp.Compare(y.n, x.n); c != 0 {
		return c
	}
	if x.allow != y.allow {
		if x.allow {
			return -1
		}
		return 1
	}
	return cmp.Compare(x.off, y.off)
}

// parseDelay reads a Crawl-delay value in seconds. Negative, zero, NaN and
// malformed values are ignored; values too large to hold are cut to
// maxParsedDelay.
func parseDelay(value string) (float64, bool) {
	secs, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	if math.IsNaN(secs) || secs <= 0 {
		return 0, false
	}
	return min(secs, maxParsedDelay.Seconds()), true
}

// tokenPrefix returns the leading run of s that may appear in a product
// token: letters, '_' and '-' (RFC 9309 section 2.2.1).
func tokenPrefix(s string) string {
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return s[:i]
		}
	}
	return s
}

func isTokenByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || b == '_' || b == '-'
}

// escapedPath returns u's escaped path, "/" when it is empty.
func escapedPath(u *url.URL) string {
	p := u.EscapedPath()
	if u.Opaque != "" {
		p = u.Opaque
	}
	if p == "" || p[0] != '/' {
		return "/" + p
	}
	return p
}

// matchTarget returns what rules are matched against: the escaped path p of
// u with u's query, every octet outside US-ASCII percent-encoded and every
// percent-encoding in upper case, as the patterns are.
func matchTarget(p string, u *url.URL) string {
	if u.RawQuery != "" || u.ForceQuery {
		p += "?" + u.RawQuery
	}
	return normaliseEscapes(p)
}

// normaliseEscapes percent-encodes octets of s outside US-ASCII and writes
// percent-encodings in upper case. It returns s itself when nothing changes.
func normaliseEscapes(s string) string {
	i := 0
	for ; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) && (isLowerHex(s[i+1]) || isLowerHex(s[i+2])) {
			break
		}
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte('%')
			b.WriteByte(upper(s[i+1]))
			b.WriteByte(upper(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

func isLowerHex(b byte) bool { return 'a' <= b && b <= 'f' }

func upper(b byte) byte {
	if isLowerHex(b) {
		return b - ('a' - 'A')
	}
	return b
}
