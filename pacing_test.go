package egresskit_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
)

// hammer runs 8 workers that request host's pages through chain until ctx
// ends; a request the chain does not send (a pacing wait past the
// deadline) is tried again 100ms later.
func hammer(ctx context.Context, chain *egresskit.Transport, host string) {
	c := &http.Client{Transport: chain}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/w%d/%d", host, w, i), nil)
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				} else {
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		})
	}
	wg.Wait()
}

// longRetryAfters are waits at, beyond and far beyond the 24h that used
// to be the cut-off between a wait and garbage.
var longRetryAfters = []string{"120", "86400", "86401", "99999999999"}

// TestLongRetryAfterOneRequest: a host paced at 10 r/s answers 429 with a
// long Retry-After; 8 workers keep asking for 8s. Exactly one request
// reaches the host, whatever the length: a longer wait never gets the
// host contacted sooner. In memory (synctest).
func TestLongRetryAfterOneRequest(t *testing.T) {
	for _, ra := range longRetryAfters {
		t.Run(ra, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				s.handle("busy.test", func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Retry-After", ra)
					http.Error(w, "slow down", http.StatusTooManyRequests)
				})
				cfg := fastConfig(s)
				cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}})
				ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
				defer cancel()
				hammer(ctx, mustChain(cfg), "busy.test")
				if got := s.requests("busy.test"); got != 1 {
					t.Errorf("Retry-After %s: %d requests reached the host in 8s, want 1", ra, got)
				}
			})
		})
	}
}

// TestLongRetryAfterOneRequestRedis is TestLongRetryAfterOneRequest with
// two chains sharing Redis state (4 workers each would do; each runs 8),
// in real time: exactly one request in 8s.
func TestLongRetryAfterOneRequestRedis(t *testing.T) {
	client := redistest.Client(t)
	for _, ra := range longRetryAfters {
		t.Run(ra, func(t *testing.T) {
			t.Parallel()
			s := newSite()
			s.handle("busy.test", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", ra)
				http.Error(w, "slow down", http.StatusTooManyRequests)
			})
			prefix := redistest.Prefix(t)
			ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for range 2 {
				st, err := redisstore.New(client, redisstore.Config{Prefix: prefix,
					HostState:    hoststate.Config{Limit: ratelimit.Config{PerMinute: 600}},
					OnRedisError: redisstore.FailClosed, Timeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				cfg := fastConfig(s)
				cfg.Store = st
				chain := mustChain(cfg)
				wg.Go(func() { hammer(ctx, chain, "busy.test") })
			}
			wg.Wait()
			if got := s.requests("busy.test"); got != 1 {
				t.Errorf("Retry-After %s: %d requests reached the host in 8s, want 1", ra, got)
			}
		})
	}
}

// TestNoHerdAfterPause: 8 workers crawl 40 pages of a host paced at
// 600/min with bursts of 5; its first answer is a 429 with Retry-After 2.
// From that 429 on, no 100ms window sees more than one request: the
// attempts that waited out the pause go out one interval apart, at the
// halved rate, and every page ends 200.
func TestNoHerdAfterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := newSite()
		var (
			mu       sync.Mutex // guards sent
			sent     []time.Duration
			throttle sync.Once
		)
		s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			sent = append(sent, time.Since(start))
			mu.Unlock()
			first := false
			throttle.Do(func() { first = true })
			if first {
				w.Header().Set("Retry-After", "2")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			w.Write([]byte("ok"))
		})
		cfg := fastConfig(s)
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 600, Burst: 5}})
		c := &http.Client{Transport: mustChain(cfg)}
		jobs := make(chan int)
		var wg sync.WaitGroup
		var failed sync.Map
		for range 8 {
			wg.Go(func() {
				for i := range jobs {
					status, err := get(c, "http://a.test/"+strconv.Itoa(i))
					if status != 200 {
						failed.Store(i, fmt.Sprint(status, err))
					}
				}
			})
		}
		for i := range 40 {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		failed.Range(func(k, v any) bool {
			t.Errorf("page %v: %v", k, v)
			return true
		})
		windows := map[time.Duration]int{}
		for _, d := range sent {
			windows[d.Truncate(100*time.Millisecond)]++
		}
		for w, n := range windows {
			if w > 0 && n > 1 {
				t.Errorf("%d requests in the 100ms window at %v, want at most 1 after the 429 (all: %v)", n, w, sent)
			}
		}
		if len(sent) != 41 {
			t.Errorf("%d requests, want 41 (40 pages, one retried after the 429)", len(sent))
		}
	})
}
