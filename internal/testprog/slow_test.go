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
// 200ms: they are answered in three rounds, the last after ~600ms.
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
	if st.P95 < 550*time.Millisecond || st.P50 < 350*time.Millisecond || st.P50 > st.P95 {
		t.Errorf("latency p50 %v p95 %v, want the queue's: ~400ms and ~600ms", st.P50, st.P95)
	}
	if st.MeanInFlight <= 2 || st.MeanInFlight > 6 {
		t.Errorf("mean in flight %v, want between 2 and 6", st.MeanInFlight)
	}
}

// TestSlowServerPerHost sends 4 requests at once to each of two host
// names of a per-host server with 2 workers serving each in 200ms: each
// host is served by its own workers (two rounds, ~400ms at most), and
// HostStats reports each host alone, Stats both.
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
		if st.Requests != 4 || st.MaxInFlight < 3 || st.MaxInFlight > 4 || st.P95 > 550*time.Millisecond || st.P95 < 350*time.Millisecond {
			t.Errorf("%s: %v, want 4 answered, 3-4 in flight, p95 ~400ms (its own 2 workers)", h, st)
		}
	}
	all, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if all.Requests != 8 || all.MaxInFlight < 5 {
		t.Errorf("all hosts: %v, want 8 answered, 5-8 in flight", all)
	}
}
