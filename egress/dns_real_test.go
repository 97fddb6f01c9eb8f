package egress_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/testprog"
)

// The tests in this file resolve through a real dnsmasq (Debian's 2.90),
// started by testprog on a free loopback port and killed to play a dead
// resolver. The cache's clock is a fakeClock, so a TTL or a stale window
// passes without waiting for it; dnsmasq's own clock does not matter, as
// it answers its names itself and caches nothing.

// realDNS starts dnsmasq answering origin.test with ttl and returns it
// with a pool resolving through it on clock.
func realDNS(t *testing.T, ttl int, clock *fakeClock, dns egress.DNSConfig) (*testprog.DNS, *egress.Pool) {
	t.Helper()
	ns := testprog.Dnsmasq(t, testprog.DNSOptions{Names: []string{"origin.test"}, TTL: ttl})
	dns.Servers = []string{ns.Addr}
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       dns,
		Now:       clock.Now,
	})
	return ns, pool
}

// TestRealDNSStaleBound kills dnsmasq after one answer and walks the clock
// past the TTL: the expired answer is served up to ServeStale after the
// TTL and not at or after it, for windows shorter and longer than the
// 30-second re-check. The failure past the window is the egress route's
// (EndpointFault), not the host's.
func TestRealDNSStaleBound(t *testing.T) {
	const ttl = 10 * time.Second
	for _, tc := range []struct {
		name  string
		stale time.Duration
		// served are the times after the end of the TTL at which the
		// stale answer must still be served.
		served []time.Duration
	}{
		{"below the re-check", 5 * time.Second, []time.Duration{time.Second, 4 * time.Second, 5*time.Second - time.Millisecond}},
		{"above the re-check", 2 * time.Minute, []time.Duration{time.Second, 29 * time.Second, 31 * time.Second, 90 * time.Second, 2*time.Minute - time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			ns, pool := realDNS(t, int(ttl/time.Second), clock, egress.DNSConfig{ServeStale: tc.stale})
			target := newTarget(t, http.StatusOK, false)
			u := withHost(target.URL, "origin.test")
			ctx := context.Background()
			if err := get(ctx, pool, u); err != nil {
				t.Fatalf("first request through dnsmasq %s: %v", ns.Version, err)
			}
			if got := ns.Queries("origin.test", "A"); got != 1 {
				t.Fatalf("dnsmasq saw %d A queries, want 1", got)
			}
			ns.Kill()
			expiry := clock.Now().Add(ttl)
			for _, at := range tc.served {
				clock.Advance(expiry.Add(at).Sub(clock.Now()))
				if err := get(ctx, pool, u); err != nil {
					t.Fatalf("%v past the TTL with ServeStale %v and dnsmasq dead: %v, want the stale answer", at, tc.stale, err)
				}
			}
			clock.Advance(expiry.Add(tc.stale).Sub(clock.Now()))
			err := get(ctx, pool, u)
			var de *net.DNSError
			if !errors.As(err, &de) || de.Name != "origin.test" || !de.IsTemporary {
				t.Fatalf("ServeStale %v past the TTL with dnsmasq dead: %v, want a temporary *net.DNSError for origin.test", tc.stale, err)
			}
			var f interface{ EndpointFault() bool }
			if !errors.As(err, &f) || !f.EndpointFault() {
				t.Errorf("the failure of every DNS server = %v, want an error reporting EndpointFault() true", err)
			}
			st := pool.DNSStats()
			if st.Stale != uint64(len(tc.served)) || st.Failures != 1 {
				t.Errorf("DNSStats = %+v, want %d stale answers and 1 failure", st, len(tc.served))
			}
		})
	}
}

// TestRealDNSTTLAndNegative checks the TTL and negative caching against
// dnsmasq: one query per TTL for a name that exists, and a name that does
// not (NXDOMAIN without a SOA, as dnsmasq answers its local names) asked
// once per NegativeTTL, 30s by default.
func TestRealDNSTTLAndNegative(t *testing.T) {
	clock := newFakeClock()
	ns, pool := realDNS(t, 60, clock, egress.DNSConfig{})
	target := newTarget(t, http.StatusOK, false)
	ctx := context.Background()
	u := withHost(target.URL, "origin.test")
	for i, step := range []struct {
		advance time.Duration
		queries int
	}{
		{0, 1},
		{30 * time.Second, 1},
		{29 * time.Second, 1}, // 59s: within the TTL
		{2 * time.Second, 2},  // 61s: expired, asked again
		{59 * time.Second, 2},
		{2 * time.Second, 3},
	} {
		clock.Advance(step.advance)
		if err := get(ctx, pool, u); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := ns.Queries("origin.test", "A"); got != step.queries {
			t.Fatalf("step %d (+%v): dnsmasq saw %d A queries, want %d", i, step.advance, got, step.queries)
		}
	}

	missing := withHost(target.URL, "missing.test")
	for i, step := range []struct {
		advance time.Duration
		queries int
	}{
		{0, 1},
		{10 * time.Second, 1},
		{19 * time.Second, 1}, // 29s
		{2 * time.Second, 2},  // 31s: past the negative TTL
	} {
		clock.Advance(step.advance)
		err := get(ctx, pool, missing)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Fatalf("step %d: missing.test: %v, want a not-found *net.DNSError", i, err)
		}
		var f interface{ EndpointFault() bool }
		if errors.As(err, &f) && f.EndpointFault() {
			t.Fatalf("step %d: a name that does not exist reported as the egress route's fault: %v", i, err)
		}
		if got := ns.Queries("missing.test", "A"); got != step.queries {
			t.Fatalf("step %d (+%v): dnsmasq saw %d A queries for missing.test, want %d", i, step.advance, got, step.queries)
		}
	}
}

// TestRealDNSSingleflight holds dnsmasq (SIGSTOP) while 50 resolutions of
// a cold name wait, then lets it answer: it saw one query.
func TestRealDNSSingleflight(t *testing.T) {
	ns, pool := realDNS(t, 300, newFakeClock(), egress.DNSConfig{Timeout: 20 * time.Second})
	target := newTarget(t, http.StatusOK, false)
	u := withHost(target.URL, "origin.test")
	if err := ns.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			ns.Signal(syscall.SIGCONT)
		}
	}()
	const n = 50
	errs := make(chan error, n)
	for range n {
		go func() { errs <- get(context.Background(), pool, u) }()
	}
	for pool.DNSStats().Waiting < n {
		runtime.Gosched() // until every resolution waits on the held query
	}
	if err := ns.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ns.Queries("origin.test", "A"); got != 1 {
		t.Errorf("%d concurrent resolutions: dnsmasq saw %d A queries, want 1", n, got)
	}
}

// TestRealDNSThroughResolver sets Config.Resolver with a Dial that sends
// every query to dnsmasq, while the cache's own server is a dead port (as
// a resolv.conf naming a dead resolver would be): the cache sends its
// queries through Resolver.Dial, and still caches.
func TestRealDNSThroughResolver(t *testing.T) {
	ns := testprog.Dnsmasq(t, testprog.DNSOptions{Names: []string{"origin.test"}, TTL: 300})
	dead := testprog.FreePort(t) // nothing listens on UDP there either
	var (
		mu      sync.Mutex // guards dialled
		dialled []string
	)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, network+" "+addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, ns.Addr)
	}}
	target := newTarget(t, http.StatusOK, false)
	deadAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(dead))
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		Resolver:  resolver,
		DNS:       egress.DNSConfig{Servers: []string{deadAddr}},
	})
	u := withHost(target.URL, "origin.test")
	for i := range 5 {
		if err := get(context.Background(), pool, u); err != nil {
			t.Fatalf("request %d with Resolver set and the cache on: %v", i, err)
		}
	}
	if got := ns.Queries("origin.test", "A"); got != 1 {
		t.Errorf("dnsmasq saw %d A queries for 5 requests, want 1 (the cache in front of Resolver)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 1 || dialled[0] != "udp "+deadAddr {
		t.Errorf("Resolver.Dial calls = %q, want one, udp to the cache's server %s", dialled, deadAddr)
	}
	if st := pool.DNSStats(); !st.Enabled || st.Queries != 1 {
		t.Errorf("DNSStats = %+v, want the cache on with 1 query", st)
	}
}
