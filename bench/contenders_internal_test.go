package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestContenders checks that every contender sends the benchmarks' request
// and returns the canned response, in memory and over loopback, so that
// the benchmarks measure working code. The Redis contender needs a Redis
// server (EGRESSKIT_REDIS_ADDR); without one it is skipped, and
// EGRESSKIT_REQUIRE_REDIS=1 makes that a failure.
func TestContenders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(serveCanned))
	defer srv.Close()
	for _, c := range contenders {
		t.Run(c.name, func(t *testing.T) {
			for _, tt := range []struct {
				name string
				url  string
				r    func() route
			}{
				{"memory", "http://bench.test/page", func() route { return route{base: memTransport{}} }},
				{"loopback", srv.URL + "/page", func() route {
					base := loopbackTransport()
					t.Cleanup(base.CloseIdleConnections)
					return route{base: base, loopback: true}
				}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					client := &http.Client{Transport: c.build(t, tt.r())}
					req := newRequest(t, tt.url)
					for i := range 3 {
						if err := fetch(client, req); err != nil {
							t.Fatalf("fetch #%d through %s: %v", i+1, c.name, err)
						}
					}
				})
			}
		})
	}
}
