package egress_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

func proxyEndpoints(n int) []egress.Endpoint {
	eps := make([]egress.Endpoint, n)
	for i := range eps {
		// Never dialled: selection only.
		eps[i] = egress.Endpoint{ID: fmt.Sprintf("ep-%04d", i), Proxy: fmt.Sprintf("http://10.%d.%d.1:3128", i/256, i%256)}
	}
	return eps
}

func hostNames(n int) []string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("site-%d.example", i)
	}
	return hosts
}

func selectAll(t *testing.T, p *egress.Pool, hosts []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(hosts))
	for _, h := range hosts {
		c, err := p.Select(context.Background(), h)
		if err != nil {
			t.Fatalf("Select(%q): %v", h, err)
		}
		if c.Reason != egress.ReasonAffinity {
			t.Fatalf("Select(%q).Reason = %q, want affinity", h, c.Reason)
		}
		m[h] = c.EndpointID
	}
	return m
}

// TestRendezvousStability adds one endpoint to twenty and removes one:
// only the hosts whose subset it enters (or leaves) move, about 1/21 of
// them, and those move to (or from) that endpoint alone.
func TestRendezvousStability(t *testing.T) {
	hosts := hostNames(50000)
	pool := newPool(t, egress.Config{Endpoints: proxyEndpoints(20)})
	before := selectAll(t, pool, hosts)

	added := egress.Endpoint{ID: "ep-new", Proxy: "socks5h://10.9.9.9:1080"}
	if err := pool.Add(added); err != nil {
		t.Fatal(err)
	}
	after := selectAll(t, pool, hosts)
	moved := 0
	for _, h := range hosts {
		if before[h] != after[h] {
			moved++
			if after[h] != added.ID {
				t.Fatalf("host %s moved from %s to %s, want only moves to %s", h, before[h], after[h], added.ID)
			}
		}
	}
	frac := float64(moved) / float64(len(hosts))
	t.Logf("adding 1 endpoint to 20 moved %.4f of %d hosts (ideal 1/21 = %.4f)", frac, len(hosts), 1.0/21)
	if limit := 1.0/20 + 0.01; frac > limit {
		t.Errorf("adding 1 endpoint to 20 moved %.4f of hosts, want ≤ %.4f", frac, limit)
	}
	if frac < 1.0/21/2 {
		t.Errorf("adding 1 endpoint to 20 moved %.4f of hosts: the new endpoint is starved", frac)
	}

	// Removing it restores the original mapping exactly.
	if err := pool.Remove(added.ID); err != nil {
		t.Fatal(err)
	}
	for h, id := range selectAll(t, pool, hosts) {
		if before[h] != id {
			t.Fatalf("after removing %s host %s maps to %s, want %s again", added.ID, h, id, before[h])
		}
	}
}

// TestRendezvousSpread checks that hosts spread evenly over endpoints.
func TestRendezvousSpread(t *testing.T) {
	const n = 20
	hosts := hostNames(40000)
	pool := newPool(t, egress.Config{Endpoints: proxyEndpoints(n)})
	count := map[string]int{}
	for _, id := range selectAll(t, pool, hosts) {
		count[id]++
	}
	mean := float64(len(hosts)) / n
	for id, c := range count {
		if dev := math.Abs(float64(c)-mean) / mean; dev > 0.1 {
			t.Errorf("endpoint %s is first for %d hosts, %.0f%% off the mean %.0f", id, c, dev*100, mean)
		}
	}
	if len(count) != n {
		t.Errorf("%d endpoints are first for some host, want %d", len(count), n)
	}
}

// TestSelectHostNormalised checks that a host maps to the same endpoint
// whatever its case or port.
func TestSelectHostNormalised(t *testing.T) {
	pool := newPool(t, egress.Config{Endpoints: proxyEndpoints(50)})
	ctx := context.Background()
	want, _ := pool.Select(ctx, "www.example.com")
	for _, h := range []string{"WWW.Example.COM", "www.example.com:443", "www.example.com:8080"} {
		if got, _ := pool.Select(ctx, h); got != want {
			t.Errorf("Select(%q) = %v, want %v", h, got, want)
		}
	}
	v6, _ := pool.Select(ctx, "2001:db8::1")
	if got, _ := pool.Select(ctx, "[2001:db8::1]:443"); got != v6 {
		t.Errorf("Select([2001:db8::1]:443) = %v, want %v", got, v6)
	}
}

// TestSelectDoesNotAllocate checks the steady state of Select over 1,000
// endpoints.
func TestSelectDoesNotAllocate(t *testing.T) {
	pool := newPool(t, egress.Config{Endpoints: proxyEndpoints(1000)})
	hosts := hostNames(1000)
	ctx := context.Background()
	for _, h := range hosts {
		pool.Select(ctx, h)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		pool.Select(ctx, hosts[i%len(hosts)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Select allocates %v times per call, want 0", allocs)
	}
}
