package bench

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/gocolly/colly/v2"
)

// The slowing-server run: a server with 8 workers serving each request in
// 1s (8 requests a second; the rest queue, so its latency grows with the
// requests in flight), 240 pages crawled by 32 workers; egresskit paced at
// 600 a minute with bursts of 5 and its in-flight cap at its default,
// Colly's LimitRule with the same rate (Parallelism 32, Delay 100ms).
const (
	slowPages    = 240
	slowWorkers  = 32
	slowServers  = 8
	slowService  = time.Second
	slowDeadline = 5 * time.Minute
)

var slowContenders = []struct {
	name  string
	crawl func(tb testing.TB, base string) int
}{
	{"egresskit", func(tb testing.TB, base string) int {
		cfg := politeConfig(nil, &http.Transport{MaxIdleConnsPerHost: slowWorkers})
		tr := mustChain(cfg)
		defer tr.CloseIdleConnections()
		return slowPool(base, &http.Client{Transport: tr, Timeout: slowDeadline})
	}},
	{"bare", func(tb testing.TB, base string) int {
		tr := &http.Transport{MaxIdleConnsPerHost: slowWorkers}
		defer tr.CloseIdleConnections()
		return slowPool(base, &http.Client{Transport: tr, Timeout: slowDeadline})
	}},
	{"colly", func(tb testing.TB, base string) int {
		c := colly.NewCollector(colly.Async(true), colly.UserAgent("PoliteBench/1.0"))
		c.SetRequestTimeout(slowDeadline)
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: slowWorkers, Delay: politeDelay}); err != nil {
			tb.Fatal(err)
		}
		return collyCrawl(c, base, slowPages)
	}},
}

// slowPool fetches the pages with slowWorkers workers through c.
func slowPool(base string, c *http.Client) int {
	return crawlPages(context.Background(), base, slowWorkers, slowPages, func(int) *http.Client { return c })
}

// BenchmarkSlowServer crawls a slowing server (testprog.SlowServer) with
// each contender, all at once, each against its own server, and reports
// what the server saw: its latency p50 and p95, the requests in flight at
// most and on average, and the throughput as a share of its capacity. Run
// it with -benchtime=1x (about 30s).
func BenchmarkSlowServer(b *testing.B) {
	type result struct {
		ok       int
		st       testprog.SlowStats
		capacity float64
	}
	results := make([]result, len(slowContenders))
	var wg sync.WaitGroup
	for i, c := range slowContenders {
		srv := testprog.SlowServer(b, testprog.SlowOptions{Workers: slowServers, Service: slowService})
		wg.Go(func() {
			ok := c.crawl(b, srv.URL)
			st, err := srv.Stats()
			if err != nil {
				b.Error(err)
			}
			results[i] = result{ok: ok, st: st, capacity: srv.Capacity()}
		})
	}
	wg.Wait()
	for i, c := range slowContenders {
		r := results[i]
		b.Run("impl="+c.name, func(b *testing.B) {
			for range b.N {
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(r.st.P50.Milliseconds()), "p50-ms")
			b.ReportMetric(float64(r.st.P95.Milliseconds()), "p95-ms")
			b.ReportMetric(float64(r.st.MaxInFlight), "max-inflight")
			b.ReportMetric(r.st.MeanInFlight, "mean-inflight")
			b.ReportMetric(r.st.Throughput()/r.capacity, "capacity-share")
			b.ReportMetric(float64(r.ok), "pages-200")
		})
	}
}
