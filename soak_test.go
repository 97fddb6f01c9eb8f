package egresskit_test

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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
)

var soakLong = flag.Bool("soak.long", false, "run the many-host soak for a minute rather than 20s")

// TestSoakManyHostsStray429s crawls 500 hosts paced at 3,000 requests a
// minute each, 32 workers taking the hosts in turn (so each host sees well
// under a request a second, far below its pacing), against a server that
// answers 2 % of requests, at random, 429 with Retry-After: 1. A stray
// refusal at a host's crawl demand says nothing of a limit near its pacing
// rate: the crawl's throughput over its last quarter must stay at 0.8× or
// more of its first quarter's, and the hosts' pacing rates must not
// collapse (p10 at least a tenth of the configured rate).
func TestSoakManyHostsStray429s(t *testing.T) {
	const (
		hosts     = 500
		workers   = 32
		perMinute = 3000
	)
	d := 20 * time.Second
	if *soakLong {
		d = time.Minute
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := rng.Float64() < 0.02
		mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "<!doctype html><title>page</title><p>a page")
	}))
	defer srv.Close()
	base := &http.Transport{
		MaxIdleConnsPerHost: 4,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	}
	defer base.CloseIdleConnections()
	cfg := egresskit.DefaultConfig()
	cfg.Base = base
	cfg.IgnoreRobots = true
	cfg.UserAgent = "SoakBot/1.0"
	cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: perMinute, Burst: 1}})
	tr := mustChain(cfg)
	c := &http.Client{Transport: tr}

	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	start := time.Now()
	var next atomic.Int64
	quarters := make([]atomic.Int64, 4)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://h%d.example/p/%d", i%hosts, i), nil)
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					if q := int(4 * time.Since(start) / d); q < 4 {
						quarters[q].Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	rates := make([]float64, 0, hosts)
	for h := range hosts {
		st, err := tr.Status(context.Background(), fmt.Sprintf("h%d.example", h))
		if err != nil {
			t.Fatal(err)
		}
		rates = append(rates, st.PerMinute)
	}
	slices.Sort(rates)
	first, last := quarters[0].Load(), quarters[3].Load()
	p10, p50 := rates[hosts/10], rates[hosts/2]
	t.Logf("pages 200 by quarter of %v: %d %d %d %d; pacing rates p10 %.0f, p50 %.0f, min %.0f a minute",
		d, first, quarters[1].Load(), quarters[2].Load(), last, p10, p50, rates[0])
	if float64(last) < 0.8*float64(first) {
		t.Errorf("throughput fell from %d to %d pages a quarter (%.2f×), want at least 0.8×", first, last, float64(last)/float64(first))
	}
	if p10 < perMinute/10 {
		t.Errorf("pacing rates p10 %.0f a minute, want at least %d", p10, perMinute/10)
	}
}
