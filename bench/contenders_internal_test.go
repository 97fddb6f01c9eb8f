package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestContenders checks that every contender sends the benchmarks' request
// and returns each page whole, in memory and over loopback, so that the
// benchmarks measure working code. The Redis contender needs a Redis
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
			for _, p := range pages() {
				if p.err != nil {
					continue // TestPages reports it
				}
				t.Run(p.name, func(t *testing.T) {
					mem := &http.Client{Transport: c.build(t, route{base: memTransport{Page: p}})}
					checkBody(t, mem, "http://bench.test/page", p)
					base := loopbackTransport()
					t.Cleanup(base.CloseIdleConnections)
					lb := &http.Client{Transport: c.build(t, route{base: base, loopback: true})}
					checkBody(t, lb, srv.URL+"/"+p.name, p)
				})
			}
		})
	}
}

// checkBody fetches url through client and checks that the body is p's.
func checkBody(t *testing.T, client *http.Client, url string, p *page) {
	t.Helper()
	resp, err := client.Do(newRequest(t, url))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, p.body) || resp.Header.Get("Content-Type") != p.contentType {
		t.Errorf("GET %s = %d bytes of %q, %v; want the %d bytes of %s (%s)", url, len(got), resp.Header.Get("Content-Type"), err, len(p.body), p.name, p.contentType)
	}
}
