package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

// BenchmarkSelect measures egress selection, the per-attempt decision of
// the egress layer, over pools of 1 and 1,000 proxy endpoints for 1,000
// target hosts: in steady state (cache=on, the host's subset cached) and
// for a host seen for the first time (cache=off: rendezvous ranking over
// every endpoint).
func BenchmarkSelect(b *testing.B) {
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = "site" + strconv.Itoa(i) + ".bench.test"
	}
	for _, n := range []int{1, 1000} {
		for _, cache := range []struct {
			name string
			size int
		}{{"on", 0}, {"off", -1}} {
			b.Run("endpoints="+strconv.Itoa(n)+"/cache="+cache.name, func(b *testing.B) {
				eps := make([]egress.Endpoint, n)
				for i := range eps {
					eps[i] = egress.Endpoint{ID: "p" + strconv.Itoa(i), Proxy: "http://127.0.0.1:" + strconv.Itoa(10000+i)}
				}
				pool, err := egress.New(egress.Config{Endpoints: eps, HostCacheSize: cache.size})
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close()
				ctx := context.Background()
				for _, h := range hosts {
					if _, err := pool.Select(ctx, h); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := pool.Select(ctx, hosts[i%len(hosts)]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
