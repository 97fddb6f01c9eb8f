package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"
)

// The politeness run: one host, two minutes' worth of pages at the rate
// it allows (240 at 2 r/s, 1,200 at 10 r/s), 8 workers, every contender
// configured at 600 requests a minute with bursts of 5, against each of
// testprog.Limiters allowing 2 or 10 requests a second per client. A
// crawl ends when its pages are done or at politeDeadline, whichever
// comes first: one that loses pages to 429s still ends.
const (
	politeSeconds  = 120 // pages per request a second allowed
	politeWorkers  = 8
	politePerMin   = 600
	politeBurst    = 5
	politeDelay    = time.Minute / politePerMin // the gap between requests at that rate
	politeDeadline = 3 * time.Minute
)

// politeRates are the rates, in requests a second, the limiters allow.
var politeRates = []int{2, 10}

// politeness is what one contender's crawl measured.
type politeness struct {
	allowed   float64 // requests a second the limiter allows
	pages     int     // pages crawled
	ok        int     // of them answered 200
	attempts  int     // requests the limiter answered
	throttled int     // of them 429
	elapsed   time.Duration
}

// politeCrawl crawls pages pages under base (base/page/0, ...) until ctx
// ends and returns how many were answered 200.
type politeCrawl func(ctx context.Context, base string, pages int) int

// politeContender is one contender of the run. setup makes its client on
// the benchmark's goroutine, where it may fail the benchmark, with every
// request sent through counter, and returns its crawl, which runs on a
// goroutine of its own; or an error when the contender cannot run here
// (no Redis server), which skips its rows.
type politeContender struct {
	name  string
	setup func(tb testing.TB, counter *statusCounter) (politeCrawl, error)
}

var politeContenders = []politeContender{
	{"egresskit", func(tb testing.TB, counter *statusCounter) (politeCrawl, error) {
		return poolCrawl(mustChain(politeConfig(nil, counter))), nil
	}},
	{"egresskit-redis-fleet", func(tb testing.TB, counter *statusCounter) (politeCrawl, error) {
		client, prefix, err := politeRedis(tb)
		if err != nil {
			return nil, err
		}
		var chains []http.RoundTripper
		for range 2 {
			st, err := redisstore.New(client, redisstore.Config{Prefix: prefix, HostState: politeHostState, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
			if err != nil {
				tb.Fatal(err)
			}
			chains = append(chains, mustChain(politeConfig(st, counter)))
		}
		return poolCrawl(chains...), nil
	}},
	{"bare", func(tb testing.TB, counter *statusCounter) (politeCrawl, error) {
		return poolCrawl(counter), nil
	}},
	{"colly", func(tb testing.TB, counter *statusCounter) (politeCrawl, error) {
		c := colly.NewCollector(colly.Async(true), colly.UserAgent("PoliteBench/1.0"))
		c.WithTransport(counter)
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: politeWorkers, Delay: politeDelay}); err != nil {
			tb.Fatal(err)
		}
		return func(ctx context.Context, base string, pages int) int {
			c.Context = ctx
			return collyCrawl(c, base, pages)
		}, nil
	}},
	{"autothrottle-ref", func(tb testing.TB, counter *statusCounter) (politeCrawl, error) {
		return poolCrawl(newAutothrottleRef(counter, autothrottleDefaults(politeDelay))), nil
	}},
}

// politeHostState is the pacing the run configures.
var politeHostState = hoststate.Config{Limit: ratelimit.Config{PerMinute: politePerMin, Burst: politeBurst}}

// politeConfig is egresskit configured as the run says, from
// DefaultConfig (3 retries), sending through base, its state in memory or
// in st when not nil.
func politeConfig(st hoststate.Store, base http.RoundTripper) egresskit.Config {
	cfg := egresskit.DefaultConfig()
	cfg.Base = base
	cfg.UserAgent = "PoliteBench/1.0"
	cfg.IgnoreRobots = true
	if st != nil {
		cfg.Store = st
	} else {
		cfg.Store = mustMemory(politeHostState)
	}
	return cfg
}

// politeRedis returns a client of the Redis server at redisAddr, closed
// when tb ends, and a key prefix of its own, whose keys are deleted then;
// or the error when no server answers (a failure of tb when
// EGRESSKIT_REQUIRE_REDIS is 1).
func politeRedis(tb testing.TB) (*redis.Client, string, error) {
	return benchRedis(tb, 0, "polite")
}

// poolCrawl is the crawl of politeWorkers workers, worker w sending
// through rts[w%len(rts)].
func poolCrawl(rts ...http.RoundTripper) politeCrawl {
	return func(ctx context.Context, base string, pages int) int {
		return crawlPages(ctx, base, politeWorkers, pages, func(w int) *http.Client {
			return &http.Client{Transport: rts[w%len(rts)]}
		})
	}
}

// crawlPages fetches pages pages (base/page/0, ...) with workers workers,
// worker w through client(w), until ctx ends, and returns how many were
// answered 200.
func crawlPages(ctx context.Context, base string, workers, pages int, client func(w int) *http.Client) int {
	jobs := make(chan int)
	var (
		mu sync.Mutex
		ok int
		wg sync.WaitGroup
	)
	for w := range workers {
		c := client(w)
		wg.Go(func() {
			for i := range jobs {
				req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/page/%d", base, i), nil)
				if err != nil {
					continue
				}
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
feed:
	for i := range pages {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return ok
}

// statusCounter is the transport every contender sends through: it
// counts the answers the limiter gave, by status.
type statusCounter = testprog.StatusCounter

func newStatusCounter() *statusCounter { return testprog.NewStatusCounter(politeWorkers) }

// politeCell is one crawl of the matrix: a contender against a limiter
// allowing perSecond requests a second.
type politeCell struct {
	limiter   string
	perSecond int
	impl      string
	skip      error // why the contender cannot run here, or nil
	result    politeness
}

// name is the cell's sub-benchmark name.
func (c *politeCell) name() string {
	return fmt.Sprintf("limiter=%s/server=%drps/impl=%s", c.limiter, c.perSecond, c.impl)
}

// BenchmarkPoliteness crawls each of testprog.Limiters at 2 and 10
// requests a second with each contender and reports, per
// limiter=/server=/impl= sub-benchmark, the rate allowed, the rate
// achieved (pages answered 200 a second, over the whole crawl), their
// ratio, the requests the limiter answered, the share of them answered
// 429 and the pages that ended 200. Every crawl has a limiter of its own;
// the limiters and clients are set up first, on the benchmark's goroutine,
// then all the crawls run at once (about three minutes) before the
// sub-benchmarks report them. Run it with -benchtime=1x.
func BenchmarkPoliteness(b *testing.B) {
	testprog.Need(b, "nginx")
	testprog.Need(b, "haproxy")
	var (
		cells []*politeCell
		runs  []func()
	)
	for _, lim := range testprog.Limiters {
		for _, perSecond := range politeRates {
			for _, c := range politeContenders {
				cell := &politeCell{limiter: lim.Name, perSecond: perSecond, impl: c.name}
				cells = append(cells, cell)
				counter := newStatusCounter()
				crawl, err := c.setup(b, counter)
				if err != nil {
					cell.skip = err
					continue
				}
				srv := lim.Start(b, perSecond)
				runs = append(runs, func() { cell.result = runPolite(b.Context(), srv.URL, perSecond, crawl, counter) })
			}
		}
	}
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(run)
	}
	wg.Wait()
	for _, cell := range cells {
		b.Run(cell.name(), func(b *testing.B) {
			if cell.skip != nil {
				b.Skip(cell.skip)
			}
			for range b.N {
			}
			p := cell.result
			achieved := float64(p.ok) / p.elapsed.Seconds()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(p.allowed, "allowed-r/s")
			b.ReportMetric(achieved, "achieved-r/s")
			b.ReportMetric(achieved/p.allowed, "ratio")
			b.ReportMetric(float64(p.attempts), "attempts")
			b.ReportMetric(100*float64(p.throttled)/float64(max(p.attempts, 1)), "429-%")
			b.ReportMetric(float64(p.ok), "pages-200")
		})
	}
}

// runPolite runs one crawl of two minutes' worth of pages at perSecond
// against base, within politeDeadline, and counts its answers at counter.
func runPolite(ctx context.Context, base string, perSecond int, crawl politeCrawl, counter *statusCounter) politeness {
	ctx, cancel := context.WithTimeout(ctx, politeDeadline)
	defer cancel()
	p := politeness{allowed: float64(perSecond), pages: politeSeconds * perSecond}
	start := time.Now()
	p.ok = crawl(ctx, base, p.pages)
	p.elapsed = time.Since(start)
	counter.CloseIdleConnections()
	s := counter.Statuses()
	p.throttled = s[http.StatusTooManyRequests]
	for _, k := range s {
		p.attempts += k
	}
	return p
}

// collyCrawl visits pages pages (base/page/0, ...) with c, an asynchronous
// collector, and returns how many were answered 200.
func collyCrawl(c *colly.Collector, base string, pages int) int {
	var mu sync.Mutex
	ok := 0
	c.OnResponse(func(r *colly.Response) {
		if r.StatusCode == 200 {
			mu.Lock()
			ok++
			mu.Unlock()
		}
	})
	for i := range pages {
		c.Visit(fmt.Sprintf("%s/page/%d", base, i))
	}
	c.Wait()
	return ok
}
