package bench

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/gocolly/colly/v2"
)

// The politeness run: 120 pages of one host, 8 workers, configured at
// 600 requests a minute with bursts of 5, against a real nginx that allows
// 2 (or 10) requests a second per client (limit_req, burst 1, 429 with
// Retry-After: 2 beyond it).
const (
	politePages    = 120
	politeWorkers  = 8
	politePerMin   = 600
	politeBurst    = 5
	politeDelay    = time.Minute / politePerMin // Colly's Delay for the same rate
	politeDeadline = 5 * time.Minute
)

// politeness is what one contender's crawl measured.
type politeness struct {
	allowed   float64 // requests a second nginx allows
	ok        int     // pages answered 200
	attempts  int     // requests nginx answered
	throttled int     // of them 429
	elapsed   time.Duration
}

// crawler crawls politePages pages under base and returns how many ended
// 200.
type crawler func(tb testing.TB, base string) int

var politeContenders = []struct {
	name  string
	crawl crawler
}{
	{"egresskit", func(tb testing.TB, base string) int {
		return chainCrawl(tb, base, []*egresskit.Transport{mustChain(politeConfig(nil))})
	}},
	{"egresskit-redis-fleet", func(tb testing.TB, base string) int {
		client := redistest.Client(tb)
		prefix := redistest.Prefix(tb)
		var chains []*egresskit.Transport
		for range 2 {
			st, err := redisstore.New(client, redisstore.Config{Prefix: prefix, HostState: politeHostState, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
			if err != nil {
				tb.Fatal(err)
			}
			chains = append(chains, mustChain(politeConfig(st)))
		}
		return chainCrawl(tb, base, chains)
	}},
	{"bare", func(tb testing.TB, base string) int {
		tr := &http.Transport{MaxIdleConnsPerHost: politeWorkers}
		defer tr.CloseIdleConnections()
		return poolCrawl(base, func(int) *http.Client { return &http.Client{Transport: tr} })
	}},
	{"colly", func(tb testing.TB, base string) int {
		c := colly.NewCollector(colly.Async(true), colly.UserAgent("PoliteBench/1.0"))
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: politeWorkers, Delay: politeDelay}); err != nil {
			tb.Fatal(err)
		}
		var mu sync.Mutex
		ok := 0
		c.OnResponse(func(r *colly.Response) {
			if r.StatusCode == 200 {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
		for i := range politePages {
			c.Visit(fmt.Sprintf("%s/page/%d", base, i))
		}
		c.Wait()
		return ok
	}},
}

// politeHostState is the pacing the run configures.
var politeHostState = hoststate.Config{Limit: ratelimit.Config{PerMinute: politePerMin, Burst: politeBurst}}

// politeConfig is egresskit configured as the run says, from
// DefaultConfig (3 retries), its state in memory or in st when not nil.
func politeConfig(st hoststate.Store) egresskit.Config {
	cfg := egresskit.DefaultConfig()
	cfg.Base = &http.Transport{MaxIdleConnsPerHost: politeWorkers}
	cfg.UserAgent = "PoliteBench/1.0"
	cfg.IgnoreRobots = true
	if st != nil {
		cfg.Store = st
	} else {
		cfg.Store = mustMemory(politeHostState)
	}
	return cfg
}

func chainCrawl(tb testing.TB, base string, chains []*egresskit.Transport) int {
	defer func() {
		for _, c := range chains {
			c.CloseIdleConnections()
		}
	}()
	return poolCrawl(base, func(w int) *http.Client { return &http.Client{Transport: chains[w%len(chains)]} })
}

// poolCrawl fetches the pages with politeWorkers workers, worker w through
// client(w).
func poolCrawl(base string, client func(w int) *http.Client) int {
	return crawlPages(base, politeWorkers, politePages, func(w int) *http.Client {
		c := client(w)
		c.Timeout = politeDeadline
		return c
	})
}

// crawlPages fetches pages pages (base/page/0, ...) with workers workers,
// worker w through client(w), and returns how many were answered 200.
func crawlPages(base string, workers, pages int, client func(w int) *http.Client) int {
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
				resp, err := c.Get(fmt.Sprintf("%s/page/%d", base, i))
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
	for i := range pages {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return ok
}

// measure crawls one nginx allowing perSecond requests a second.
func measure(tb testing.TB, perSecond int, crawl crawler) politeness {
	n := testprog.RateLimitedNginx(tb, testprog.NginxLimit{PerSecond: perSecond, Burst: 1, RetryAfter: 2})
	start := time.Now()
	p := politeness{allowed: float64(perSecond), ok: crawl(tb, n.URL)}
	p.elapsed = time.Since(start)
	// nginx logs a request after its response is sent.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := n.Statuses()
		p.attempts, p.throttled = 0, s[429]
		for _, k := range s {
			p.attempts += k
		}
		if p.attempts >= p.ok || time.Now().After(deadline) {
			break
		}
	}
	return p
}

// BenchmarkPoliteness crawls a rate-limited nginx with each contender and
// reports the rate allowed, the rate achieved (pages answered 200 a
// second), their ratio, the share of attempts answered 429 and the pages
// that ended 200. The crawls of all contenders and both server rates run
// at once, each against its own nginx, before the sub-benchmarks report
// them (a crawl at 2 r/s takes a minute); run it with -benchtime=1x.
func BenchmarkPoliteness(b *testing.B) {
	type key struct {
		perSecond int
		name      string
	}
	results := map[key]politeness{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, perSecond := range []int{2, 10} {
		for _, c := range politeContenders {
			wg.Go(func() {
				p := measure(b, perSecond, c.crawl)
				mu.Lock()
				results[key{perSecond, c.name}] = p
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, perSecond := range []int{2, 10} {
		for _, c := range politeContenders {
			p := results[key{perSecond, c.name}]
			b.Run(fmt.Sprintf("server=%drps/impl=%s", perSecond, c.name), func(b *testing.B) {
				for range b.N {
				}
				achieved := float64(p.ok) / p.elapsed.Seconds()
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(p.allowed, "allowed-r/s")
				b.ReportMetric(achieved, "achieved-r/s")
				b.ReportMetric(achieved/p.allowed, "ratio")
				b.ReportMetric(100*float64(p.throttled)/float64(max(p.attempts, 1)), "429-%")
				b.ReportMetric(float64(p.ok), "pages-200")
			})
		}
	}
}
