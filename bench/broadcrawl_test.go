package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/gocolly/colly/v2"
)

// The broad crawl (issue 35): 200 hosts, each configured at 600 requests a
// minute, 32 workers taking the hosts round-robin, against servers that
// answer 2 % of requests at random 429 with Retry-After: 1 (a loaded
// shard, not a rate limit), for broadRun, counted in 15 s windows.
const (
	broadHosts   = 200
	broadWorkers = 32
	broadPerMin  = 600
	broadShare   = 0.02
	broadWindow  = 15 * time.Second
)

// broadRun is how long each contender crawls, one after another, each
// against a server of its own.
var broadRun = flag.Duration("broad.run", 3*time.Minute, "how long BenchmarkBroadCrawl crawls")

// broadHostState is the pacing every egresskit contender configures.
var broadHostState = hoststate.Config{Limit: ratelimit.Config{PerMinute: broadPerMin}}

// broadResult is what one contender's broad crawl measured.
type broadResult struct {
	windows  []int64 // pages answered 200 by window
	failed   int64   // requests that ended in an error or a status other than 200
	answered int     // answers of its server
	refused  int     // of them 429
	rates    []float64
}

// broadFetch fetches url and reports whether it ended 200; it is called
// by broadWorkers goroutines at once.
type broadFetch func(ctx context.Context, url string) bool

// broadContender is one contender: setup makes its fetch over base (which
// reaches the contender's server whatever the host), on the benchmark's
// goroutine, and a function returning the hosts' pacing rates at the end
// (nil when it has none); or an error when it cannot run here.
type broadContender struct {
	name  string
	setup func(tb testing.TB, base http.RoundTripper) (broadFetch, func() []float64, error)
}

// broadChainRates reads the pacing rate of every host from tr.
func broadChainRates(tr *egresskit.Transport) func() []float64 {
	return func() []float64 {
		var rates []float64
		for h := range broadHosts {
			st, err := tr.Status(context.Background(), fmt.Sprintf("h%d.example", h))
			if err == nil {
				rates = append(rates, st.PerMinute)
			}
		}
		slices.Sort(rates)
		return rates
	}
}

// clientFetch fetches through c, reading the body to the end.
func clientFetch(c *http.Client) broadFetch {
	return func(ctx context.Context, url string) bool {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return false
		}
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// broadChainConfig is egresskit from DefaultConfig over base.
func broadChainConfig(base http.RoundTripper, st hoststate.Store) egresskit.Config {
	cfg := egresskit.DefaultConfig()
	cfg.Base = base
	cfg.IgnoreRobots = true
	cfg.UserAgent = "BroadBench/1.0"
	cfg.Store = st
	return cfg
}

var broadContenders = []broadContender{
	{"egresskit", func(tb testing.TB, base http.RoundTripper) (broadFetch, func() []float64, error) {
		tr := mustChain(broadChainConfig(base, mustMemory(broadHostState)))
		return clientFetch(&http.Client{Transport: tr}), broadChainRates(tr), nil
	}},
	{"egresskit-redis", func(tb testing.TB, base http.RoundTripper) (broadFetch, func() []float64, error) {
		client, prefix, err := benchRedis(tb, 0, "broad")
		if err != nil {
			return nil, nil, err
		}
		st, err := redisstore.New(client, redisstore.Config{Prefix: prefix, HostState: broadHostState, Timeout: time.Second})
		if err != nil {
			tb.Fatal(err)
		}
		tr := mustChain(broadChainConfig(base, st))
		return clientFetch(&http.Client{Transport: tr}), broadChainRates(tr), nil
	}},
	{"bare", func(tb testing.TB, base http.RoundTripper) (broadFetch, func() []float64, error) {
		return clientFetch(&http.Client{Transport: base}), nil, nil
	}},
	{"colly", func(tb testing.TB, base http.RoundTripper) (broadFetch, func() []float64, error) {
		// Colly's LimitRule as a user sets it for every domain: its rate
		// per domain, as many in parallel as the crawl has workers.
		c := colly.NewCollector(colly.UserAgent("BroadBench/1.0"))
		c.WithTransport(base)
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: broadWorkers, Delay: time.Minute / broadPerMin}); err != nil {
			tb.Fatal(err)
		}
		return collyFetch(c), nil, nil
	}},
	{"autothrottle-ref", func(tb testing.TB, base http.RoundTripper) (broadFetch, func() []float64, error) {
		return clientFetch(&http.Client{Transport: newAutothrottleRef(base, autothrottleDefaults(time.Minute/broadPerMin))}), nil, nil
	}},
}

// collyFetch fetches each URL with a clone of c (synchronous collectors
// sharing its limits and transport), so that many goroutines fetch at
// once.
func collyFetch(c *colly.Collector) broadFetch {
	return func(ctx context.Context, url string) bool {
		cc := c.Clone()
		cc.Context = ctx
		ok := false
		cc.OnResponse(func(r *colly.Response) { ok = r.StatusCode == http.StatusOK })
		cc.Visit(url)
		return ok
	}
}

// runBroad runs fetch with broadWorkers goroutines for run, each taking
// the next page of the next host in turn, and counts the pages answered
// 200 by window.
func runBroad(ctx context.Context, fetch broadFetch, run time.Duration) broadResult {
	n := int(run / broadWindow)
	windows := make([]atomic.Int64, n)
	var (
		failed atomic.Int64
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(run, cancel)
	defer stop.Stop()
	start := time.Now()
	for range broadWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				ok := fetch(ctx, fmt.Sprintf("http://h%d.example/page/%d", i%broadHosts, i/broadHosts))
				switch {
				case ctx.Err() != nil:
					return
				case !ok:
					failed.Add(1)
				default:
					if w := int(time.Since(start) / broadWindow); w < n {
						windows[w].Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	r := broadResult{failed: failed.Load()}
	for i := range windows {
		r.windows = append(r.windows, windows[i].Load())
	}
	return r
}

// BenchmarkBroadCrawl runs the broad crawl with each contender (egresskit
// in memory and with Redis, a bare client, Colly's LimitRule, the
// AutoThrottle reference), one after another, each against a stray-429
// server of its own (testprog.StrayServer), for -broad.run (3 minutes
// each), and
// reports per impl= sub-benchmark the pages answered 200 in the second
// and last 15 s windows and their ratio, the pages of the whole run, the
// requests that ended in an error or not 200, the share of the server's
// answers that were 429, and, for egresskit, the hosts' pacing rates at
// the end (min, p10, p50 a minute). The windows are logged. Run it with
// -benchtime=1x.
func BenchmarkBroadCrawl(b *testing.B) {
	type cell struct {
		name   string
		skip   error
		srv    *testprog.Stray
		fetch  broadFetch
		rates  func() []float64
		result broadResult
	}
	var cells []*cell
	for _, c := range broadContenders {
		srv := testprog.StrayServer(b, testprog.StrayOptions{Share: broadShare, RetryAfter: 1, Seed: 35})
		base := srv.Transport(4)
		b.Cleanup(base.CloseIdleConnections)
		fetch, rates, err := c.setup(b, base)
		cells = append(cells, &cell{name: c.name, skip: err, srv: srv, fetch: fetch, rates: rates})
	}
	// One after another: the bare client alone keeps both cores busy.
	for _, c := range cells {
		if c.skip == nil {
			c.result = runBroad(b.Context(), c.fetch, *broadRun)
		}
	}
	for _, c := range cells {
		b.Run("impl="+c.name, func(b *testing.B) {
			if c.skip != nil {
				b.Skip(c.skip)
			}
			for range b.N {
			}
			r := c.result
			ok, refused := c.srv.Answers()
			r.answered, r.refused = ok+refused, refused
			if c.rates != nil {
				r.rates = c.rates()
			}
			var total int64
			w := make([]string, len(r.windows))
			for i, n := range r.windows {
				total += n
				w[i] = fmt.Sprint(n)
			}
			b.Logf("pages 200 by %v window: %s", broadWindow, strings.Join(w, " "))
			b.ReportMetric(0, "ns/op")
			if len(r.windows) >= 2 {
				second, last := r.windows[1], r.windows[len(r.windows)-1]
				b.ReportMetric(float64(second), "second-window")
				b.ReportMetric(float64(last), "last-window")
				b.ReportMetric(float64(last)/float64(max(second, 1)), "last/second")
			}
			b.ReportMetric(float64(total), "pages-200")
			b.ReportMetric(float64(r.failed), "failed")
			b.ReportMetric(100*float64(r.refused)/float64(max(r.answered, 1)), "429-%")
			if len(r.rates) > 0 {
				b.ReportMetric(r.rates[0], "rate-min/min")
				b.ReportMetric(r.rates[len(r.rates)/10], "rate-p10/min")
				b.ReportMetric(r.rates[len(r.rates)/2], "rate-p50/min")
			}
		})
	}
}
