package egress_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

func benchPool(b *testing.B, n, cacheSize int) (*egress.Pool, []string) {
	b.Helper()
	pool, err := egress.New(egress.Config{Endpoints: proxyEndpoints(n), HostCacheSize: cacheSize})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	hosts := hostNames(1000)
	for _, h := range hosts {
		pool.Select(context.Background(), h)
	}
	return pool, hosts
}

// BenchmarkSelect measures steady-state selection over 1,000 endpoints
// and 1,000 hosts.
func BenchmarkSelect(b *testing.B) {
	pool, hosts := benchPool(b, 1000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := pool.Select(ctx, hosts[i%len(hosts)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSelectParallel is BenchmarkSelect from all Ps at once.
func BenchmarkSelectParallel(b *testing.B) {
	pool, hosts := benchPool(b, 1000, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			pool.Select(ctx, hosts[i%len(hosts)])
			i++
		}
	})
}

// BenchmarkSelectUncached is the cost of a host's first selection: the
// rendezvous ranking over 1,000 endpoints.
func BenchmarkSelectUncached(b *testing.B) {
	pool, hosts := benchPool(b, 1000, -1)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pool.Select(ctx, hosts[i%len(hosts)])
		i++
	}
}

// BenchmarkRoundTrip is the overhead of the pool on a loopback request
// through a direct endpoint, against the bare transport.
func BenchmarkRoundTrip(b *testing.B) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer target.Close()
	run := func(b *testing.B, rt http.RoundTripper) {
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodGet, target.URL, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("pool", func(b *testing.B) {
		pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}}})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		run(b, pool)
	})
	b.Run("transport", func(b *testing.B) {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		run(b, tr)
	})
}

// BenchmarkSelectRules is BenchmarkSelect with rules: 101 endpoints
// labelled by region, and hosts under three rules or none.
func BenchmarkSelectRules(b *testing.B) {
	pool, err := egress.New(egress.Config{Endpoints: geoEndpoints(50), Rules: geoRules()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	hosts := rulesBenchHosts(1000)
	ctx := context.Background()
	for _, h := range hosts {
		pool.Select(ctx, h)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := pool.Select(ctx, hosts[i%len(hosts)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkConnReuse is the cost a kept-alive connection saves: a request
// to a loopback TLS target over a reused connection, against one that
// dials and handshakes afresh (the request closes its connection). It
// justifies keeping idle connections per host (MaxIdleConnsPerHost) for
// as long as a crawler revisits a host (IdleConnTimeout).
func BenchmarkConnReuse(b *testing.B) {
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer target.Close()
	for _, fresh := range []bool{false, true} {
		name := "keepalive"
		if fresh {
			name = "new-connection"
		}
		b.Run(name, func(b *testing.B) {
			pool, err := egress.New(egress.Config{
				Endpoints:       []egress.Endpoint{{ID: "d", Proxy: "direct"}},
				TLSClientConfig: target.Client().Transport.(*http.Transport).TLSClientConfig,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodGet, target.URL, nil)
				req.Close = fresh
				resp, err := pool.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
