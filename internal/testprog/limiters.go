package testprog

import "testing"

// A Limiter is one kind of real rate limiter that the politeness tests
// and benchmarks crawl.
type Limiter struct {
	// Name names the kind in test names and tables.
	Name string
	// Start starts one that allows perSecond requests a second per client
	// address, for the life of tb.
	Start func(tb testing.TB, perSecond int) Limited
}

// Limited is a running limiter.
type Limited struct {
	// URL is "http://127.0.0.1:PORT"; every path under it is a page.
	URL string
	// Log returns the access log (end time, duration and status per
	// line), or "" when the program keeps none.
	Log func() string
}

// Limiters are the limiters as production configures them, each
// answering 429 beyond its limit:
//
//   - nginx-delay: nginx limit_req, burst=1, the excess queued;
//     Retry-After: 2;
//   - nginx-nodelay: nginx limit_req, burst=1 nodelay, the excess refused
//     at once; Retry-After: 2;
//   - haproxy: HAProxy, http_req_rate over a 10 s sliding window, refused
//     requests counted; Retry-After: 2;
//   - haproxy-quota: HAProxy, a fixed 10 s window advertised in
//     X-RateLimit-Limit, -Remaining and -Reset on every answer, refused
//     requests counted; Retry-After: the seconds to the window's end.
var Limiters = []Limiter{
	{"nginx-delay", func(tb testing.TB, ps int) Limited {
		n := RateLimitedNginx(tb, NginxLimit{PerSecond: ps, Burst: 1, RetryAfter: 2})
		return Limited{n.URL, n.Log}
	}},
	{"nginx-nodelay", func(tb testing.TB, ps int) Limited {
		n := RateLimitedNginx(tb, NginxLimit{PerSecond: ps, Burst: 1, NoDelay: true, RetryAfter: 2})
		return Limited{n.URL, n.Log}
	}},
	{"haproxy", func(tb testing.TB, ps int) Limited {
		h := RateLimitedHAProxy(tb, HAProxyLimit{Requests: 10 * ps, Period: 10, RetryAfter: 2})
		return Limited{h.URL, noLog}
	}},
	{"haproxy-quota", func(tb testing.TB, ps int) Limited {
		h := RateLimitedHAProxy(tb, HAProxyLimit{Requests: 10 * ps, Period: 10, Advertise: true})
		return Limited{h.URL, noLog}
	}},
}

func noLog() string { return "" }
