package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
)

// The scenarios the example can play.
const (
	scenarioHealthy  = "healthy"  // every host answers
	scenarioDegraded = "degraded" // one host hides behind a challenge page
	scenarioCritical = "critical" // two hosts throttle, one hides behind a challenge
)

var scenarios = []string{scenarioHealthy, scenarioDegraded, scenarioCritical}

// hostNames are the local hosts, in the order they are probed and crawled.
var hostNames = []string{"blog", "docs", "news", "shop", "wiki"}

// site is one local host. It counts what it receives, so that the test can
// compare what the program says with what the hosts saw.
type site struct {
	name string
	srv  *httptest.Server

	mu     sync.Mutex // guards pages and robots
	pages  int        // requests other than robots.txt
	robots int        // requests for robots.txt
}

// counts returns the number of page and robots.txt requests s received.
func (s *site) counts() (pages, robots int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages, s.robots
}

// targetSet is the local web of one scenario.
type targetSet struct {
	scenario string
	sites    []*site // in the order of hostNames
}

// startTargets starts the hosts of scenario on 127.0.0.1. The caller must
// Close the set.
func startTargets(scenario string) (*targetSet, error) {
	valid := false
	for _, s := range scenarios {
		valid = valid || s == scenario
	}
	if !valid {
		return nil, fmt.Errorf("unknown scenario %q (want one of %v)", scenario, scenarios)
	}
	ts := &targetSet{scenario: scenario}
	for _, name := range hostNames {
		s := &site{name: name}
		behave := behaviour(scenario, name)
		s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			if r.URL.Path == "/robots.txt" {
				s.robots++
				s.mu.Unlock()
				fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
				return
			}
			s.pages++
			s.mu.Unlock()
			behave(w, r)
		}))
		ts.sites = append(ts.sites, s)
	}
	return ts, nil
}

// Close stops every host.
func (ts *targetSet) Close() {
	for _, s := range ts.sites {
		s.srv.Close()
	}
}

// behaviour returns how host name answers page requests in scenario.
func behaviour(scenario, name string) http.HandlerFunc {
	page := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><h1>%s</h1><p>page %s</p></html>", name, r.URL.Path)
	}
	challenge := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("cf-mitigated", "challenge")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "<html><title>Just a moment...</title></html>")
	}
	switch {
	case scenario == scenarioDegraded && name == "docs",
		scenario == scenarioCritical && name == "wiki":
		return challenge
	case scenario == scenarioCritical && (name == "shop" || name == "blog"):
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "too many requests", http.StatusTooManyRequests)
		}
	}
	return page
}
