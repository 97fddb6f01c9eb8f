package egresskit_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// TestResolverOutageSparesTheHost sends requests to a host whose name the
// egress DNS cache cannot resolve because its only server is dead (a
// loopback port nothing listens on): a fault of our route, not of the
// host. Far more failed attempts than the breaker's threshold leave the
// host's breaker closed, and the first request after the resolver is back
// is sent.
func TestResolverOutageSparesTheHost(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	deadPort := testprog.FreePort(t)
	var up atomic.Bool // the resolver is back: the Resolver's Dial reaches dnsmasq
	var ns *testprog.DNS
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		if up.Load() {
			return d.DialContext(ctx, network, ns.Addr)
		}
		return d.DialContext(ctx, network, addr)
	}}
	ns = testprog.Dnsmasq(t, testprog.DNSOptions{Names: []string{"origin.test"}, TTL: 60})
	pool, err := egress.New(egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		Resolver:  resolver,
		DNS:       egress.DNSConfig{Servers: []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(deadPort))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var attempts atomic.Int64
	tr := mustChain(egresskit.Config{
		Egress:       pool,
		IgnoreRobots: true,
		Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}}),
		// No retry budget: every request retried twice, 30 attempts.
		Retry: retry.Policy{MaxRetries: 2, BaseDelay: -1, Budget: -1},
		Observers: []telemetry.Observer{telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
			if e.Err != "" && e.Status == 0 {
				attempts.Add(1)
			}
		})},
	})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u := "http://origin.test:" + port + "/"
	ctx := context.Background()
	for i := range 10 { // 30 attempts, past the default threshold of 8
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Fatalf("request %d with the resolver dead: status %d, want an error", i, resp.StatusCode)
		}
	}
	if n := attempts.Load(); n != 30 {
		t.Fatalf("%d failed attempts observed, want 30 (10 requests, each retried twice)", n)
	}
	key, _ := tr.HostKey(u)
	st, err := tr.Status(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Breaker != breaker.Closed || st.Halted {
		t.Fatalf("after 30 attempts that failed to resolve: breaker %v halted %v, want closed: a resolver outage is not the host's fault", st.Breaker, st.Halted)
	}
	up.Store(true)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("first request after the resolver is back: %v", err)
	}
	resp.Body.Close()
	if n := hits.Load(); n != 1 {
		t.Errorf("the host saw %d requests, want 1", n)
	}
}
