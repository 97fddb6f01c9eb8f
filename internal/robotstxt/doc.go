// Package robotstxt implements the robots.txt half of egresskit's
// authorisation step, configured by robots.Config: RFC 9309 fetching, caching and matching of robots.txt, one file per
// host (scheme, host and port).
//
// A Checker fetches /robots.txt once per host through the caller's base
// transport (never through retries or breakers), shares one in-flight fetch
// among concurrent callers, caches the answer for up to a day and answers
// Check with a Decision. A disallowed URL yields a *robots.DisallowedError,
// matching egresskit.ErrDisallowed for a rule and egresskit.ErrTryLater
// for an unreachable robots.txt.
//
// The fetch follows RFC 9309 section 2.3:
//
//   - 2xx: the rules are parsed, at most 500 KiB of them (section 2.5);
//   - up to five redirects are followed, even to other hosts, and the
//     rules found apply to the original host; more redirects count as
//     unavailable (section 2.3.1.2);
//   - 4xx other than 429: unavailable, every URL is allowed (2.3.1.3);
//   - 5xx, 429, network errors and timeouts: unreachable, every URL is
//     disallowed and the fetch is retried later with exponential backoff
//     (2.3.1.4); after 30 days of unreachability the host is treated as
//     unavailable.
//
// Matching follows RFC 9309 section 2.2 and the behaviour of Google's
// reference parser: the group naming the agent token (case-insensitively)
// applies, otherwise the "*" group; the longest matching pattern wins and an
// Allow wins a tie; "*" and a final "$" are wildcards; /robots.txt is always
// allowed. Lines are tokenised by github.com/jimsmart/grobotstxt, a port of
// Google's parser, and compiled once per fetch into a matcher for one agent,
// so a check does not re-read the file. Answers differ from grobotstxt's
// own matcher only where this package follows RFC 9309 or Google's C++
// parser more closely: /robots.txt is always allowed; percent-encodings
// compare without regard to the case of their hex digits; a product token
// is letters, '_' and '-' only (so "User-agent: FooBot2" names FooBot); and
// "*" names every agent only alone or followed by a space or tab.
//
// Crawl-delay is not part of RFC 9309 but widely used; a Decision reports it,
// sanitised and clamped to robots.Config.MaxCrawlDelay (60 s by default), so that
// the caller can use it as the host's rate ceiling.
//
// Parse and Rules serve callers that fetch robots.txt themselves (the
// benchmarks); Transport wraps an http.RoundTripper with a Checker.
package robotstxt
