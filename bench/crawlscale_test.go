package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/bench/internal/redisinfo"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/redis/go-redis/v9"
)

// crawlScaleLong runs TestCrawlScale at its benchmark size.
var crawlScaleLong = flag.Bool("crawlscale.long", false, "crawl 1,000 hosts for 3 minutes in TestCrawlScale rather than 100 for 40s")

// The crawl-scale run (issue 36): every worker configured at
// scalePerMinute a host, each host crawled by scalePerHost goroutines of
// each of the fleet's 3 worker processes.
const (
	scaleWorkers   = 3
	scalePerMinute = 12 // 0.2 a second
	scalePerHost   = 2
	scaleSlow      = 8 * time.Second // a slowing host's service time, one worker each: 0.125 a second
)

// scaleKind is one kind of host of the run.
type scaleKind struct {
	name    string
	hosts   int     // of 1,000
	allowed float64 // requests a second each host allows (0: none)
}

// scaleKinds are the hosts of the run: healthy; behind nginx's limit_req
// (6 a minute, burst 1 nodelay, Retry-After 2) and HAProxy's sliding
// window (2 per 20 s, refused requests counted, Retry-After 2), each host
// limited on its own; slowing under load (one worker, 8 s a page, the
// rest queued); answering 2 % of requests 429 with Retry-After 1 at
// random; failing (503, no Retry-After: the breaker's); refusing (a 403
// challenge: the halt's).
var scaleKinds = []scaleKind{
	{"healthy", 600, scalePerMinute / 60.0},
	{"stray", 150, 0.98 * scalePerMinute / 60},
	{"nginx", 80, 0.1},
	{"haproxy", 70, 0.1},
	{"slowing", 50, 1 / scaleSlow.Seconds()},
	{"failing", 30, 0},
	{"refusing", 20, 0},
}

// hostGauge counts requests in flight per host at a server.
type hostGauge struct {
	mu   sync.Mutex // guards now, peak, seen
	now  map[string]int
	peak map[string]int
	seen map[string]int
}

func newHostGauge() *hostGauge {
	return &hostGauge{now: map[string]int{}, peak: map[string]int{}, seen: map[string]int{}}
}

func (g *hostGauge) enter(h string) {
	g.mu.Lock()
	g.now[h]++
	g.seen[h]++
	g.peak[h] = max(g.peak[h], g.now[h])
	g.mu.Unlock()
}

func (g *hostGauge) leave(h string) {
	g.mu.Lock()
	g.now[h]--
	g.mu.Unlock()
}

// scaleServer starts the loopback server of the healthy, stray, failing
// and refusing hosts, which tells them by the second label of the host
// name ("h7.stray.test").
func scaleServer(t *testing.T, g *hostGauge) *httptest.Server {
	var (
		mu  sync.Mutex
		rng = rand.New(rand.NewPCG(36, 36))
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.enter(r.Host)
		defer g.leave(r.Host)
		name, _, _ := net.SplitHostPort(r.Host)
		kind := strings.Split(name, ".")[1]
		switch kind {
		case "stray":
			mu.Lock()
			refuse := rng.Float64() < 0.02
			mu.Unlock()
			if refuse {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy", http.StatusTooManyRequests)
				return
			}
		case "failing":
			http.Error(w, "upstream down", http.StatusServiceUnavailable)
			return
		case "refusing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<html><head><title>Just a moment...</title></head><body><script>window._cf_chl_opt={cType:'managed'};</script></body></html>`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>page</title><p>a page")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// scaleHost is one host of the run.
type scaleHost struct {
	kind string
	name string // host:port, as URLs and the host key name it
}

// TestCrawlScale runs a fleet of 3 worker processes (testprog.RunFleet)
// sharing a real 3-master Redis Cluster, each crawling every host of a
// mix (scaleKinds: healthy, behind real nginx and HAProxy limiters,
// slowing under load, answering stray 429s, failing, refusing) with 2
// goroutines a host, all hosts at once, every host configured at 12
// requests a minute. It reports the pages answered 200 a second against
// the sum of what the hosts allow, per kind and in all; the share of
// attempts answered 429; each slowing host's p95 latency over its
// service time; the most requests any host had in flight across the fleet
// (as the servers saw them; nginx and HAProxy hosts not counted); what
// reached the failing and refusing hosts; and the EVALSHA calls on the
// masters per request. It asserts issue 36's bars: at most 1.1 EVALSHA a
// request, a slowing host never sees more than 2 requests in flight (2×
// its worker) and its p95 latency is at most 3× its service time; and
// that every page of a healthy host ends 200 and a refusing host is halted
// for the fleet (at most one request from each worker).
//
// make test runs 100 hosts for 40 s; make bench, with -crawlscale.long,
// 1,000 hosts for 3 minutes.
func TestCrawlScale(t *testing.T) {
	testprog.Need(t, "nginx")
	testprog.Need(t, "haproxy")
	scale, run := 10, 40*time.Second
	if *crawlScaleLong {
		scale, run = 1, 3*time.Minute
	}
	cluster := redistest.StartClusterOf(t, 3)
	gauge := newHostGauge()
	srv := scaleServer(t, gauge)
	nginx := testprog.RateLimitedNginx(t, testprog.NginxLimit{PerSecond: 0.1, Burst: 1, NoDelay: true, RetryAfter: 2, PerHost: true})
	haproxy := testprog.RateLimitedHAProxy(t, testprog.HAProxyLimit{Requests: 2, Period: 20 * time.Second, RetryAfter: 2, PerHost: true})
	slow := testprog.SlowServer(t, testprog.SlowOptions{Workers: 1, Service: scaleSlow, PerHost: true})
	port := func(u string) string {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
		return p
	}
	ports := map[string]string{"nginx": port(nginx.URL), "haproxy": port(haproxy.URL), "slowing": port(slow.URL)}
	var hosts []scaleHost
	for _, k := range scaleKinds {
		p, ok := ports[k.name]
		if !ok {
			p = port(srv.URL)
		}
		for i := range max(k.hosts/scale, 1) {
			hosts = append(hosts, scaleHost{k.name, fmt.Sprintf("h%d.%s.test:%s", i, k.name, p)})
		}
	}
	// Each worker has every host, a third of its pages: more than a run
	// at the configured rate takes.
	pages := int(run.Seconds()*scalePerMinute/60)*2 + 4
	urls := make([][]string, scaleWorkers)
	for _, h := range hosts {
		for i := range pages {
			urls[i%scaleWorkers] = append(urls[i%scaleWorkers], fmt.Sprintf("http://%s/page/%d", h.name, i))
		}
	}
	var workers []testprog.FleetWorker
	for w := range scaleWorkers {
		workers = append(workers, testprog.FleetWorker{
			Cluster: cluster.Addrs(), Prefix: "crawlscale", PerMinute: scalePerMinute,
			Loopback: true, PerHost: scalePerHost, Duration: run, URLs: urls[w],
		})
	}
	before := evalshaCalls(t, cluster.Addrs())
	res := testprog.RunFleet(t, workers)
	evalsha := evalshaCalls(t, cluster.Addrs()) - before

	// Per kind: pages 200, requests, attempts and 429s.
	type tally struct {
		ok, requests, attempts, throttled, failed, errors int
		firstError                                        string
	}
	kinds := map[string]*tally{}
	kindOf := map[string]string{}
	for _, h := range hosts {
		kindOf[h.name] = h.kind
	}
	var requests int
	for _, r := range res {
		for h, c := range r.Hosts {
			k := kinds[kindOf[h]]
			if k == nil {
				k = &tally{}
				kinds[kindOf[h]] = k
			}
			for s, n := range c.Final {
				k.requests += n
				requests += n
				switch s {
				case 200:
					k.ok += n
				case 0:
					k.errors += n
					k.failed += n
				default:
					k.failed += n
				}
			}
			if k.firstError == "" {
				k.firstError = c.FirstError
			}
			for s, n := range c.Answers {
				k.attempts += n
				if s == http.StatusTooManyRequests {
					k.throttled += n
				}
			}
		}
	}
	var allowed, ok float64
	var lines []string
	for _, k := range scaleKinds {
		n := max(k.hosts/scale, 1)
		tl := kinds[k.name]
		if tl == nil {
			tl = &tally{}
		}
		allowed += float64(n) * k.allowed
		ok += float64(tl.ok)
		ratio := "—"
		if k.allowed > 0 {
			ratio = fmt.Sprintf("%.2f", float64(tl.ok)/run.Seconds()/(float64(n)*k.allowed))
		}
		lines = append(lines, fmt.Sprintf("crawl-scale-kind kind=%s hosts=%d allowed=%.2f ok=%d requests=%d failed=%d attempts=%d throttled=%d ratio=%s",
			k.name, n, float64(n)*k.allowed, tl.ok, tl.requests, tl.failed, tl.attempts, tl.throttled, ratio))
	}
	for _, l := range lines {
		t.Log(l)
	}
	for _, k := range scaleKinds {
		if tl := kinds[k.name]; tl != nil && tl.firstError != "" {
			t.Logf("%s hosts: %d of %d requests ended in an error; one: %s", k.name, tl.errors, tl.requests, tl.firstError)
		}
	}

	// Slowing hosts, as their server saw them; the most in flight at any
	// host the test's own server and the slowing server saw.
	var p95s []float64
	slowPeak := 0
	for _, h := range hosts {
		if h.kind != "slowing" {
			continue
		}
		st, err := slow.HostStats(h.name)
		if err != nil {
			t.Fatal(err)
		}
		slowPeak = max(slowPeak, st.MaxInFlight)
		if st.Requests > 0 {
			p95s = append(p95s, st.P95.Seconds()/scaleSlow.Seconds())
		}
	}
	slices.Sort(p95s)
	gauge.mu.Lock()
	peak, peakHost := slowPeak, "a slowing host"
	refusingMost := 0
	failingMost := 0
	for h, n := range gauge.peak {
		if n > peak {
			peak, peakHost = n, h
		}
	}
	for h, n := range gauge.seen {
		switch kindOf[h] {
		case "refusing":
			refusingMost = max(refusingMost, n)
		case "failing":
			failingMost = max(failingMost, n)
		}
	}
	gauge.mu.Unlock()
	var throttled, attempts int
	for _, tl := range kinds {
		throttled += tl.throttled
		attempts += tl.attempts
	}
	perRequest := float64(evalsha) / float64(max(requests, 1))
	slowMax := 0.0
	if len(p95s) > 0 {
		slowMax = p95s[len(p95s)-1]
	}
	t.Logf("crawl-scale hosts=%d workers=%d seconds=%.0f ok=%.0f allowed=%.1f ratio=%.2f attempts=%d throttled=%d requests=%d evalsha=%d evalsha-per-request=%.2f slow-p95-over-service-median=%.2f slow-p95-over-service-max=%.2f slow-peak=%d peak=%d failing-most=%d refusing-most=%d",
		len(hosts), scaleWorkers, run.Seconds(), ok, allowed, ok/run.Seconds()/allowed, attempts, throttled, requests, evalsha, perRequest,
		quantileOf(p95s, 0.5), slowMax, slowPeak, peak, failingMost, refusingMost)
	t.Logf("%d hosts, %v: %.1f pages 200 a second of %.1f allowed (%.2f×); %d of %d attempts 429 (%.1f%%); %.2f EVALSHA a request; slowing hosts' p95 over their service time median %.2f, max %.2f; most in flight at one host %d (%s); most requests to a failing host %d, to a refusing host %d",
		len(hosts), run, ok/run.Seconds(), allowed, ok/run.Seconds()/allowed, throttled, attempts, 100*float64(throttled)/float64(max(attempts, 1)),
		perRequest, quantileOf(p95s, 0.5), slowMax, peak, peakHost, failingMost, refusingMost)
	for i, r := range res {
		if r.FirstError != "" {
			t.Logf("worker %d: %d requests ended in an error; first: %s", i, r.Errors, r.FirstError)
		}
	}

	if perRequest > 1.1 {
		t.Errorf("%.2f EVALSHA a request, want at most 1.1", perRequest)
	}
	if slowPeak > 2 {
		t.Errorf("a slowing host (one worker) saw %d requests in flight, want at most 2", slowPeak)
	}
	if slowMax > 3 {
		t.Errorf("a slowing host's p95 latency was %.1f× its service time, want at most 3×", slowMax)
	}
	if h := kinds["healthy"]; h == nil || h.failed > 0 || h.ok == 0 {
		t.Errorf("healthy hosts: %+v, want every request 200", h)
	}
	if refusingMost > scaleWorkers {
		t.Errorf("a refusing host got %d requests, want at most one from each of the %d workers (halted for the fleet)", refusingMost, scaleWorkers)
	}
}

// quantileOf returns the q quantile of sorted xs (0 when empty).
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(int(q*float64(len(xs))), len(xs)-1)]
}

// evalshaCalls sums the EVALSHA calls of every master at addrs.
func evalshaCalls(t *testing.T, addrs []string) int {
	t.Helper()
	total := 0
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := redisinfo.Read(ctx, c)
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("INFO of %s: %v", a, err)
		}
		total += int(m["evalsha.calls"])
	}
	return total
}
