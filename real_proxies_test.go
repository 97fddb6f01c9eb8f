package egresskit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// These tests run the whole chain through real proxies (squid 5.7,
// tinyproxy 1.11.1, microsocks 1.0.3) started by package testprog.

const (
	proxyUser = "crawler"
	proxyPass = "pw-Chain-5Tq"
)

// origin is a loopback site that records the Via header of each robots.txt
// request and of each page request.
type origin struct {
	srv *httptest.Server

	mu        sync.Mutex
	robotsVia []string
	pageVia   []string
}

func newOrigin(t *testing.T) *origin { return newOriginAt(t, "127.0.0.1") }

// newOriginAt starts an origin listening on ip, a loopback address.
func newOriginAt(t *testing.T, ip string) *origin {
	t.Helper()
	o := &origin{}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		if r.URL.Path == "/robots.txt" {
			o.robotsVia = append(o.robotsVia, r.Header.Get("Via"))
		} else {
			o.pageVia = append(o.pageVia, r.Header.Get("Via"))
		}
		o.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			io.WriteString(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		io.WriteString(w, "page")
	}))
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("loopback address %s not configured here: %v", ip, err)
		}
		t.Fatal(err)
	}
	o.srv.Listener.Close()
	o.srv.Listener = l
	o.srv.Start()
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) vias() (robots, pages []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.robotsVia...), append([]string(nil), o.pageVia...)
}

// chainConfig is a chain over pool with pacing that never binds and short
// retry waits.
func chainConfig(pool *egress.Pool) egresskit.Config {
	return egresskit.Config{
		Egress:    pool,
		UserAgent: "TestBot/1.0",
		Retry:     retry.Policy{MaxRetries: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		Store:     mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}}),
	}
}

// hostUntouched fails the test when the host's breaker or pacing has
// counted a failure.
func hostUntouched(t *testing.T, tr *egresskit.Transport, host string) {
	t.Helper()
	st, err := tr.Status(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	r := st.Recent
	if st.ConsecutiveFailures != 0 || st.Breaker != breaker.Closed || r.Transient+r.Throttled+r.Refused+r.Permanent != 0 {
		t.Errorf("host %s: breaker %v, %d consecutive failures, recent %+v; want nothing counted", host, st.Breaker, st.ConsecutiveFailures, r)
	}
}

// TestRealBadEndpointsNeverReachCaller crawls 9 hosts, 5 requests each,
// through a pool of {tinyproxy with a wrong password, squid with a wrong
// password, squid}: every request gets its 200, the two bad endpoints are
// quarantined, no host's breaker or pacing counts anything, and every
// robots.txt request came through squid, as the pages did.
func TestRealBadEndpointsNeverReachCaller(t *testing.T) {
	tiny := testprog.Tinyproxy(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	squidBad := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	squid := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	t.Logf("tinyproxy %s, squid %s", tiny.Version, squid.Version)
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{
		{ID: "tinyproxy-wrong", Proxy: tiny.URLWith("http", proxyUser, "pw-wrong-1")},
		{ID: "squid-wrong", Proxy: squidBad.URLWith("http", proxyUser, "pw-wrong-2")},
		{ID: "squid", Proxy: squid.URL()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tr := mustChain(chainConfig(pool))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	// Nine hosts: egress affinity ignores ports, so each listens on an
	// address of its own in 127.0.0.0/8, all loopback on Linux.
	origins := make([]*origin, 9)
	for i := range origins {
		origins[i] = newOriginAt(t, fmt.Sprintf("127.0.0.%d", i+2))
	}
	ok, total := 0, 0
	for round := range 5 {
		for _, o := range origins {
			total++
			resp, err := client.Get(fmt.Sprintf("%s/page/%d", o.srv.URL, round))
			if err != nil {
				t.Errorf("GET %s: %v", o.srv.URL, err)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok++
			} else {
				t.Errorf("GET %s = %d", o.srv.URL, resp.StatusCode)
			}
		}
	}
	if ok != 45 || total != 45 {
		t.Errorf("%d of %d requests answered 200, want 45 of 45", ok, total)
	}
	for _, st := range pool.Endpoints() {
		if want := st.ID != "squid"; st.Quarantined != want {
			t.Errorf("endpoint %s quarantined = %v, want %v", st.ID, st.Quarantined, want)
		}
	}
	for _, o := range origins {
		hostUntouched(t, tr, strings.TrimPrefix(o.srv.URL, "http://"))
		robots, pages := o.vias()
		if len(robots) != 1 || !strings.Contains(robots[0], "squid") {
			t.Errorf("robots.txt requests of %s arrived with Via %q, want one, through squid", o.srv.URL, robots)
		}
		for _, v := range pages {
			if !strings.Contains(v, "squid") {
				t.Errorf("a page of %s arrived with Via %q, want squid's", o.srv.URL, v)
			}
		}
	}
}

// TestRealCloseIdleConnectionsReachesProxies crawls through squid with an
// http.Client and checks that client.CloseIdleConnections leaves no
// established connection to the proxy.
func TestRealCloseIdleConnectionsReachesProxies(t *testing.T) {
	squid := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "squid", Proxy: squid.URL()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client := &http.Client{Transport: mustChain(chainConfig(pool))}
	for i := range 6 {
		o := newOrigin(t)
		resp, err := client.Get(fmt.Sprintf("%s/%d", o.srv.URL, i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	before := testprog.Established(t, squid.Addr)
	if before == 0 {
		t.Fatal("no connection to squid after the crawl: the test would prove nothing")
	}
	client.CloseIdleConnections()
	if n := testprog.Established(t, squid.Addr); n != 0 {
		t.Errorf("%d connections to squid after client.CloseIdleConnections (had %d), want 0", n, before)
	}
}

// TestRealDeadProxyLeavesHostAlone sends requests through a pool whose
// only proxy is dead: the caller is told the proxy is unreachable, and the
// target host's breaker and pacing count nothing.
func TestRealDeadProxyLeavesHostAlone(t *testing.T) {
	for _, start := range []func(testing.TB, testprog.ProxyOptions) *testprog.Proxy{testprog.Squid, testprog.Tinyproxy, testprog.Microsocks} {
		p := start(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
		t.Run(p.Program, func(t *testing.T) {
			pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "dead", Proxy: p.URL()}}})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			p.Kill()
			tr := mustChain(chainConfig(pool))
			o := newOrigin(t)
			for range 3 {
				req, _ := http.NewRequest("GET", o.srv.URL+"/page", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET through a dead %s = %d, want an error", p.Program, resp.StatusCode)
				}
				var pe *egress.ProxyError
				if !errors.As(err, &pe) || pe.Kind != "dial" {
					t.Errorf("GET through a dead %s: %v, want a *ProxyError of Kind \"dial\"", p.Program, err)
				}
			}
			hostUntouched(t, tr, strings.TrimPrefix(o.srv.URL, "http://"))
		})
	}
}

// TestRealCallerErrorNamesCause sends requests through the chain over a
// pool whose only endpoint cannot carry them, for each cause: no
// credentials, wrong credentials, proxy down, untrusted proxy
// certificate. Once the endpoint is out, the caller's error is
// ErrNoEndpoint naming the cause, matchable with errors.Is, without the
// password.
func TestRealCallerErrorNamesCause(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) egress.Endpoint
		is    error  // matched with errors.Is, besides ErrNoEndpoint
		text  string // in the error message
	}{
		{"no credentials", func(t *testing.T) egress.Endpoint {
			p := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
			return egress.Endpoint{ID: "squid", Proxy: p.URLWith("http", "", "")}
		}, egress.ErrProxyAuthRequired, "proxy wants credentials"},
		{"wrong credentials", func(t *testing.T) egress.Endpoint {
			p := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
			return egress.Endpoint{ID: "squid", Proxy: p.URLWith("http", proxyUser, "pw-wrong-3")}
		}, egress.ErrProxyAuthRejected, "rejected the credentials"},
		{"proxy down", func(t *testing.T) egress.Endpoint {
			p := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
			p.Kill()
			return egress.Endpoint{ID: "squid", Proxy: p.URL()}
		}, syscall.ECONNREFUSED, "connection refused"},
		{"untrusted proxy certificate", func(t *testing.T) egress.Endpoint {
			p := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass, TLS: true})
			return egress.Endpoint{ID: "squid", Proxy: p.TLSURL()}
		}, nil, "certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{tt.setup(t)}})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			client := &http.Client{Transport: mustChain(chainConfig(pool))}
			o := newOrigin(t)
			var last error
			for range 4 {
				resp, err := client.Get(o.srv.URL + "/page")
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET through a %s endpoint = %d, want an error", tt.name, resp.StatusCode)
				}
				last = err
			}
			t.Logf("%s: %v", tt.name, last)
			if !errors.Is(last, egress.ErrNoEndpoint) || (tt.is != nil && !errors.Is(last, tt.is)) {
				t.Errorf("error = %v, want ErrNoEndpoint and errors.Is %v", last, tt.is)
			}
			var pe *egress.ProxyError
			if !errors.As(last, &pe) {
				t.Errorf("error = %v, want a *ProxyError in its chain", last)
			}
			if !strings.Contains(last.Error(), tt.text) || strings.Contains(last.Error(), "pw-") {
				t.Errorf("error %q: want it to say %q and to hold no password", last, tt.text)
			}
			robots, pages := o.vias()
			if len(robots)+len(pages) != 0 {
				t.Errorf("the origin was reached: robots %q pages %q", robots, pages)
			}
		})
	}
}
