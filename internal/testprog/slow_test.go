package testprog_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/testprog"
)

// TestSlowServer sends 6 requests at once to 2 workers serving each in
// 200ms: 5 or 6 are in flight at once and at most 2 are served at once
// (the workers), so the rest wait in the queue. The latencies are
// logged, not checked: the queue is shown by what the server counted.
func TestSlowServer(t *testing.T) {
	s := testprog.SlowServer(t, testprog.SlowOptions{Workers: 2, Service: 200 * time.Millisecond})
	if got := s.Capacity(); got != 10 {
		t.Errorf("capacity %v, want 10/s", got)
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			resp, err := http.Get(s.URL + "/page/" + string(rune('a'+i)))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(st)
	if st.Requests != 6 || st.MaxInFlight < 5 || st.MaxInFlight > 6 {
		t.Errorf("stats %+v, want 6 answered, 5-6 in flight at most", st)
	}
	// 5 or more in flight, at most 2 of them served: the rest queued.
	if st.MaxServing != 2 || st.P50 > st.P95 {
		t.Errorf("stats %+v, want 2 served at once at most (the workers), p50 <= p95", st)
	}
	if st.MeanInFlight <= 2 || st.MeanInFlight > 6 {
		t.Errorf("mean in flight %v, want between 2 and 6", st.MeanInFlight)
	}
}

// TestSlowServerPerHost sends 4 requests at once to each of two host
// names of a per-host server with 2 workers serving each in 200ms: each
// host is served by its own workers (at most 2 of its requests served at
// once, the others queued, while the server as a whole serves more than
// 2), and HostStats reports each host alone, Stats both.
func TestSlowServerPerHost(t *testing.T) {
	s := testprog.SlowServer(t, testprog.SlowOptions{Workers: 2, Service: 200 * time.Millisecond, PerHost: true})
	addr := strings.TrimPrefix(s.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	hosts := []string{"a.test:" + port, "b.test:" + port}
	var wg sync.WaitGroup
	for _, h := range hosts {
		for i := range 4 {
			wg.Go(func() {
				resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("http://%s/page/%d", h, i))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
	}
	wg.Wait()
	for _, h := range hosts {
		st, err := s.HostStats(h)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", h, st)
		if st.Requests != 4 || st.MaxInFlight < 3 || st.MaxInFlight > 4 || st.MaxServing != 2 {
			t.Errorf("%s: %v, want 4 answered, 3-4 in flight, 2 served at once (its own 2 workers), the others queued", h, st)
		}
	}
	all, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// One pool of 2 workers for both hosts would never serve more than 2
	// at once.
	if all.Requests != 8 || all.MaxInFlight < 5 || all.MaxServing < 3 || all.MaxServing > 4 {
		t.Errorf("all hosts: %v, want 8 answered, 5-8 in flight, 3-4 served at once (each host's own workers)", all)
	}
}
