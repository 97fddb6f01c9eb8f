package robotstxt_test

import (
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jimsmart/grobotstxt"

	"github.com/egresskit/egresskit/internal/robotstxt"
)

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", raw, err)
	}
	return u
}

// TestRulesAllowed covers the RFC 9309 matching rules beyond Google's
// vectors: ties, longest match, groups and /robots.txt.
func TestRulesAllowed(t *testing.T) {
	tests := []struct {
		name   string
		robots string
		agent  string
		path   string
		want   bool
	}{
		{"no file", "", "FooBot", "/x", true},
		{"longest match wins over order", "User-agent: *\nAllow: /a/b\nDisallow: /a\n", "FooBot", "/a/b/c", true},
		{"longest disallow wins", "User-agent: *\nAllow: /a\nDisallow: /a/b\n", "FooBot", "/a/b/c", false},
		{"tie: allow wins", "User-agent: *\nDisallow: /a\nAllow: /a\n", "FooBot", "/a", true},
		{"tie of wildcards: allow wins", "User-agent: *\nDisallow: /*.gif\nAllow: /*.gif\n", "FooBot", "/x.gif", true},
		{"pattern length counts wildcards", "User-agent: *\nAllow: /ab\nDisallow: /a*\n", "FooBot", "/ab", true},
		{"longer wildcard beats literal", "User-agent: *\nAllow: /ab\nDisallow: /a*b\n", "FooBot", "/ab", false},
		{"robots.txt always allowed", "User-agent: *\nDisallow: /\n", "FooBot", "/robots.txt", true},
		{"robots.txt query still allowed", "User-agent: *\nDisallow: /\n", "FooBot", "/robots.txt?x=1", true},
		{"other txt not implicit", "User-agent: *\nDisallow: /\n", "FooBot", "/robots.txt.bak", false},
		{"agent group beats star", "User-agent: *\nDisallow: /\n\nUser-agent: FooBot\nAllow: /\n", "FooBot", "/x", true},
		{"star applies to others", "User-agent: *\nDisallow: /\n\nUser-agent: FooBot\nAllow: /\n", "BarBot", "/x", false},
		{"agent match ignores case", "User-agent: foobot\nDisallow: /\n", "FOOBOT", "/x", false},
		{"agent line version ignored", "User-agent: FooBot/2.1\nDisallow: /\n", "FooBot", "/x", false},
		{"agent is not a prefix match", "User-agent: Foo\nDisallow: /\n", "FooBot", "/x", true},
		{"empty group of agent allows all", "User-agent: FooBot\n\nUser-agent: *\nDisallow: /\n", "FooBot", "/x", false},
		{"agent group without rules hides star", "User-agent: FooBot\nCrawl-delay: 1\n\nUser-agent: *\nDisallow: /\n", "FooBot", "/x", false},
		{"two groups of agent merge", "User-agent: FooBot\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\nUser-agent: FooBot\nDisallow: /b\n", "FooBot", "/b/1", false},
		{"merged groups keep allow", "User-agent: FooBot\nDisallow: /a\n\nUser-agent: FooBot\nDisallow: /b\n", "FooBot", "/c", true},
		{"empty agent uses star", "User-agent: *\nDisallow: /\n", "", "/x", false},
		{"dollar anchors", "User-agent: *\nDisallow: /*.php$\n", "FooBot", "/a.php?x", true},
		{"dollar anchors match", "User-agent: *\nDisallow: /*.php$\n", "FooBot", "/a.php", false},
		{"query is matched", "User-agent: *\nDisallow: /*?session=\n", "FooBot", "/a?session=1", false},
		{"lower-case escapes in URL normalised", "User-agent: *\nDisallow: /%E3%83%84\n", "FooBot", "/%e3%83%84", false},
		{"raw UTF-8 query encoded", "User-agent: *\nDisallow: /?q=ツ\n", "FooBot", "/?q=ツ", false},
		{"empty disallow allows", "User-agent: *\nDisallow:\n", "FooBot", "/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := mustURL(t, "http://example.com"+tt.path)
			if got := robotstxt.Parse([]byte(tt.robots), tt.agent).Allowed(u); got != tt.want {
				t.Errorf("Parse(%q, %q).Allowed(%q) = %v, want %v", tt.robots, tt.agent, tt.path, got, tt.want)
			}
		})
	}
}

// TestRulesBadInput feeds malformed files through Parse: each must parse
// without panicking and give the stated answer.
func TestRulesBadInput(t *testing.T) {
	const rules = "User-agent: *\nDisallow: /private\n"
	long := "User-agent: *\nDisallow: /" + strings.Repeat("x", 1<<20) + "\nDisallow: /private\n"
	garbage := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	tests := []struct {
		name string
		body []byte
		path string
		want bool
	}{
		{"BOM", []byte("\xEF\xBB\xBF" + rules), "/private", false},
		{"partial BOM", []byte("\xEF\xBB" + rules), "/private", false},
		{"BOM mid-file is garbage", []byte("User-agent: *\n\xEF\xBB\xBFDisallow: /private\n"), "/private", true},
		{"CRLF", []byte(strings.ReplaceAll(rules, "\n", "\r\n")), "/private", false},
		{"bare CR", []byte(strings.ReplaceAll(rules, "\n", "\r")), "/private", false},
		{"mixed line ends", []byte("User-agent: *\r\nAllow: /private/ok\rDisallow: /private\n"), "/private/ok", true},
		{"no final newline", []byte(strings.TrimSuffix(rules, "\n")), "/private", false},
		{"very long line", []byte(long), "/private", false},
		{"NUL bytes", []byte("User-agent: *\x00\nDisallow: /private\x00\n"), "/private", true},
		{"binary garbage", garbage, "/x", true},
		{"garbage then rules", append(append([]byte{}, garbage[:4096]...), "\n"+rules...), "/private", false},
		{"HTML page", []byte("<html><body>Not found</body></html>"), "/private", true},
		{"only colons", []byte(":::\n: :\n::/\n"), "/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := mustURL(t, "http://example.com"+tt.path)
			if got := robotstxt.Parse(tt.body, "FooBot").Allowed(u); got != tt.want {
				t.Errorf("Parse(%.40q).Allowed(%q) = %v, want %v", tt.body, tt.path, got, tt.want)
			}
		})
	}
}

// TestCrawlDelay covers Crawl-delay parsing: malformed values are ignored,
// huge ones cut to 24 h (the Checker clamps further), groups apply.
func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		robots string
		want   time.Duration
		ok     bool
	}{
		{"User-agent: *\nCrawl-delay: 10\n", 10 * time.Second, true},
		{"User-agent: *\nCrawl-delay: 0.5\n", 500 * time.Millisecond, true},
		{"User-agent: *\ncrawl-DELAY: 3 # seconds\n", 3 * time.Second, true},
		{"User-agent: *\nCrawl-delay: -1\n", 0, false},
		{"User-agent: *\nCrawl-delay: abc\n", 0, false},
		{"User-agent: *\nCrawl-delay: 10s\n", 0, false},
		{"User-agent: *\nCrawl-delay: 0\n", 0, false},
		{"User-agent: *\nCrawl-delay: NaN\n", 0, false},
		{"User-agent: *\nCrawl-delay: 1e9\n", 24 * time.Hour, true},
		{"User-agent: *\nCrawl-delay: 1e999\n", 24 * time.Hour, true},
		{"User-agent: *\nCrawl-delay:\n", 0, false},
		{"Crawl-delay: 5\nUser-agent: *\n", 0, false}, // outside any group
		{"User-agent: *\nCrawl-delay: 2\nCrawl-delay: 7\n", 7 * time.Second, true},
		{"User-agent: *\nCrawl-delay: 9\n\nUser-agent: FooBot\nCrawl-delay: 2\n", 2 * time.Second, true},
		{"User-agent: *\nCrawl-delay: 9\n\nUser-agent: FooBot\nDisallow: /x\n", 0, false},
		{"User-agent: BarBot\nCrawl-delay: 9\n", 0, false},
	}
	for _, tt := range tests {
		got, ok := robotstxt.Parse([]byte(tt.robots), "FooBot").CrawlDelay()
		if got != tt.want || ok != tt.ok {
			t.Errorf("Parse(%q).CrawlDelay() = %v, %v, want %v, %v", tt.robots, got, ok, tt.want, tt.ok)
		}
	}
}

func TestAgentToken(t *testing.T) {
	tests := []struct{ ua, want string }{
		{"MyBot/1.0 (+https://example.com/bot)", "MyBot"},
		{"MyBot", "MyBot"},
		{"my_bot-x/2", "my_bot-x"},
		{"  MyBot/1.0", "MyBot"},
		{"MyBot (+https://example.com)", "MyBot"},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Googlebot"},
		{"Mozilla/5.0 (compatible;MyBot/1.0)", "MyBot"},
		{"Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0", "Mozilla"},
		{"My2Bot/1.0", "My"},
		{"ツBot/1.0", ""},
		{"123/1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := robotstxt.AgentToken(tt.ua); got != tt.want {
			t.Errorf("AgentToken(%q) = %q, want %q", tt.ua, got, tt.want)
		}
	}
}

// TestMatchesGoogleParser compares Parse/Allowed with grobotstxt, the Go
// port of Google's parser, on random files built from a small grammar that
// avoids their known, deliberate differences (agent tokens with digits,
// URL normalisation). Files long enough to be indexed are included.
func TestMatchesGoogleParser(t *testing.T) {
	rng := rand.New(rand.NewPCG(9309, 2022))
	pieces := []string{"/", "a", "b", "/a", "/b/", "*", "$", ".", "?", "=", "index.html", "%2F", "%2f", "ü"}
	agents := []string{"*", "FooBot", "foobot", "BarBot", "FooBot/1.0", "* extra", "Foo Bot"}
	keys := []string{"Allow", "Disallow", "allow", "DISALLOW", "Disalow"}
	pattern := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for i := range 10000 {
		var b strings.Builder
		for range rng.IntN(10 + 70*(i%2)) {
			switch rng.IntN(10) {
			case 0, 1:
				b.WriteString("User-agent: " + agents[rng.IntN(len(agents))])
			case 2:
				b.WriteString("Crawl-delay: 3")
			case 3:
				b.WriteString("# " + pattern())
			case 4:
				b.WriteString("")
			default:
				b.WriteString(keys[rng.IntN(len(keys))] + ": " + pattern())
			}
			b.WriteString([]string{"\n", "\r\n", "\r"}[rng.IntN(3)])
		}
		body := b.String()
		path := "/"
		for range rng.IntN(4) {
			p := pieces[rng.IntN(len(pieces))]
			if p != "*" && p != "%2f" && p != "ü" {
				path += p
			}
		}
		u := mustURL(t, "http://example.com"+path)
		want := grobotstxt.AgentAllowed(body, "FooBot", u.String())
		if got := robotstxt.Parse([]byte(body), "FooBot").Allowed(u); got != want {
			t.Fatalf("case %d: Parse(%q).Allowed(%q) = %v, grobotstxt says %v", i, body, path, got, want)
		}
	}
}

// FuzzParse checks that no input panics Parse or Allowed, that /robots.txt
// stays allowed, that Crawl-delay is sane, and that Allowed answers as
// Google's parser (grobotstxt) does on the same file and URL, except in the
// documented cases listed in googleDifference. The file is body followed by
// lines built from recipe (see grammarFile), so that the fuzzer reaches
// well-formed groups and rules quickly as well as arbitrary bytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "User-agent: *\nDisallow: /\n", "\xEF\xBB\xBFUser-agent: *\r\nDisallow: /a*b$\r\n",
		"User-agent: FooBot\rAllow: /index.html\rDisallow: /\r", "user-agent FooBot\ndisallow /\n",
		"User-agent: *\nCrawl-delay: 1e9\nCrawl-delay: -1\nCrawl-delay: abc\n", "\x00\xff\xfe:\n:",
		"User-agent: *\nDisallow: /" + strings.Repeat("a", 20000) + "\n",
		"User-agent: FooBot\nDisallow: /a\nAllow: /a/b\nUser-agent: *\nDisallow: /\n",
		"User-agent: *\nDisallow: /a*b$\nAllow: /a/*.html\n",
		"User-agent: FooBot2\nDisallow: /\n", "User-agent: *\vx\nDisallow: /\n",
		"User-agent: *\nDisallow: /%2F\nDisallow: /robots.txt\n",
	} {
		f.Add([]byte(s), "a/b?c=d", []byte{})
	}
	f.Add([]byte("User-agent: *\nDisallow: /%2F\n"), "%2f", []byte{})
	f.Add([]byte("User-agent: *\nDisallow: /robots.txt\n"), "robots.txt", []byte{})
	f.Add([]byte{}, "", []byte{0, 0, 1, 0, 1, 3, 1, 1, 1, 3}) // Allow and Disallow of equal length
	f.Add([]byte{}, "a/b", []byte{0, 1, 5, 2, 3, 6, 4, 1, 7, 3, 6})
	f.Add([]byte{}, "b/index.html", []byte{1, 1, 5, 0, 8, 6, 3, 1, 9, 2, 2, 0, 4})
	f.Fuzz(func(t *testing.T, body []byte, path string, recipe []byte) {
		lines, prefix := grammarFile(recipe)
		body = append(body, lines...)
		r := robotstxt.Parse(body, "FooBot")
		if !r.Allowed(&url.URL{Path: "/robots.txt"}) {
			t.Fatalf("Parse(%q) disallows /robots.txt", body)
		}
		if d, ok := r.CrawlDelay(); d < 0 || d > 24*time.Hour || ok != (d > 0) {
			t.Fatalf("CrawlDelay() = %v, %v", d, ok)
		}
		u, err := url.Parse("http://example.com/" + strings.TrimPrefix(prefix, "/") + path)
		if err != nil {
			return
		}
		got := r.Allowed(u)
		want := grobotstxt.AgentAllowed(string(body), "FooBot", u.String())
		if got != want && !googleDifference(string(body), u) {
			t.Fatalf("Parse(%q).Allowed(%q) = %v, grobotstxt says %v", body, u.String(), got, want)
		}
	})
}

func loadBig(b *testing.B) []byte {
	body, err := os.ReadFile("testdata/robots_100k.txt")
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkAllowed measures one check against a 100 KiB robots.txt whose
// rules the URL does not match.
func BenchmarkAllowed(b *testing.B) {
	r := robotstxt.Parse(loadBig(b), "FooBot")
	u := mustURL(b, "https://www.example.com/catalog/widget-4242/details?color=blue")
	b.ReportAllocs()
	for b.Loop() {
		if !r.Allowed(u) {
			b.Fatal("disallowed")
		}
	}
}

// BenchmarkParse measures parsing a 100 KiB robots.txt, once per fetch.
func BenchmarkParse(b *testing.B) {
	body := loadBig(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		robotstxt.Parse(body, "FooBot")
	}
}

// grammarFile turns recipe into robots.txt lines: each line takes one byte
// for its kind and one byte per piece of its value, drawn from small
// vocabularies of agents, keys and path pieces. It also returns the last
// rule's value without wildcards, a path prefix that rules of the file
// are likely to match.
func grammarFile(recipe []byte) (lines []byte, prefix string) {
	agents := []string{"*", "FooBot", "foobot", "BarBot", "FooBot/1.0", "* extra", "Foo Bot", "FooBot2"}
	keys := []string{"Allow", "Disallow", "allow", "DISALLOW", "Disalow", "Crawl-delay", "Sitemap"}
	pieces := []string{"/", "a", "b", "/a", "/b/", "*", "$", ".", "?", "=", "index.html", "%2F", "%2f", "ü", "%C3%BC"}
	ends := []string{"\n", "\r\n", "\r"}
	next := func() int {
		if len(recipe) == 0 {
			return 0
		}
		b := int(recipe[0])
		recipe = recipe[1:]
		return b
	}
	var out []byte
	for len(recipe) > 0 {
		kind := next()
		switch kind % 4 {
		case 0:
			out = append(out, "User-agent: "+agents[next()%len(agents)]...)
		default:
			out = append(out, keys[next()%len(keys)]+": "...)
			var v strings.Builder
			for range next() % 5 {
				v.WriteString(pieces[next()%len(pieces)])
			}
			out = append(out, v.String()...)
			prefix = strings.NewReplacer("*", "", "$", "").Replace(v.String())
		}
		out = append(out, ends[(kind/4)%len(ends)]...)
	}
	return out, prefix
}

// googleDifference reports whether body and u fall in one of the cases in
// which Parse/Allowed answers differently from grobotstxt on purpose (the
// package documentation lists them):
//
//   - /robots.txt itself is always allowed (RFC 9309 section 2.2.2);
//     grobotstxt matches it like any path.
//   - Percent-encodings are compared without regard to the case of their
//     hex digits (RFC 3986 section 6.2.2.1): "/%2f" matches "Disallow: /%2F".
//     grobotstxt upper-cases the pattern's but not the URL's.
//   - A user-agent line's product token is its leading run of letters, '_'
//     and '-' (RFC 9309 section 2.2.1, as in Google's C++ parser), so
//     "User-agent: FooBot2" names FooBot; grobotstxt also takes digits and
//     ~#$%'*+.^`| into the token.
//   - "*" followed by a space or a tab names every agent; grobotstxt also
//     accepts any byte that unicode.IsSpace calls a space (\v, \f, 0x85,
//     0xA0).
func googleDifference(body string, u *url.URL) bool {
	if u.EscapedPath() == "/robots.txt" {
		return true
	}
	if lowerHexEscape(u.EscapedPath()) || lowerHexEscape(u.RawQuery) {
		return true
	}
	var agents agentLines
	grobotstxt.Parse(body, &agents)
	for _, v := range agents {
		if len(v) > 1 && v[0] == '*' && v[1] != ' ' && v[1] != '\t' && unicode.IsSpace(rune(v[1])) {
			return true
		}
		n := len("FooBot")
		if len(v) > n && strings.EqualFold(v[:n], "FooBot") && isGoogleTokenByte(v[n]) &&
			!('a' <= v[n]|0x20 && v[n]|0x20 <= 'z' || v[n] == '_' || v[n] == '-') {
			return true
		}
	}
	return false
}

// lowerHexEscape reports whether s holds a percent-encoding written with a
// lower-case hex digit.
func lowerHexEscape(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '%' && isHexDigit(s[i+1]) && isHexDigit(s[i+2]) &&
			('a' <= s[i+1] && s[i+1] <= 'f' || 'a' <= s[i+2] && s[i+2] <= 'f') {
			return true
		}
	}
	return false
}

func isHexDigit(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// isGoogleTokenByte reports whether grobotstxt counts b as part of an agent
// token: letters, digits and ~#$%'*+-.^_`|.
func isGoogleTokenByte(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'z' || strings.IndexByte("~#$%'*+-.^_`|", b) >= 0
}

// agentLines collects the values of a robots.txt's user-agent lines as
// Google's tokeniser reads them.
type agentLines []string

func (a *agentLines) HandleUserAgent(_ int, v string)         { *a = append(*a, v) }
func (a *agentLines) HandleRobotsStart()                      {}
func (a *agentLines) HandleRobotsEnd()                        {}
func (a *agentLines) HandleAllow(int, string)                 {}
func (a *agentLines) HandleDisallow(int, string)              {}
func (a *agentLines) HandleSitemap(int, string)               {}
func (a *agentLines) HandleUnknownAction(int, string, string) {}
