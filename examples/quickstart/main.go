// Command quickstart crawls four local targets — a healthy one, one that
// throttles, one behind a challenge page and one that hangs — through the
// egresskit chain, and prints what happened per host, with a legend of the
// table's columns. It needs no network.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// targets starts the local hosts and returns them by name, with a function
// that stops them.
func targets() (map[string]*httptest.Server, func()) {
	var throttled atomic.Int64
	hang := make(chan struct{})
	s := map[string]*httptest.Server{
		"healthy": httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "<html>page %s</html>", r.URL.Path)
		})),
		"throttling": httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The first page is refused with 429 and Retry-After: 1.
			if r.URL.Path != "/robots.txt" && throttled.Add(1) == 1 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "<html>ok</html>")
		})),
		"challenge": httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("cf-mitigated", "challenge")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, "<html><title>Just a moment...</title></html>")
		})),
		"hung": httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		})),
	}
	return s, func() {
		close(hang)
		for _, srv := range s {
			srv.Close()
		}
	}
}

// tally counts what one host saw, from the chain's events.
type tally struct {
	requests, attempts int
	outcomes           map[classify.Outcome]int
	waited             time.Duration
}

type tallies struct {
	mu sync.Mutex // guards m
	m  map[string]*tally
}

func (ts *tallies) Observe(_ context.Context, e *telemetry.Event) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[e.Host]
	if t == nil {
		t = &tally{outcomes: map[classify.Outcome]int{}}
		ts.m[e.Host] = t
	}
	t.attempts++
	t.waited += e.Wait
	if e.Final {
		t.requests++
		t.outcomes[e.Outcome]++
	}
}

func run(out io.Writer) error {
	servers, stop := targets()
	defer stop()

	ts := &tallies{m: map[string]*tally{}}
	// The zero Config is the recommended one: 3 jittered retries, 1
	// request per second per host, robots.txt obeyed, refusals halted.
	// Set the crawler's identity, and say who hears about a refusal.
	chain, err := egresskit.New(egresskit.Config{
		UserAgent: "quickstart-bot/1.0",
		Observers: []telemetry.Observer{ts},
		OnEscalate: func(e egresskit.Escalation) {
			fmt.Fprintf(out, "escalation: host %s halted (status %d, markers %v)\n", e.Host, e.Status, e.Markers)
		},
	})
	if err != nil {
		return err
	}
	// The crawler keeps its own client, and its own timeout: a request to
	// the hung host is given up on after 10s, and counts against that host.
	client := &http.Client{Transport: chain, Timeout: 10 * time.Second}

	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	hostName := map[string]string{}

	var wg sync.WaitGroup
	for _, n := range names {
		srv := servers[n]
		key, err := chain.HostKey(srv.URL)
		if err != nil {
			return err
		}
		hostName[key] = n
		// Three pages per host, all at once: the chain paces them.
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Get(fmt.Sprintf("%s/page/%d", srv.URL, i))
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
	}
	wg.Wait()

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "host\trequests\tattempts\tretries\tok\ttransient\tthrottled\trefused\tnot sent\twaited")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, key := range sortedKeys(hostName) {
		t := ts.m[key]
		if t == nil {
			t = &tally{outcomes: map[classify.Outcome]int{}}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", hostName[key], t.requests, t.attempts,
			t.attempts-t.requests, t.outcomes[classify.OK], t.outcomes[classify.Transient],
			t.outcomes[classify.Throttled], t.outcomes[classify.Refused],
			t.outcomes[classify.Permanent]+t.outcomes[classify.Canceled], t.waited.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = io.WriteString(out, legend)
	return err
}

// legend says what the table's columns count.
const legend = `
Legend (one telemetry.Event per attempt, read by an Observer):
  requests   requests made, 3 per host; attempts: the chain's tries
             (retries = attempts - requests)
  ok, transient, throttled, refused
             how each request ended: its last attempt's classify.Outcome
  not sent   requests the chain did not send: Permanent (a halted host, an
             open breaker, robots.txt) or Canceled (the caller gave up first)
  waited     time the attempts waited for their host's pace
The hung host's requests were cut by the client's 10s Timeout: a deadline
that passes while the host is silent counts against it (transient).
`

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] < m[keys[j]] })
	return keys
}
