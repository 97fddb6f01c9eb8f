package testprog_test

import (
	"io"
	"net/http"
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
