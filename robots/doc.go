// Package robots configures how the egresskit chain obeys robots.txt
// (Config, set as egresskit.Config.Robots) and describes the refusal a
// crawler author may meet: a *DisallowedError, matching
// egresskit.ErrDisallowed, whose Source tells a rule of robots.txt from a
// robots.txt that could not be fetched.
//
// The chain fetches /robots.txt once per host (scheme, host and port)
// through the crawler's base transport (never through retries or
// breakers), shares one in-flight fetch among concurrent requests, caches
// the answer for up to a day, and follows RFC 9309:
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
// applies, otherwise the "*" group; the longest matching pattern wins and
// an Allow wins a tie; "*" and a final "$" are wildcards; /robots.txt is
// always allowed. Crawl-delay is not part of RFC 9309 but widely used; the
// chain honours it, clamped to Config.MaxCrawlDelay (60 s by default), as
// the host's rate ceiling.
package robots
