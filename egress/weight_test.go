package egress_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

// firstChoices maps every host to the endpoint Select picks for it.
func firstChoices(t *testing.T, p *egress.Pool, hosts []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(hosts))
	for _, h := range hosts {
		c, err := p.Select(context.Background(), h)
		if err != nil {
			t.Fatalf("Select(%q): %v", h, err)
		}
		m[h] = c.EndpointID
	}
	return m
}

// TestWeightedShare measures, over 100,000 hosts, the share of hosts an
// endpoint of weight 2 takes against endpoints of weight 1.
func TestWeightedShare(t *testing.T) {
	eps := proxyEndpoints(10)
	eps[3].Weight = 2
	eps[7].Weight = 0.5
	pool := newPool(t, egress.Config{Endpoints: eps})
	count := map[string]int{}
	for _, id := range firstChoices(t, pool, hostNames(100000)) {
		count[id]++
	}
	ones := 0
	for i, e := range eps {
		if i != 3 && i != 7 {
			ones += count[e.ID]
		}
	}
	mean1 := float64(ones) / 8
	ratio2 := float64(count[eps[3].ID]) / mean1
	ratioHalf := float64(count[eps[7].ID]) / mean1
	t.Logf("over 100000 hosts: weight 1 takes %.0f hosts on average, weight 2 takes %d (%.3f×), weight 0.5 takes %d (%.3f×)",
		mean1, count[eps[3].ID], ratio2, count[eps[7].ID], ratioHalf)
	if ratio2 < 1.9 || ratio2 > 2.1 {
		t.Errorf("weight 2 takes %.3f× the hosts of weight 1, want within [1.9, 2.1]", ratio2)
	}
	if ratioHalf < 0.45 || ratioHalf > 0.55 {
		t.Errorf("weight 0.5 takes %.3f× the hosts of weight 1, want within [0.45, 0.55]", ratioHalf)
	}
	for i, e := range eps {
		if i == 3 || i == 7 {
			continue
		}
		if dev := math.Abs(float64(count[e.ID])-mean1) / mean1; dev > 0.05 {
			t.Errorf("weight-1 endpoint %s takes %d hosts, %.1f%% off their mean", e.ID, count[e.ID], dev*100)
		}
	}
}

// TestWeightedRemap adds and removes one endpoint of a pool of N = 20
// and measures the share of 100,000 hosts that change endpoint: the
// joining or leaving endpoint's share of the total weight, 1/(N+1) or 1/N
// with equal weights, and every move is to or from that endpoint.
func TestWeightedRemap(t *testing.T) {
	hosts := hostNames(100000)
	for _, tc := range []struct {
		name        string
		weight      func(i int) float64
		addW        float64
		total       float64
		removeIndex int
	}{
		{"equal weights", func(int) float64 { return 0 }, 1, 20, 5},
		{"weights 1 and 2", func(i int) float64 { return float64(1 + i%2) }, 1.5, 30, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := proxyEndpoints(20)
			for i := range eps {
				eps[i].Weight = tc.weight(i)
			}
			pool := newPool(t, egress.Config{Endpoints: eps})
			before := firstChoices(t, pool, hosts)
			check := func(what string, after map[string]string, only string, want float64) {
				t.Helper()
				moved := 0
				for _, h := range hosts {
					if before[h] == after[h] {
						continue
					}
					moved++
					if after[h] != only && before[h] != only {
						t.Fatalf("%s: host %s moved from %s to %s, want moves to or from %s only", what, h, before[h], after[h], only)
					}
				}
				frac := float64(moved) / float64(len(hosts))
				t.Logf("%s remapped %.2f%% of %d hosts (its weight share %.2f%%)", what, frac*100, len(hosts), want*100)
				if math.Abs(frac-want) > 0.005 {
					t.Errorf("%s remapped %.4f of hosts, want %.4f ± 0.005", what, frac, want)
				}
			}
			added := egress.Endpoint{ID: "ep-new", Proxy: "http://10.9.9.9:3128", Weight: tc.addW}
			if err := pool.Add(added); err != nil {
				t.Fatal(err)
			}
			check("adding 1 endpoint", firstChoices(t, pool, hosts), added.ID, tc.addW/(tc.total+tc.addW))
			if err := pool.Remove(added.ID); err != nil {
				t.Fatal(err)
			}
			removed := eps[tc.removeIndex]
			w := max(removed.Weight, 1)
			if err := pool.Remove(removed.ID); err != nil {
				t.Fatal(err)
			}
			check("removing 1 endpoint", firstChoices(t, pool, hosts), removed.ID, w/tc.total)
		})
	}
}

func TestWeightValidation(t *testing.T) {
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: "direct", Weight: w}}})
		var ce *egress.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, egress.ErrBadWeight) || ce.EndpointID != "a" || ce.Field != "Weight" {
			t.Errorf("New with Weight %v = %v, want a *ConfigError wrapping ErrBadWeight", w, err)
		}
	}
}

// TestLeastLoadedInSubset holds responses open to load the endpoints of a
// host's subset: new requests go to the less loaded member, and with one
// member saturated they go to the other at once, never waiting.
func TestLeastLoadedInSubset(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{
			{ID: "a", Proxy: "direct", Capacity: 4},
			{ID: "b", Proxy: "direct", Capacity: 8},
		},
		FailWhenFull: true, // a request that would wait fails instead
	})
	ctx := context.Background()
	var held []io.Closer
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	send := func(ctx context.Context) egress.Choice {
		t.Helper()
		var c egress.Choice
		req, _ := http.NewRequestWithContext(egress.WithRecorder(ctx, &c), http.MethodGet, target.URL, nil)
		resp, err := pool.RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		held = append(held, resp.Body) // holds the slot until closed
		return c
	}
	host := target.Listener.Addr().String()
	first, _ := pool.Select(ctx, host)
	other := map[string]string{"a": "b", "b": "a"}[first.EndpointID]

	// Twelve requests fill both to capacity, always the less loaded
	// share first: the loads never differ by more than one request's share.
	got := map[string]int{}
	for range 12 {
		c := send(ctx)
		if c.Reason != egress.ReasonAffinity {
			t.Fatalf("choice %v, want affinity", c)
		}
		got[c.EndpointID]++
		la, lb := float64(got["a"])/4, float64(got["b"])/8
		if math.Abs(la-lb) > 0.25+1e-9 {
			t.Fatalf("after %v requests the loads are a=%.3f b=%.3f", got, la, lb)
		}
	}
	if got["a"] != 4 || got["b"] != 8 {
		t.Fatalf("requests per endpoint = %v, want a=4 b=8", got)
	}
	if _, err := pool.Select(ctx, host); !errors.Is(err, egress.ErrAtCapacity) {
		t.Fatalf("Select with both full = %v, want ErrAtCapacity", err)
	}

	// Free everything, then saturate the host's first endpoint alone.
	for _, c := range held {
		c.Close()
	}
	held = held[:0]
	capOf := map[string]int{"a": 4, "b": 8}
	for range capOf[first.EndpointID] {
		send(egress.WithForced(ctx, first.EndpointID))
	}
	for i := range capOf[other] {
		if c := send(ctx); c.EndpointID != other || c.Reason != egress.ReasonAffinity {
			t.Fatalf("request %d with %s saturated went to %v, want %s (affinity)", i, first.EndpointID, c, other)
		}
	}
}
