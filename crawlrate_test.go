package egresskit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// newCrawlChain builds a chain for the crawl-rate tests.
func newCrawlChain(t *testing.T, cfg egresskit.Config) *egresskit.Transport {
	t.Helper()
	return mustChain(cfg)
}

// TestCrawlRateCapsAllHosts sends 70 requests at once, spread over 50
// hosts whose own pacing does not bind, through a chain capped at 20
// requests a second. The one server behind every host counts arrivals: at
// most 20 a second over the run beyond the burst of 2, never more than 22
// in any second, and every request is answered. In a synctest bubble: the
// arrivals are read from the bubble's clock.
func TestCrawlRateCapsAllHosts(t *testing.T) {
	synctest.Test(t, crawlRateCapsAllHosts)
}

func crawlRateCapsAllHosts(t *testing.T) {
	const perSecond, burst, hosts, sends = 20, 2, 50, 70
	var mu sync.Mutex // guards arrivals
	var arrivals []time.Time
	base := egresstest.NewHandlerTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	tr := newCrawlChain(t, egresskit.Config{
		Base:         base,
		IgnoreRobots: true,
		Retry:        retry.Policy{MaxRetries: -1},
		Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 10}}),
		CrawlRate:    perSecond,
	})
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	errs := make([]error, sends)
	for i := range sends {
		wg.Go(func() {
			resp, err := client.Get(fmt.Sprintf("http://h%02d.example/page%d", i%hosts, i))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	mu.Lock()
	at := slices.Clone(arrivals)
	mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if len(at) != sends {
		t.Fatalf("server saw %d requests, want %d", len(at), sends)
	}
	span := at[len(at)-1].Sub(at[0]).Seconds()
	avg := float64(len(at)-burst) / span
	most := 0
	for i := range at {
		j := i
		for j < len(at) && at[j].Sub(at[i]) <= time.Second {
			j++
		}
		most = max(most, j-i)
	}
	t.Logf("%d requests over %d hosts in %.2fs: %.2f r/s beyond the burst, at most %d in any second", len(at), hosts, span, avg, most)
	if avg > perSecond*1.02 {
		t.Errorf("server saw %.2f requests/s beyond the burst, want <= %d", avg, perSecond)
	}
	if most > perSecond+burst {
		t.Errorf("server saw %d requests in one second, want <= %d (rate + burst)", most, perSecond+burst)
	}
}

// TestCrawlRateRefused: a CrawlRate the chain cannot honour is refused by
// New, naming the field; a negative one means no cap, as everywhere.
func TestCrawlRateRefused(t *testing.T) {
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := egresskit.New(egresskit.Config{CrawlRate: r}); !errors.Is(err, egresskit.ErrInvalidConfig) || !strings.Contains(err.Error(), "CrawlRate") {
			t.Errorf("New(CrawlRate %v) = %v, want ErrInvalidConfig naming CrawlRate", r, err)
		}
	}
	if _, err := egresskit.New(egresskit.Config{CrawlRate: -1}); err != nil {
		t.Errorf("New(CrawlRate -1) = %v, want nil (no cap)", err)
	}
}

// TestCrawlRateWaitPastDeadline: when the crawl rate's next token comes
// after the request's deadline, the request fails at once (by the
// synctest bubble's clock) with context.DeadlineExceeded and is not sent.
func TestCrawlRateWaitPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		hits := 0
		srv := egresstest.NewHandlerTransport(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { mu.Lock(); hits++; mu.Unlock() }))
		tr := newCrawlChain(t, egresskit.Config{
			Base:         srv,
			IgnoreRobots: true,
			Retry:        retry.Policy{MaxRetries: -1},
			Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000}}), // the host's pacing does not bind
			CrawlRate:    0.01,
		})
		get := func(host string) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		if err := get("a.test"); err != nil {
			t.Fatalf("first request = %v, want it sent (the burst)", err)
		}
		start := time.Now()
		if err := get("b.test"); !errors.Is(err, context.DeadlineExceeded) { // no host pacing to wait for
			t.Fatalf("second request = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the refused request took %v, want it refused at once", d)
		}
		mu.Lock()
		defer mu.Unlock()
		if hits != 1 {
			t.Errorf("the server saw %d requests, want 1", hits)
		}
	})
}
