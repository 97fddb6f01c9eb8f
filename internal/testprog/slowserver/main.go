// Command slowserver is an application server for tests whose latency
// grows with the requests in flight: k workers, each serving a request in
// a fixed service time, and a queue for the rest, so that its capacity is
// k/service and a request's latency is its wait in the queue plus the
// service time. Every path but /_stats is a page of a few hundred bytes.
//
// GET /_stats answers what it saw, as JSON (testprog.SlowStats): requests
// in flight (queued or served) over time, their maximum and time-weighted
// mean from the first request to the last answer, the most served at
// once (holding a worker), and the latency of each request from its
// arrival to its answer, p50 and p95.
//
// With -per-host, every host name (the Host header) is a server of its
// own: its own k workers and queue, and its own stats, which
// GET /_stats?host=NAME answers (/_stats alone answers all hosts
// together, their in-flight counts summed).
//
// Usage: slowserver -addr 127.0.0.1:PORT -workers 8 -service 1s [-per-host]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// stats is what the server saw, guarded by mu.
type stats struct {
	mu         sync.Mutex
	inFlight   int
	max        int
	serving    int // holding a worker
	maxServing int
	area       float64 // in flight × seconds, since first
	first      time.Time
	last       time.Time // of the last change of inFlight
	lastDone   time.Time
	latencies  []float64 // seconds
}

// change moves the count in flight by d at now.
func (s *stats) change(d int, now time.Time) {
	if s.first.IsZero() {
		s.first, s.last = now, now
	}
	s.area += float64(s.inFlight) * now.Sub(s.last).Seconds()
	s.last = now
	s.inFlight += d
	s.max = max(s.max, s.inFlight)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	workers := flag.Int("workers", 8, "requests served at once")
	service := flag.Duration("service", time.Second, "service time of a request")
	perHost := flag.Bool("per-host", false, "a pool of workers, and stats, per host name")
	flag.Parse()

	// site is one server: its workers and what it saw.
	type site struct {
		st   stats
		pool chan struct{}
	}
	var (
		mu    sync.Mutex // guards sites
		sites = map[string]*site{}
		all   = &site{pool: make(chan struct{}, *workers)}
	)
	siteOf := func(host string) *site {
		if !*perHost {
			return all
		}
		mu.Lock()
		defer mu.Unlock()
		s := sites[host]
		if s == nil {
			s = &site{pool: make(chan struct{}, *workers)}
			sites[host] = s
		}
		return s
	}
	page := strings.Repeat("slow page ", 40) + "\n"
	mux := http.NewServeMux()
	mux.HandleFunc("/_stats", func(w http.ResponseWriter, r *http.Request) {
		st := &all.st
		if h := r.URL.Query().Get("host"); h != "" && *perHost {
			mu.Lock()
			s := sites[h]
			mu.Unlock()
			if s == nil {
				s = &site{}
			}
			st = &s.st
		}
		st.mu.Lock()
		out := map[string]any{"Requests": len(st.latencies), "MaxInFlight": st.max, "MaxServing": st.maxServing}
		if span := st.lastDone.Sub(st.first).Seconds(); span > 0 {
			// The area up to the last answer: after it, none are in flight.
			area := st.area + float64(st.inFlight)*st.lastDone.Sub(st.last).Seconds()
			if st.lastDone.Before(st.last) {
				area = st.area
			}
			out["MeanInFlight"] = area / span
			out["Span"] = st.lastDone.Sub(st.first)
		}
		lat := slices.Clone(st.latencies)
		st.mu.Unlock()
		slices.Sort(lat)
		if len(lat) > 0 {
			out["P50"] = time.Duration(lat[(len(lat)-1)*50/100] * float64(time.Second))
			out["P95"] = time.Duration(lat[(len(lat)-1)*95/100] * float64(time.Second))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s := siteOf(r.Host)
		counted := []*stats{&s.st} // the site's, and the whole server's
		if s != all {
			counted = append(counted, &all.st)
		}
		arrived := time.Now()
		for _, st := range counted {
			st.mu.Lock()
			st.change(1, arrived)
			st.mu.Unlock()
		}
		s.pool <- struct{}{}
		for _, st := range counted {
			st.mu.Lock()
			st.serving++
			st.maxServing = max(st.maxServing, st.serving)
			st.mu.Unlock()
		}
		time.Sleep(*service)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, page)
		for _, st := range counted { // before the worker is freed for another
			st.mu.Lock()
			st.serving--
			st.mu.Unlock()
		}
		<-s.pool
		done := time.Now()
		for _, st := range counted {
			st.mu.Lock()
			st.change(-1, done)
			st.lastDone = done
			st.latencies = append(st.latencies, done.Sub(arrived).Seconds())
			st.mu.Unlock()
		}
	})
	log.Fatal(http.ListenAndServe(*addr, mux))
}
