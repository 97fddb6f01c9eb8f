package egresskit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
)

// ceilingLog is a Store that records every SetCeiling.
type ceilingLog struct {
	hoststate.Store
	mu    sync.Mutex // guards calls and fail
	calls []float64
	fail  int // how many of the next calls fail with errCeiling
}

var errCeiling = errors.New("ceiling store unavailable")

func (c *ceilingLog) SetCeiling(ctx context.Context, host string, perMinute float64) error {
	c.mu.Lock()
	c.calls = append(c.calls, perMinute)
	fail := c.fail > 0
	if fail {
		c.fail--
	}
	c.mu.Unlock()
	if fail {
		return errCeiling
	}
	return c.Store.SetCeiling(ctx, host, perMinute)
}

func (c *ceilingLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// TestCrawlDelayCeilingRefresh: the chain tells the store a host's
// Crawl-delay ceiling when it first sees it, not again on every request,
// and again once a minute has passed (so that a host whose state was
// evicted while idle gets it back). A host without Crawl-delay never gets
// a ceiling.
func TestCrawlDelayCeilingRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["slow.test"] = "User-agent: *\nCrawl-delay: 1\n"
		s.handle("slow.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		s.handle("free.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		log := &ceilingLog{Store: mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}})}
		cfg := fastConfig(s)
		cfg.Store = mustMemory(hoststate.Config{})
		cfg.Store = log
		c := &http.Client{Transport: mustChain(cfg)}
		steps := []struct {
			after time.Duration // fake time before the request
			host  string
			want  int // SetCeiling calls so far
		}{
			{0, "slow.test", 1},
			{time.Second, "slow.test", 1},
			{58 * time.Second, "slow.test", 1}, // 59s after the first
			{0, "free.test", 1},
			{time.Second, "slow.test", 2}, // 60s after the first: refreshed
			{time.Second, "slow.test", 2},
			{time.Minute, "free.test", 2},
		}
		for i, st := range steps {
			time.Sleep(st.after)
			if _, err := get(c, "http://"+st.host+"/"); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got := log.count(); got != st.want {
				t.Fatalf("step %d (%s): %d SetCeiling calls, want %d", i, st.host, got, st.want)
			}
		}
		for i, pm := range log.calls {
			if pm != 60 {
				t.Errorf("SetCeiling %d: %v/min, want 60 from Crawl-delay 1", i, pm)
			}
		}
	})
}

// TestCrawlDelayCeilingFailedIsRetried: a Crawl-delay ceiling the store
// failed to take is not taken as applied: the request that met the failure
// returns its error, having sent nothing, and the next request to the host
// tells the store again instead of waiting for the refresh.
func TestCrawlDelayCeilingFailedIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["slow.test"] = "User-agent: *\nCrawl-delay: 1\n"
		s.handle("slow.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		log := &ceilingLog{Store: mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}}), fail: 1}
		cfg := fastConfig(s)
		cfg.Store = mustMemory(hoststate.Config{})
		cfg.Store = log
		c := &http.Client{Transport: mustChain(cfg)}
		if _, err := get(c, "http://slow.test/"); !errors.Is(err, errCeiling) {
			t.Fatalf("first request: error %v, want the store's %v", err, errCeiling)
		}
		if n := s.requests("slow.test"); n != 0 {
			t.Fatalf("first request: the host was sent %d requests, want none", n)
		}
		time.Sleep(time.Second)
		for i := range 2 {
			if _, err := get(c, "http://slow.test/"); err != nil {
				t.Fatalf("request %d after the failure: %v", i+1, err)
			}
		}
		if got := log.count(); got != 2 {
			t.Fatalf("%d SetCeiling calls, want 2 (the failed one, then once more on the next request)", got)
		}
	})
}
