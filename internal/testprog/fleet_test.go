package testprog_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/testprog"
)

// TestRunFleet runs a fleet of two worker processes sharing Redis and one
// keeping its state in memory (the last dialling loopback for a host name
// of its own) against one server: every URL is fetched once, 200, and each
// worker reports its pages, statuses and latencies.
func TestRunFleet(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Host+r.URL.Path]++
		mu.Unlock()
		io.WriteString(w, "page")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	urls := func(host string, from, n int) []string {
		var us []string
		for i := range n {
			us = append(us, fmt.Sprintf("http://%s/page/%d", host, from+i))
		}
		return us
	}
	addr, prefix := redistest.Addr(t), redistest.Prefix(t)
	workers := []testprog.FleetWorker{
		{Redis: addr, Prefix: prefix, PerMinute: 60000, Goroutines: 4, URLs: urls(srv.Listener.Addr().String(), 0, 10)},
		{Redis: addr, Prefix: prefix, PerMinute: 60000, Goroutines: 4, URLs: urls(srv.Listener.Addr().String(), 10, 10)},
		{PerMinute: 60000, MaxInFlight: -1, Goroutines: 2, Loopback: true, URLs: urls("fleet.example:"+port, 0, 6)},
	}
	res := testprog.RunFleet(t, workers)
	for i, r := range res {
		if r.Pages != len(workers[i].URLs) || r.OK() != r.Pages || r.Errors != 0 || len(r.Latency) != r.Pages {
			t.Errorf("worker %d: %+v, want %d pages 200, no error, a latency each", i, r, len(workers[i].URLs))
		}
		if len(r.Hosts) != 1 {
			t.Errorf("worker %d: hosts %v, want one", i, r.Hosts)
		}
		for h, c := range r.Hosts {
			if c.Answers[200] != r.Pages || c.Final[200] != r.Pages {
				t.Errorf("worker %d, host %s: %+v, want %d answers and final statuses 200", i, h, c, r.Pages)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 26 {
		t.Errorf("the server saw %d distinct pages, want 26", len(seen))
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s fetched %d times, want once", p, n)
		}
	}
}
