package egresskit_test

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
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
)

// convergeHostState is the pacing of a new user who configured it too fast
// for the server: 600 requests a minute, bursts of 5.
var convergeHostState = hoststate.Config{Limit: ratelimit.Config{PerMinute: 600, Burst: 5}}

// convergeConfig is the chain of that user, from DefaultConfig (3 retries)
// with its state in memory, or in st when st is not nil.
func convergeConfig(st hoststate.Store) egresskit.Config {
	cfg := egresskit.DefaultConfig()
	cfg.Base = &http.Transport{MaxIdleConnsPerHost: 16}
	cfg.UserAgent = "ConvergeBot/1.0"
	cfg.IgnoreRobots = true // the test's own server
	if st != nil {
		cfg.Store = st
	} else {
		cfg.Store = mustMemory(convergeHostState)
	}
	return cfg
}

// crawlStats is what a crawl of a rate-limited nginx measured.
type crawlStats struct {
	urls, ok   int
	attempts   int // requests nginx answered
	throttled  int // of them 429
	elapsed    time.Duration
	allowed    float64 // requests a second nginx allows
	firstError error
}

func (s crawlStats) achieved() float64 { return float64(s.ok) / s.elapsed.Seconds() }
func (s crawlStats) ratio() float64    { return s.achieved() / s.allowed }
func (s crawlStats) share() float64    { return float64(s.throttled) / float64(max(s.attempts, 1)) }

func (s crawlStats) String() string {
	return fmt.Sprintf("%d/%d URLs 200 in %v: %.2f r/s of %.0f allowed (%.2f×); %d attempts, %d answered 429 (%.1f%%)",
		s.ok, s.urls, s.elapsed.Round(10*time.Millisecond), s.achieved(), s.allowed, s.ratio(), s.attempts, s.throttled, 100*s.share())
}

// crawl fetches urls distinct pages of n with workers goroutines, worker i
// through chains[i%len(chains)], and counts what nginx answered.
func crawl(t *testing.T, n *testprog.Nginx, perSecond float64, chains []*egresskit.Transport, urls, workers int) crawlStats {
	t.Helper()
	jobs := make(chan int)
	var (
		mu sync.Mutex // guards st
		st = crawlStats{urls: urls, allowed: perSecond}
		wg sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	for w := range workers {
		c := &http.Client{Transport: chains[w%len(chains)]}
		wg.Go(func() {
			for i := range jobs {
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/page/%d", n.URL, i), nil)
				resp, err := c.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("page %d: status %d", i, resp.StatusCode)
					}
				}
				mu.Lock()
				if err == nil {
					st.ok++
				} else if st.firstError == nil {
					st.firstError = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range urls {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	st.elapsed = time.Since(start)
	for _, c := range chains {
		c.CloseIdleConnections()
	}
	// nginx logs a request after its response is sent.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := n.Statuses()
		st.attempts, st.throttled = 0, s[429]
		for _, k := range s {
			st.attempts += k
		}
		if st.attempts >= st.ok || time.Now().After(deadline) {
			break
		}
	}
	return st
}

// TestConvergesOnNginx crawls 120 pages of a real nginx that allows 2 (or
// 10) requests a second per client with limit_req (burst 1, 429 with
// Retry-After: 2 beyond it), with 8 workers starting at 600/min with
// bursts of 5 — too fast. Pacing must converge on the server's limit:
// every page ends 200, at most 5 % of the attempts are answered 429, and
// the crawl runs at no less than 0.85× the allowed rate. It runs with
// in-memory state and with a fleet of two chains sharing Redis state.
func TestConvergesOnNginx(t *testing.T) {
	for _, perSecond := range []int{2, 10} {
		for _, store := range []string{"memory", "redis"} {
			t.Run(fmt.Sprintf("%dperSecond/%s", perSecond, store), func(t *testing.T) {
				t.Parallel()
				n := testprog.RateLimitedNginx(t, testprog.NginxLimit{PerSecond: perSecond, Burst: 1, RetryAfter: 2})
				var chains []*egresskit.Transport
				switch store {
				case "memory":
					chains = append(chains, mustChain(convergeConfig(nil)))
				case "redis":
					client := redistest.Client(t)
					prefix := redistest.Prefix(t)
					for range 2 {
						st, err := redisstore.New(client, redisstore.Config{Prefix: prefix, HostState: convergeHostState, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
						if err != nil {
							t.Fatal(err)
						}
						chains = append(chains, mustChain(convergeConfig(st)))
					}
				}
				st := crawl(t, n, float64(perSecond), chains, 120, 8)
				t.Log(st)
				if st.ok != st.urls {
					t.Errorf("%d of %d pages failed; first: %v", st.urls-st.ok, st.urls, st.firstError)
				}
				if st.share() > 0.05 {
					t.Errorf("%.1f%% of attempts answered 429, want at most 5%%", 100*st.share())
				}
				if st.ratio() < 0.85 {
					t.Errorf("crawl ran at %.2f× the allowed rate, want at least 0.85×", st.ratio())
				}
				if t.Failed() {
					t.Logf("nginx access log (end time, duration, status):\n%s", n.Log())
				}
			})
		}
	}
}
