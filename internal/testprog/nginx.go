package testprog

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// NginxLimit configures a rate-limited nginx.
type NginxLimit struct {
	// PerSecond is limit_req's rate per client address, in requests per
	// second. It must be positive and a whole number of requests a second
	// or a minute (nginx's r/s and r/m): 1.5 is 90r/m.
	PerSecond float64
	// Burst is limit_req's burst: how many excess requests nginx delays
	// (in its default, non-nodelay mode) rather than refuses.
	Burst int
	// NoDelay refuses the excess beyond Burst at once instead of
	// queueing it (limit_req's nodelay, its common production form): the
	// burst is let through without delay, and the next request beyond the
	// rate is answered 429.
	NoDelay bool
	// RetryAfter, when positive, is the Retry-After header (in seconds) of
	// every 429.
	RetryAfter int
	// PerHost keys the limit by the request's host name instead of the
	// client address: every host name reaching nginx is a site limited on
	// its own.
	PerHost bool
}

// Nginx is a running nginx that paces every client address with
// limit_req and answers 429 beyond it.
type Nginx struct {
	*Proc
	// URL is "http://127.0.0.1:PORT"; every path under it is a 200 page
	// while the client keeps to the limit.
	URL string
	// Version is nginx's version ("nginx/1.22.1").
	Version string

	log string // the access log: end time, duration and status per line
}

// RateLimitedNginx starts a real nginx (tested with 1.22) on a free
// loopback port: one process in the foreground (daemon off, master_process
// off) with its configuration, logs, pid and temporary paths in a
// directory of its own, serving one page for every path through
// `limit_req zone=... burst=N [nodelay]` with `limit_req_status 429` and, when
// lim.RetryAfter is set, `Retry-After` on every 429 (add_header ... always).
// It is killed when the test ends; the test is skipped when nginx is
// missing, unless EGRESSKIT_REQUIRE_PROGRAMS is set.
func RateLimitedNginx(t testing.TB, lim NginxLimit) *Nginx {
	t.Helper()
	rate := ""
	switch perMinute := lim.PerSecond * 60; {
	case lim.PerSecond > 0 && lim.PerSecond == math.Trunc(lim.PerSecond):
		rate = fmt.Sprintf("%dr/s", int(lim.PerSecond))
	case perMinute > 0 && perMinute == math.Trunc(perMinute):
		rate = fmt.Sprintf("%dr/m", int(perMinute))
	}
	if rate == "" || lim.Burst < 0 || lim.RetryAfter < 0 {
		t.Fatalf("testprog: bad nginx limit %+v", lim)
	}
	path := Need(t, "nginx")
	dir := programDir(t)
	port := FreePort(t)
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err != nil {
		t.Fatal(err)
	}
	WriteFile(t, www, "page.html", "<!doctype html><title>page</title><p>a page\n")
	n := &Nginx{URL: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "access.log")}
	n.Version = version(path, []string{"-v"}, "nginx version: ", "")
	burst := ""
	if lim.Burst > 0 {
		burst = " burst=" + strconv.Itoa(lim.Burst)
	}
	if lim.NoDelay {
		burst += " nodelay"
	}
	retryAfter := ""
	if lim.RetryAfter > 0 {
		retryAfter = strconv.Itoa(lim.RetryAfter)
	}
	key := "$binary_remote_addr"
	if lim.PerHost {
		key = "$host"
	}
	// try_files serves the page after limit_req's preaccess phase (a
	// `return` would answer before it, unlimited). The map gives 429s, and
	// only them, a Retry-After: add_header skips an empty value.
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 512; }
http {
  log_format status '$msec $request_time $status $limit_req_status';
  access_log %[1]s/access.log status;
  client_body_temp_path %[1]s;
  proxy_temp_path %[1]s;
  fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s;
  scgi_temp_path %[1]s;
  limit_req_zone %[7]s zone=clients:10m rate=%[3]s;
  limit_req_status 429;
  map $status $retry_after { 429 "%[5]s"; default ""; }
  server {
    listen 127.0.0.1:%[2]d;
    root %[6]s;
    location / {
      limit_req zone=clients%[4]s;
      add_header Retry-After $retry_after always;
      try_files /page.html =404;
    }
  }
}
`, dir, port, rate, burst, retryAfter, www, key)
	cfg := WriteFile(t, dir, "nginx.conf", conf)
	n.Proc = Start(t, Spec{Path: path, Args: []string{"-p", dir, "-c", cfg}, Dir: dir, Port: port})
	return n
}

// Statuses returns how many requests nginx has answered with each status,
// from its access log (written as each request ends).
func (n *Nginx) Statuses() map[int]int {
	b, err := os.ReadFile(n.log)
	if err != nil {
		return nil
	}
	m := map[int]int{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			if s, err := strconv.Atoi(f[2]); err == nil {
				m[s]++
			}
		}
	}
	return m
}

// Log returns nginx's access log: per request, in the order they ended,
// the Unix time it ended (with milliseconds), how long it took (seconds),
// its status and what limit_req did with it ($limit_req_status: PASSED,
// DELAYED or REJECTED).
func (n *Nginx) Log() string {
	b, _ := os.ReadFile(n.log)
	return string(b)
}
