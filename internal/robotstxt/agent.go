package robotstxt

import "strings"

// AgentToken derives the robots.txt agent token from a User-Agent header
// value: the product name before the first '/', cut to the characters RFC
// 9309 section 2.2.1 allows in a product token (letters, '_' and '-').
//
//	AgentToken("MyBot/1.0 (+https://example.com/bot)") == "MyBot"
//	AgentToken("Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)") == "MyBot"
//
// A browser-style value whose product is "Mozilla" and whose comment starts
// with "compatible;" names the crawler after it, as above. AgentToken
// returns "" when no token can be derived; then only the "*" group applies.
func AgentToken(userAgent string) string {
	ua := strings.TrimSpace(userAgent)
	product, rest := ua, ""
	if i := strings.IndexAny(ua, " \t("); i >= 0 {
		product, rest = ua[:i], ua[i:]
	}
	if name, _, _ := strings.Cut(product, "/"); strings.EqualFold(name, "Mozilla") {
		if _, after, ok := strings.Cut(rest, "(compatible;"); ok {
			return tokenPrefix(strings.TrimLeft(after, " \t"))
		}
	}
	return tokenPrefix(product)
}
