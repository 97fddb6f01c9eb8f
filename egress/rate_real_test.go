package egress_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/testprog"
)

// TestRealEndpointRate: a host whose subset is two endpoints, a real
// squid limited by the pool to 5 requests a second (burst 1), first in
// the host's order, and a direct one. The pool's clock is a fake one that
// moves 50ms before each of 60 requests (20 a second for 3 seconds of its
// time), so the endpoint's limiter has a token for the first request and
// then for every fourth: the pool sends exactly 15 through squid, squid
// logs 15 forwarded requests, and the other 45 go direct; every request
// succeeds. What the real proxy carried is counted, not when: the rate is
// the pool's arithmetic on its clock, exact whatever the machine's load.
func TestRealEndpointRate(t *testing.T) {
	const perSecond, sends, every = 5, 60, 50 * time.Millisecond
	const want = 1 + (sends-1)/int(time.Second/every/perSecond) // the burst, then one a fifth of a second
	p := testprog.Squid(t, testprog.ProxyOptions{User: realUser, Pass: realPass})
	target := newTarget(t, 200, false)
	clock := newFakeClock()
	pool := newPool(t, egress.Config{Now: clock.Now, Endpoints: []egress.Endpoint{
		{ID: "squid", Proxy: p.URL(), Rate: perSecond, Weight: 1000},
		{ID: "direct", Proxy: "direct"},
	}})
	if c, err := pool.Select(context.Background(), "127.0.0.1"); err != nil || c.EndpointID != "squid" {
		t.Fatalf("Select = %+v, %v; want squid first for the host (the test would prove nothing)", c, err)
	}

	var bySquid []int
	for i := range sends {
		clock.Advance(every)
		r := fetch(context.Background(), pool, target.URL+"/"+strconv.Itoa(i))
		if r.err != nil || r.status != 200 {
			t.Fatalf("request %d = %d, %v; want 200", i, r.status, r.err)
		}
		switch r.choice.EndpointID {
		case "squid":
			bySquid = append(bySquid, i)
		case "direct":
		default:
			t.Fatalf("request %d went through %q, want squid or direct", i, r.choice.EndpointID)
		}
	}
	if len(bySquid) != want || bySquid[0] != 0 || bySquid[1] != 4 {
		t.Errorf("the pool sent requests %v through squid, want %d: the first and every fourth", bySquid, want)
	}
	if n := squidForwarded(t, filepath.Join(p.Dir, "access.log"), len(bySquid)); n != len(bySquid) {
		t.Errorf("squid forwarded %d requests, want the %d the pool sent through it", n, len(bySquid))
	}
}

// squidForwarded waits, up to 10 seconds, for squid to log want forwarded
// requests, and returns how many it logged.
func squidForwarded(t *testing.T, path string, want int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		n := 0
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 9 && strings.HasPrefix(f[8], "HIER_DIRECT/") {
				n++
			}
		}
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEndpointRateRefused: a Rate that is negative, NaN or infinite is a
// *ConfigError naming the field, from New.
func TestEndpointRateRefused(t *testing.T) {
	for _, r := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: "direct", Rate: r}}})
		var ce *egress.ConfigError
		if !errors.Is(err, egress.ErrBadRate) || !errors.As(err, &ce) || ce.Field != "Rate" {
			t.Errorf("New with Rate %v = %v, want a *ConfigError for Rate wrapping ErrBadRate", r, err)
		}
	}
}
