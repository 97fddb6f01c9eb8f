package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

// targets are the local hosts the crawler visits, one per behaviour the
// dashboard should show.
type targets struct {
	healthy   *httptest.Server // always 200
	flaky     *httptest.Server // every third request 503: retried
	throttled *httptest.Server // the very first request 429, Retry-After: 1
	challenge *httptest.Server // a bot challenge: the host is halted
	down      *httptest.Server // always 502: the breaker opens

	served atomic.Int64 // requests the targets answered, robots.txt excluded
}

func newTargets() *targets {
	t := &targets{}
	var flaky, throttled atomic.Int64
	noRobots := func(h http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			t.served.Add(1)
			h(w, r)
		})
	}
	page := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html>page %s</html>", r.URL.Path)
	}
	t.healthy = httptest.NewServer(noRobots(page))
	t.flaky = httptest.NewServer(noRobots(func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1)%3 == 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		page(w, r)
	}))
	t.throttled = httptest.NewServer(noRobots(func(w http.ResponseWriter, r *http.Request) {
		if throttled.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		page(w, r)
	}))
	t.challenge = httptest.NewServer(noRobots(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cf-Mitigated", "challenge")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><title>Just a moment...</title></html>")
	}))
	t.down = httptest.NewServer(noRobots(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	return t
}

// all returns the targets by name.
func (t *targets) all() map[string]*httptest.Server {
	return map[string]*httptest.Server{
		"healthy": t.healthy, "flaky": t.flaky, "throttled": t.throttled,
		"challenge": t.challenge, "down": t.down,
	}
}

func (t *targets) close() {
	for _, s := range t.all() {
		s.Close()
	}
}
