package testprog

import (
	"fmt"
	"strconv"
	"testing"
)

// HAProxyLimit configures a rate-limited HAProxy.
type HAProxyLimit struct {
	// Requests is how many requests a client address may make in any
	// Period; beyond it HAProxy answers 429. It must be positive.
	Requests int
	// Period is the sliding window, in seconds. It must be positive.
	Period int
	// RetryAfter, when positive, is the Retry-After header (in seconds) of
	// every 429.
	RetryAfter int
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

// RateLimitedHAProxy starts a real HAProxy (tested with 2.6) on a free
// loopback port, in the foreground (-db), answering every request itself
// (`http-request return`, no backend): a stick table tracks each client
// address's http_req_rate over the period — a sliding window, HAProxy's
// current period plus the previous one weighted by what is left of it —
// and every request counts, refused ones too (track-sc0 counts before the
// rule that refuses), the form CDN rate-limiting rules also take. Beyond
// lim.Requests it answers 429 (with Retry-After when lim.RetryAfter is
// set), else 200 with a small page. It is killed when the test ends; the
// test is skipped when haproxy is missing, unless EGRESSKIT_REQUIRE_PROGRAMS
// is set.
func RateLimitedHAProxy(t testing.TB, lim HAProxyLimit) *HAProxy {
	t.Helper()
	if lim.Requests <= 0 || lim.Period <= 0 || lim.RetryAfter < 0 {
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
	conf := fmt.Sprintf(`global
  pidfile %[1]s/haproxy.pid
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend limited
  bind 127.0.0.1:%[2]d
  stick-table type ip size 10k expire %[4]ds store http_req_rate(%[4]ds)
  http-request track-sc0 src
  http-request return status 429 content-type text/plain string "too many requests"%[5]s if { sc_http_req_rate(0) gt %[3]d }
  http-request return status 200 content-type text/html string "<!doctype html><title>page</title><p>a page"
`, dir, port, lim.Requests, lim.Period, retryAfter)
	cfg := WriteFile(t, dir, "haproxy.cfg", conf)
	h.Proc = Start(t, Spec{Path: path, Args: []string{"-db", "-f", cfg}, Dir: dir, Port: port})
	return h
}
