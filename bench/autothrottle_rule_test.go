package bench

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/egresstest"
)

// TestAutothrottleNext checks the reference AutoThrottle's delay rule on
// made-up latencies, with the benchmark's settings (floor 100ms, ceiling
// 60s, target concurrency 1) unless a case says otherwise.
func TestAutothrottleNext(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name           string
		concurrency    float64
		delay, latency time.Duration
		status         int
		want           time.Duration
	}{
		{"a fast answer halves the start delay", 1, 5 * time.Second, 10 * ms, 200, 2505 * ms},
		{"the mean, when above the target", 1, 1000 * ms, 200 * ms, 200, 600 * ms},
		{"the target, when above the mean", 1, 1000 * ms, 3000 * ms, 200, 3000 * ms},
		{"steady when latency equals the delay", 1, 400 * ms, 400 * ms, 200, 400 * ms},
		{"not below the floor", 1, 100 * ms, 1 * ms, 200, 100 * ms},
		{"not above the ceiling", 1, 50 * time.Second, 100 * time.Second, 200, 60 * time.Second},
		{"the target divides the latency by the concurrency", 2, 1000 * ms, 1000 * ms, 200, 750 * ms},
		{"a 429 does not lower it", 1, 1000 * ms, 100 * ms, 429, 1000 * ms},
		{"a 503 does not lower it", 1, 1000 * ms, 0, 503, 1000 * ms},
		{"a 404 does not lower it", 1, 1000 * ms, 1000 * ms, 404, 1000 * ms},
		{"a 429 may raise it", 1, 1000 * ms, 3000 * ms, 429, 3000 * ms},
		{"a 429 raises it no further than the ceiling", 1, 59 * time.Second, 90 * time.Second, 429, 60 * time.Second},
		{"a 201 is not a 200", 1, 1000 * ms, 200 * ms, 201, 1000 * ms},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := autothrottleDefaults(100 * ms)
			cfg.targetConcurrency = c.concurrency
			if got := autothrottleNext(cfg, c.delay, c.latency, c.status); got != c.want {
				t.Errorf("autothrottleNext(delay %v, latency %v, status %d) = %v, want %v", c.delay, c.latency, c.status, got, c.want)
			}
		})
	}
}

// TestAutothrottleConverges checks the rule over a run of answers: from
// the start delay, 1ms answers bring the delay to the floor in six steps,
// and slow ones raise it to their latency and hold it there.
func TestAutothrottleConverges(t *testing.T) {
	cfg := autothrottleDefaults(100 * time.Millisecond)
	tr := newAutothrottleRef(http.DefaultTransport, cfg)
	delay := tr.delay("example.com")
	if delay != 5*time.Second {
		t.Fatalf("start delay %v, want 5s", delay)
	}
	steps := 0
	for ; delay > cfg.minDelay; steps++ {
		delay = autothrottleNext(cfg, delay, time.Millisecond, 200)
	}
	if steps != 6 || delay != cfg.minDelay {
		t.Errorf("reached %v after %d fast answers, want the floor after 6", delay, steps)
	}
	for range 20 {
		delay = autothrottleNext(cfg, delay, 2*time.Second, 200)
	}
	if delay != 2*time.Second {
		t.Errorf("after slow answers the delay is %v, want their 2s latency", delay)
	}
	floor := autothrottleDefaults(10 * time.Second)
	if d := newAutothrottleRef(http.DefaultTransport, floor).delay("example.com"); d != 10*time.Second {
		t.Errorf("start delay with a 10s floor is %v, want the floor", d)
	}
}

// TestAutothrottleRetries checks the reference AutoThrottle's retries
// against an in-memory server: a retried status is sent three times in
// all, another status once, and a page that succeeds on a retry is
// returned. It runs in a synctest bubble, so the gaps between attempts
// are the bubble's clock, exact: the rule's, not the machine's load.
func TestAutothrottleRetries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int // the server's answers, in turn; the last repeats
		want     int   // the status returned
		attempts int
	}{
		{"429 three times", []int{429}, 429, 3},
		{"503 then 200", []int{503, 200}, 200, 2},
		{"524 three times", []int{524}, 524, 3},
		{"404 once", []int{404}, 404, 1},
		{"200 once", []int{200}, 200, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					mu    sync.Mutex
					calls int
					sent  []time.Time
				)
				srv := egresstest.NewHandlerTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					status := c.statuses[min(calls, len(c.statuses)-1)]
					calls++
					sent = append(sent, time.Now())
					mu.Unlock()
					w.Header().Set("Retry-After", "3600")
					w.WriteHeader(status)
				}))
				cfg := autothrottleDefaults(20 * time.Millisecond)
				cfg.startDelay = 0
				tr := newAutothrottleRef(srv, cfg)
				resp, err := (&http.Client{Transport: tr}).Get("http://a.test/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				if resp.StatusCode != c.want || calls != c.attempts {
					t.Errorf("got %d after %d attempts, want %d after %d", resp.StatusCode, calls, c.want, c.attempts)
				}
				// A retry waits its turn: at least half the 20ms floor
				// (the delay times 0.5 + a uniform draw).
				for i := 1; i < len(sent); i++ {
					if gap := sent[i].Sub(sent[i-1]); gap < 10*time.Millisecond {
						t.Errorf("attempt %d left %v after the one before, want at least 10ms", i+1, gap)
					}
				}
			})
		})
	}
}

// TestAutothrottleInFlight checks that at most perHost requests to a host
// are in flight at once, a request counting until its body is closed.
func TestAutothrottleInFlight(t *testing.T) {
	var (
		mu            sync.Mutex
		now, maxSoFar int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now++
		maxSoFar = max(maxSoFar, now)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		now--
		mu.Unlock()
	}))
	defer srv.Close()
	cfg := autothrottleDefaults(time.Millisecond)
	cfg.startDelay = 0
	cfg.perHost = 2
	cfg.jitter = func() float64 { return 0 }
	tr := newAutothrottleRef(&http.Transport{}, cfg)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if maxSoFar != 2 {
		t.Errorf("at most %d requests in flight, want 2", maxSoFar)
	}
}
