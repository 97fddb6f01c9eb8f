package testprog

import (
	"math"
	"testing"
	"time"
)

// A Limiter is one kind of real rate limiter that the politeness tests
// and benchmarks crawl.
type Limiter struct {
	// Name names the kind in test names and tables.
	Name string
	// Advertised is true for a limiter whose 429s say when its window
	// ends: a Setting's RetryAfter does not apply to it.
	Advertised bool

	start func(tb testing.TB, s Setting) Limited
}

// Setting is the configuration of one cell of the limiter matrix: a
// limiter kind allowing PerSecond requests a second per client address.
type Setting struct {
	// PerSecond is the rate allowed, a whole number of requests a minute
	// (1.5 is 90 a minute). It must be positive.
	PerSecond float64
	// RetryAfter is the Retry-After of every 429, in seconds. Zero: 2,
	// production's; it must be 0 for an Advertised kind.
	RetryAfter int
}

// Start starts one that allows perSecond requests a second per client
// address, configured as production configures it, for the life of tb.
func (l Limiter) Start(tb testing.TB, perSecond int) Limited {
	tb.Helper()
	return l.StartAt(tb, Setting{PerSecond: float64(perSecond)})
}

// StartAt starts one configured as s, for the life of tb.
func (l Limiter) StartAt(tb testing.TB, s Setting) Limited {
	tb.Helper()
	perMinute := s.PerSecond * 60
	if perMinute < 1 || perMinute != math.Trunc(perMinute) || s.RetryAfter < 0 || (l.Advertised && s.RetryAfter != 0) {
		tb.Fatalf("testprog: bad setting %+v of limiter %s", s, l.Name)
	}
	if s.RetryAfter == 0 && !l.Advertised {
		s.RetryAfter = 2
	}
	return l.start(tb, s)
}

// Limited is a running limiter.
type Limited struct {
	// URL is "http://127.0.0.1:PORT"; every path under it is a page.
	URL string
	// Log returns the access log (end time, duration and status per
	// line), or "" when the program keeps none.
	Log func() string
}

// shortWindow is the allowance of the haproxy-short limiter: the burst
// of the politeness tests' crawler.
const shortWindow = 5

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
//     requests counted; Retry-After: the seconds to the window's end;
//   - haproxy-short: HAProxy's sliding window as short as a burst: it
//     allows shortWindow requests in any shortWindow/rate seconds (2.5 s
//     at 2 r/s), so its allowance is the burst the crawler is configured
//     with, refused requests counted; Retry-After: 2.
var Limiters = []Limiter{
	{Name: "nginx-delay", start: func(tb testing.TB, s Setting) Limited {
		n := RateLimitedNginx(tb, NginxLimit{PerSecond: s.PerSecond, Burst: 1, RetryAfter: s.RetryAfter})
		return Limited{n.URL, n.Log}
	}},
	{Name: "nginx-nodelay", start: func(tb testing.TB, s Setting) Limited {
		n := RateLimitedNginx(tb, NginxLimit{PerSecond: s.PerSecond, Burst: 1, NoDelay: true, RetryAfter: s.RetryAfter})
		return Limited{n.URL, n.Log}
	}},
	{Name: "haproxy", start: func(tb testing.TB, s Setting) Limited {
		h := RateLimitedHAProxy(tb, HAProxyLimit{Requests: int(math.Round(10 * s.PerSecond)), Period: 10 * time.Second, RetryAfter: s.RetryAfter})
		return Limited{h.URL, noLog}
	}},
	{Name: "haproxy-quota", Advertised: true, start: func(tb testing.TB, s Setting) Limited {
		h := RateLimitedHAProxy(tb, HAProxyLimit{Requests: int(math.Round(10 * s.PerSecond)), Period: 10 * time.Second, Advertise: true})
		return Limited{h.URL, noLog}
	}},
	{Name: "haproxy-short", start: func(tb testing.TB, s Setting) Limited {
		period := time.Duration(float64(shortWindow) / s.PerSecond * float64(time.Second)).Round(time.Millisecond)
		h := RateLimitedHAProxy(tb, HAProxyLimit{Requests: shortWindow, Period: period, RetryAfter: s.RetryAfter})
		return Limited{h.URL, noLog}
	}},
}

func noLog() string { return "" }
