package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	egressprom "github.com/egresskit/egresskit/telemetry/prometheus"
)

// pagesPerHost is how many pages of each target one round visits.
const pagesPerHost = 8

// crawler is the chain, its metrics and the /metrics server.
type crawler struct {
	targets *targets
	state   hoststate.Memory
	pool    *egress.Pool
	chain   *egresskit.Transport
	client  *http.Client
	srv     *http.Server
	ln      net.Listener
	wg      sync.WaitGroup // the server's goroutine
}

// start starts the targets, builds the chain with the collector as its
// observer and serves /metrics on listen. The caller must call close.
func start(listen string) (*crawler, error) {
	c := &crawler{targets: newTargets()}
	state, err := hoststate.NewMemory(hoststate.Config{
		Breaker: breaker.Config{FailureThreshold: 4},
		Limit:   ratelimit.Config{PerMinute: 1200, Burst: 4},
	})
	if err != nil {
		c.targets.close()
		return nil, err
	}
	c.state = state
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "direct", Proxy: "direct"}}})
	if err != nil {
		c.targets.close()
		return nil, err
	}
	c.pool = pool

	// Watch two hosts by name; every other host is counted only in the
	// per-state totals, so the series count does not grow with the crawl.
	var watch []string
	for _, u := range []string{c.targets.challenge.URL, c.targets.down.URL} {
		parsed, err := url.Parse(u)
		if err != nil {
			c.close()
			return nil, err
		}
		key, err := hostkey.Of(parsed, hostkey.ByHost)
		if err != nil {
			c.close()
			return nil, err
		}
		watch = append(watch, key)
	}
	collector := egressprom.New(egressprom.Config{
		BreakerCounts: func() map[string]int {
			n := c.state.Counts()
			return map[string]int{
				"closed": n.Closed, "half-open": n.HalfOpen,
				"open": n.Open, "halted": n.Halted,
			}
		},
		Watch:        watch,
		BreakerState: c.hostState,
		PacingRate:   c.pacingRate,
		Endpoints:    c.pool.Endpoints,
	})
	reg := prom.NewRegistry()
	if err := reg.Register(collector); err != nil {
		c.close()
		return nil, err
	}

	c.chain, err = egresskit.New(egresskit.Config{
		Base:      pool, // robots.txt leaves the same way as the pages
		Egress:    pool,
		UserAgent: "metrics-example/1.0 (+https://example.org/bot)",
		Retry: retry.Policy{
			MaxRetries: 1,
			BaseDelay:  50 * time.Millisecond,
			MaxDelay:   5 * time.Second,
			Deadline:   10 * time.Second,
		},
		Store:     c.state,
		Observers: []telemetry.Observer{collector},
	})
	if err != nil {
		c.close()
		return nil, err
	}
	c.client = &http.Client{Transport: c.chain}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		c.close()
		return nil, err
	}
	c.ln = ln
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.srv.Serve(ln) // returns http.ErrServerClosed on close
	}()
	return c, nil
}

// hostState reports a watched host's state for the collector.
// pacingRate is a watched host's current pacing rate, in requests per
// minute (0 when its state cannot be read).
func (c *crawler) pacingRate(host string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.state.Status(ctx, host)
	if err != nil {
		return 0
	}
	return st.PerMinute
}

func (c *crawler) hostState(host string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.state.Status(ctx, host)
	switch {
	case err != nil:
		return ""
	case st.Halted:
		return "halted"
	default:
		return st.Breaker.String()
	}
}

// metricsURL is the address of the /metrics endpoint.
func (c *crawler) metricsURL() string {
	return "http://" + c.ln.Addr().String() + "/metrics"
}

// crawl visits pagesPerHost pages of every target, one goroutine per
// target, and returns how the requests ended, by kind.
func (c *crawler) crawl(ctx context.Context) map[string]int {
	var mu sync.Mutex // guards results
	results := map[string]int{}
	var wg sync.WaitGroup
	for _, srv := range c.targets.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range pagesPerHost {
				kind := c.get(ctx, fmt.Sprintf("%s/page/%d", srv.URL, i))
				mu.Lock()
				results[kind]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

// get fetches u and names how it ended.
func (c *crawler) get(ctx context.Context, u string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "invalid"
	}
	resp, err := c.client.Do(req)
	switch {
	case errors.Is(err, egresskit.ErrHalted):
		return "not sent (halted)"
	case errors.Is(err, egresskit.ErrOpen):
		return "not sent (open)"
	case err != nil:
		return "error"
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return fmt.Sprintf("status %d", resp.StatusCode)
}

// close stops the server, the pool and the targets.
func (c *crawler) close() {
	if c.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.srv.Shutdown(ctx)
		cancel()
		c.wg.Wait()
	}
	if c.pool != nil {
		c.pool.Close()
	}
	c.targets.close()
}

// summary formats results in a stable order.
func summary(results map[string]int) string {
	kinds := make([]string, 0, len(results))
	for k := range results {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	s := ""
	for i, k := range kinds {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s: %d", k, results[k])
	}
	return s
}
