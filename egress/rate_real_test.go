package egress_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/testprog"
)

// TestRealEndpointRate sends 20 requests a second for 3 seconds to one
// host whose subset is two endpoints: a real squid limited to 5 requests a
// second, first in the host's order, and a direct one. squid's access log
// shows it received at most 5 a second (arrivals: the log's completion time
// less the elapsed time it logs), and never more than 6 (the rate and the
// burst of 1) in any second; every request succeeds, the rest going
// direct.
func TestRealEndpointRate(t *testing.T) {
	const perSecond, sends, every = 5, 60, 50 * time.Millisecond
	p := testprog.Squid(t, testprog.ProxyOptions{User: realUser, Pass: realPass})
	target := newTarget(t, 200, false)
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{
		{ID: "squid", Proxy: p.URL(), Rate: perSecond, Weight: 1000},
		{ID: "direct", Proxy: "direct"},
	}})
	if c, err := pool.Select(context.Background(), "127.0.0.1"); err != nil || c.EndpointID != "squid" {
		t.Fatalf("Select = %+v, %v; want squid first for the host (the test would prove nothing)", c, err)
	}

	var wg sync.WaitGroup
	results := make([]result, sends)
	tick := time.NewTicker(every)
	for i := range sends {
		<-tick.C
		wg.Go(func() { results[i] = fetch(context.Background(), pool, target.URL) })
	}
	tick.Stop()
	wg.Wait()
	bySquid := 0
	for i, r := range results {
		if r.err != nil || r.status != 200 {
			t.Fatalf("request %d = %d, %v; want 200", i, r.status, r.err)
		}
		if r.choice.EndpointID == "squid" {
			bySquid++
		}
	}

	arrivals := squidArrivals(t, filepath.Join(p.Dir, "access.log"), bySquid)
	n := len(arrivals)
	if n < 10 {
		t.Fatalf("squid carried %d requests, want at least 10 (the test would prove nothing)", n)
	}
	span := arrivals[n-1] - arrivals[0]
	avg := float64(n-1) / span
	most := 0
	for i := range arrivals {
		j := i
		for j < n && arrivals[j]-arrivals[i] <= 1.0 {
			j++
		}
		most = max(most, j-i)
	}
	t.Logf("squid: %d of %d requests in %.2fs, %.2f r/s, at most %d in any second", n, sends, span, avg, most)
	// 2% for the log's millisecond times and the scheduling between a
	// token taken and the request's arrival.
	if avg > perSecond*1.02 {
		t.Errorf("squid received %.2f requests/s, want <= %d", avg, perSecond)
	}
	if most > perSecond+1 {
		t.Errorf("squid received %d requests in one second, want <= %d (rate + burst)", most, perSecond+1)
	}
}

// squidArrivals waits for squid to log want forwarded requests and returns
// their arrival times in seconds, sorted: each line's time (when squid
// logged it, at completion) less its elapsed milliseconds.
func squidArrivals(t *testing.T, path string, want int) []float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		var at []float64
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.HasPrefix(f[8], "HIER_DIRECT/") {
				continue
			}
			ts, err1 := strconv.ParseFloat(f[0], 64)
			ms, err2 := strconv.ParseFloat(f[1], 64)
			if err1 != nil || err2 != nil || math.IsNaN(ts) {
				t.Fatalf("unexpected squid log line %q", line)
			}
			at = append(at, ts-ms/1000)
		}
		if len(at) >= want || time.Now().After(deadline) {
			slices.Sort(at)
			return at
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
