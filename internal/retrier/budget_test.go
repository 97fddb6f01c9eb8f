package retrier_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit/retry"
)

// TestBudgetHalfFailing: a host answering 503 to every other request (not
// every request fails, as happens before a breaker would open) receives,
// for 200 requests, at most 1.2× the requests it would without retries,
// plus the budget's minimum of 10; without a budget it receives one retry
// for every 503, half as many again.
func TestBudgetHalfFailing(t *testing.T) {
	for _, tt := range []struct {
		name    string
		budget  float64
		maxHits int64
		minHits int64
	}{
		{"default budget", 0, 200*12/10 + 10, 200},
		{"no budget", -1, 1000, 299},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1)%2 == 1 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			tr := mustRetry(http.DefaultTransport, retry.Policy{BaseDelay: -1, Budget: tt.budget})
			c := &http.Client{Transport: tr}
			for i := range 200 {
				resp, err := c.Get(fmt.Sprintf("%s/%d", srv.URL, i))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			t.Logf("200 requests, half of the answers 503: the server received %d", hits.Load())
			if got := hits.Load(); got > tt.maxHits || got < tt.minHits {
				t.Errorf("server received %d requests for 200, want %d to %d", got, tt.minHits, tt.maxHits)
			}
		})
	}
}
