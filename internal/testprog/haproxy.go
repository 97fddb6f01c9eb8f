package testprog

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// HAProxyLimit configures a rate-limited HAProxy.
type HAProxyLimit struct {
	// Requests is how many requests a client address may make in any
	// Period; beyond it HAProxy answers 429. It must be positive.
	Requests int
	// Period is the window. It must be a positive whole number of
	// milliseconds, and of seconds with Advertise.
	Period time.Duration
	// RetryAfter, when positive, is the Retry-After header (in seconds) of
	// every 429. It must be 0 with Advertise, whose 429s say when the
	// window ends.
	RetryAfter int
	// Advertise makes the limit a fixed window that HAProxy advertises,
	// the form of API quotas (GitHub's, and many others'): the count
	// starts again at every multiple of Period seconds of the clock, and
	// every answer carries X-RateLimit-Limit (Requests),
	// X-RateLimit-Remaining (what the window has left after this request)
	// and X-RateLimit-Reset (whole seconds to the window's end); a 429
	// also carries Retry-After with the seconds to the window's end.
	// Without it the window slides (http_req_rate).
	Advertise bool
	// PerHost keys the limit by the request's Host header instead of the
	// client address: every host name reaching HAProxy is a site limited
	// on its own. Not with Advertise.
	PerHost bool
}

// HAProxy is a running HAProxy that limits every client address with a
// stick table.
type HAProxy struct {
	*Proc
	// URL is "http://127.0.0.1:PORT"; every path under it is a 200 page
	// while the client keeps to the limit.
	URL string
	// Version is HAProxy's version ("2.6.12-1+deb12u4").
	Version string
}

// haproxyHead is the start of both configurations: the pid file in the
// directory %[1]s, a frontend on port %[2]d.
const haproxyHead = `global
  pidfile %[1]s/haproxy.pid
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend limited
  bind 127.0.0.1:%[2]d`

// haproxyAdvertised is the advertised fixed window of %[3]d requests per
// %[4]d seconds: the stick table's key is the client address and the
// window's number (the clock's seconds divided by the period), its
// http_req_cnt the requests of that window, refused ones too.
const haproxyAdvertised = `
  stick-table type string len 64 size 10k expire %[4]ds store http_req_cnt
  http-request set-var(txn.window) date,div(%[4]d)
  http-request set-var(txn.key) src,concat(/,txn.window)
  http-request track-sc0 var(txn.key)
  http-request set-var(txn.count) sc_http_req_cnt(0)
  http-request set-var(txn.remaining) int(%[3]d),sub(txn.count)
  http-request set-var(txn.reset) date,mod(%[4]d),neg,add(%[4]d)
  http-request return status 429 content-type text/plain string "too many requests" hdr Retry-After "%%[var(txn.reset)]" hdr X-RateLimit-Limit %[3]d hdr X-RateLimit-Remaining 0 hdr X-RateLimit-Reset "%%[var(txn.reset)]" if { var(txn.count) -m int gt %[3]d }
  http-request return status 200 content-type text/html string "<!doctype html><title>page</title><p>a page" hdr X-RateLimit-Limit %[3]d hdr X-RateLimit-Remaining "%%[var(txn.remaining)]" hdr X-RateLimit-Reset "%%[var(txn.reset)]"
`

// RateLimitedHAProxy starts a real HAProxy (tested with 2.6) on a free
// loopback port, in the foreground (-db), answering every request itself
// (`http-request return`, no backend): a stick table tracks each client
// address's http_req_rate over the period — a sliding window, HAProxy's
// current period plus the previous one weighted by what is left of it —
// and every request counts, refused ones too (track-sc0 counts before the
// rule that refuses), the form CDN rate-limiting rules also take. Beyond
// lim.Requests it answers 429 (with Retry-After when lim.RetryAfter is
// set), else 200 with a small page. With lim.Advertise the window is
// fixed and advertised in X-RateLimit-* fields instead. It is killed when the test ends; the
// test is skipped when haproxy is missing, unless EGRESSKIT_REQUIRE_PROGRAMS
// is set.
func RateLimitedHAProxy(t testing.TB, lim HAProxyLimit) *HAProxy {
	t.Helper()
	if lim.Requests <= 0 || lim.Period < time.Millisecond || lim.Period%time.Millisecond != 0 || lim.RetryAfter < 0 ||
		(lim.Advertise && (lim.RetryAfter != 0 || lim.Period%time.Second != 0 || lim.PerHost)) {
		t.Fatalf("testprog: bad haproxy limit %+v", lim)
	}
	path := Need(t, "haproxy")
	dir := programDir(t)
	port := FreePort(t)
	h := &HAProxy{URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	h.Version = version(path, nil, "", "haproxy")
	retryAfter := ""
	if lim.RetryAfter > 0 {
		retryAfter = fmt.Sprintf(` hdr Retry-After "%d"`, lim.RetryAfter)
	}
	table, key := "ip", "src"
	if lim.PerHost {
		table, key = "string len 128", "req.hdr(host)"
	}
	conf := fmt.Sprintf(haproxyHead+`
  stick-table type %[6]s size 10k expire %[4]dms store http_req_rate(%[4]dms)
  http-request track-sc0 %[7]s
  http-request return status 429 content-type text/plain string "too many requests"%[5]s if { sc_http_req_rate(0) gt %[3]d }
  http-request return status 200 content-type text/html string "<!doctype html><title>page</title><p>a page"
`, dir, port, lim.Requests, lim.Period.Milliseconds(), retryAfter, table, key)
	if lim.Advertise {
		conf = fmt.Sprintf(haproxyHead+haproxyAdvertised, dir, port, lim.Requests, int(lim.Period.Seconds()))
	}
	cfg := WriteFile(t, dir, "haproxy.cfg", conf)
	h.Proc = Start(t, Spec{Path: path, Args: []string{"-db", "-f", cfg}, Dir: dir, Port: port})
	return h
}
