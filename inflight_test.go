package egresskit_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/telemetry"
)

var inflightLong = flag.Bool("inflight.long", false, "crawl the slowing server for about a minute rather than 30s")

// slowCrawl fetches pages distinct pages of base with workers goroutines
// through c, reading every body to the end.
func slowCrawl(t *testing.T, c *http.Client, base string, pages, workers int) (ok int) {
	t.Helper()
	jobs := make(chan int)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s/page/%d", base, i), nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("page %d: %v", i, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
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

// TestInFlightCapSlowServer crawls a server with 8 workers serving each
// request in 1s (8 requests a second; the rest queue) with 32 goroutines,
// through the chain paced too fast for it (10 a second, bursts of 5) and
// with a bare client. The chain must keep the requests in flight at the
// server at or below the cap it computed, and reach 0.9 of the server's
// capacity; the server's latency for both is logged.
func TestInFlightCapSlowServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 30s")
	}
	const workers, crawlers = 8, 32
	// ~30s at 8 a second: the chain's cap starts small at a host met for
	// the first time and grows each round trip, about two of this server's
	// round trips of a second before it fills the server.
	pages := 240
	if *inflightLong {
		pages = 480
	}
	chainSrv := testprog.SlowServer(t, testprog.SlowOptions{Workers: workers, Service: time.Second})
	bareSrv := testprog.SlowServer(t, testprog.SlowOptions{Workers: workers, Service: time.Second})
	capacity := chainSrv.Capacity()

	var peak, final int
	t.Run("group", func(t *testing.T) {
		t.Run("egresskit", func(t *testing.T) {
			t.Parallel()
			base := &http.Transport{MaxIdleConnsPerHost: crawlers}
			defer base.CloseIdleConnections()
			tr := mustChain(convergeConfig(nil, base)) // MaxInFlight: the default
			if ok := slowCrawl(t, &http.Client{Transport: tr}, chainSrv.URL, pages, crawlers); ok != pages {
				t.Errorf("%d of %d pages 200", ok, pages)
			}
			key, err := tr.HostKey(chainSrv.URL)
			if err != nil {
				t.Fatal(err)
			}
			peak, final = egresskit.InFlightPeak(tr, key)
		})
		t.Run("bare", func(t *testing.T) {
			t.Parallel()
			tr := &http.Transport{MaxIdleConnsPerHost: crawlers}
			defer tr.CloseIdleConnections()
			if ok := slowCrawl(t, &http.Client{Transport: tr}, bareSrv.URL, pages, crawlers); ok != pages {
				t.Errorf("%d of %d pages 200", ok, pages)
			}
		})
	})
	chain, err := chainSrv.Stats()
	if err != nil {
		t.Fatal(err)
	}
	bare, err := bareSrv.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %d workers, 1s each: capacity %.1f/s", workers, capacity)
	t.Logf("egresskit (cap peak %d, now %d): %v", peak, final, chain)
	t.Logf("bare: %v", bare)
	if peak == 0 {
		t.Fatal("the chain computed no in-flight cap")
	}
	if chain.MaxInFlight > peak {
		t.Errorf("server saw %d in flight, above the chain's cap (at most %d)", chain.MaxInFlight, peak)
	}
	if got := chain.Throughput(); got < 0.9*capacity {
		t.Errorf("throughput %.2f/s, below 0.9 of the server's capacity %.1f/s", got, capacity)
	}
}

// TestInFlightWaitHonoursContext holds a host's one slot (MaxInFlight 1)
// with a request the server does not answer yet: a second request waits
// for the slot until its deadline and is not sent, nor retried; a third,
// sent after the first ended, goes out.
func TestInFlightWaitHonoursContext(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			<-release
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var events []*telemetry.Event
	var mu sync.Mutex
	tr := mustChain(egresskit.Config{
		IgnoreRobots: true,
		MaxInFlight:  1,
		Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 600000, Burst: 100}}),
		Observers: []telemetry.Observer{telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})},
	})
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	first := make(chan error, 1)
	go func() {
		resp, err := c.Get(srv.URL + "/first")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		first <- err
	}()
	for hits.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/second", nil)
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second request: err %v, want DeadlineExceeded", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL + "/third")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := hits.Load(); n != 2 {
		t.Errorf("server saw %d requests, want 2 (the one that waited not sent)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	var second []*telemetry.Event
	for _, e := range events {
		if strings.HasSuffix(e.URL, "/second") {
			second = append(second, e)
		}
	}
	if len(second) != 1 || second[0].Unsent != "deadline" || !second[0].Final {
		t.Errorf("second request's events %+v, want one, final, unsent for its deadline", second)
	}
}

// statusCounting is a store that counts Status calls and, when hideRate is
// set, does not report the rate on its admissions (as a store that does
// not say).
type statusCounting struct {
	hoststate.Store
	hideRate bool
	status   atomic.Int32
}

func (s *statusCounting) Admit(ctx context.Context, host string) (hoststate.Admission, error) {
	a, err := s.Store.Admit(ctx, host)
	if s.hideRate {
		a.PerMinute = 0
	}
	return a, err
}

func (s *statusCounting) Status(ctx context.Context, host string) (hoststate.Status, error) {
	s.status.Add(1)
	return s.Store.Status(ctx, host)
}

// TestInFlightRateFromAdmission: the in-flight cap takes a host's rate from
// its admission, so a crawl over many hosts, each met once, asks the store
// for no Status (with a Redis store, a round trip each); from a store whose
// admissions do not report the rate, it asks Status once per new host.
func TestInFlightRateFromAdmission(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	const hosts = 50
	for _, tt := range []struct {
		name     string
		hideRate bool
		want     int32
	}{
		{"rate on the admission", false, 0},
		{"no rate on the admission", true, hosts},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &statusCounting{Store: mustMemory(hoststate.Config{}), hideRate: tt.hideRate}
			base := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, srv.Listener.Addr().String())
			}}
			defer base.CloseIdleConnections()
			c := &http.Client{Transport: mustChain(egresskit.Config{Base: base, IgnoreRobots: true, Store: st})}
			for i := range hosts {
				resp, err := c.Get(fmt.Sprintf("http://h%d.example/", i))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if n := st.status.Load(); n != tt.want {
				t.Errorf("%d Status calls for %d hosts met once, want %d", n, hosts, tt.want)
			}
		})
	}
}
