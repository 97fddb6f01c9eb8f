package robots

import (
	"net/http"
	"time"
)

// Config configures how the egresskit chain obeys robots.txt; a crawler
// author sets it as egresskit.Config.Robots. The zero value is ready to use; each field
// documents its default.
type Config struct {
	// UserAgent is sent as the User-Agent header of every robots.txt
	// fetch; it should be the crawler's own. If empty, the transport's
	// default header is sent.
	UserAgent string

	// AgentToken is the product token matched against user-agent lines.
	// If empty, it is the product token of UserAgent ("MyBot" of
	// "MyBot/1.0 (+url)"); if that is empty too, only the "*" group
	// applies.
	AgentToken string

	// Transport fetches robots.txt. It should be the crawler's base
	// transport: the fetch has its own failure handling and must not go
	// through retries or circuit breakers. If nil, http.DefaultTransport
	// is used.
	Transport http.RoundTripper

	// TTL is how long a fetched robots.txt, or a 4xx answer, is cached.
	// If zero, 24 hours (RFC 9309 section 2.4).
	TTL time.Duration

	// MaxSize is how many bytes of robots.txt are parsed; the rest is
	// ignored, cut back to the last complete line. If zero or below 500
	// KiB, the RFC 9309 minimum, it is 500 KiB.
	MaxSize int64

	// MaxRedirects is how many redirects a fetch follows before it
	// treats robots.txt as unavailable. If zero, 5 (RFC 9309 section
	// 2.3.1.2); if negative, none.
	MaxRedirects int

	// FetchTimeout bounds one fetch, redirects and body included; when it
	// passes, the host counts as unreachable. The caller's context bounds
	// the fetch as well. If zero, 30 seconds.
	FetchTimeout time.Duration

	// RetryBaseDelay is how long an unreachable host stays disallowed before
	// its robots.txt is fetched again; each further failure doubles the
	// wait, up to RetryMaxDelay. If zero, 1 minute.
	RetryBaseDelay time.Duration

	// RetryMaxDelay caps the wait between fetches of an unreachable robots.txt.
	// If zero, 1 hour (or RetryBaseDelay, if that is larger).
	RetryMaxDelay time.Duration

	// UnreachableLimit is how long a host may stay unreachable before it
	// is treated as unavailable and allowed (RFC 9309 section 2.3.1.4
	// suggests 30 days). If zero, 30 days; if negative, never.
	UnreachableLimit time.Duration

	// MaxCrawlDelay caps the Crawl-delay that a robots.txt may ask for.
	// If zero, 60 seconds; if negative, Crawl-delay is ignored.
	MaxCrawlDelay time.Duration

	// MaxHosts bounds how many hosts are cached; the least recently
	// checked host is evicted first. Hosts not checked for TTL are evicted
	// as well. If zero, 10,000.
	MaxHosts int

	// MaxCacheBytes bounds the memory the cached rules retain, estimated
	// from their patterns. If zero, 64 MiB.
	MaxCacheBytes int64

	// Now returns the current time. If nil, time.Now.
	Now func() time.Time
}
