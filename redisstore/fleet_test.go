package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
)

// origin is a loopback HTTP server that counts the requests it answers.
type origin struct {
	*httptest.Server
	n       atomic.Int64
	mu      sync.Mutex // guards handler
	handler http.HandlerFunc
}

func newOrigin(t *testing.T, h http.HandlerFunc) *origin {
	t.Helper()
	o := &origin{handler: h}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.n.Add(1)
		o.mu.Lock()
		h := o.handler
		o.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) handle(h http.HandlerFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.handler = h
}

// host is the origin's host key.
func (o *origin) host() string { return strings.TrimPrefix(o.URL, "http://") }

// worker is one crawler process: its own Redis client, State, HTTP
// transport and egresskit chain.
type worker struct {
	state       *redisstore.Store
	chain       *egresskit.Transport
	client      *http.Client
	escalations atomic.Int64
}

// fleetConfig is the State config of the fleet tests: pacing that does not
// bind unless a test says otherwise.
func fleetConfig(prefix string) redisstore.Config {
	return redisstore.Config{
		Prefix:       prefix,
		HostState:    hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}},
		OnRedisError: redisstore.FailClosed,
		Timeout:      testTimeout,
	}
}

func newWorker(t *testing.T, addr string, cfg redisstore.Config) *worker {
	t.Helper()
	st, err := redisstore.New(redistest.Dial(t, addr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return workerFor(t, st)
}

// workerFor builds a worker around st, with its own HTTP transport.
func workerFor(t testing.TB, st *redisstore.Store) *worker {
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	w := &worker{state: st}
	w.chain = mustChain(egresskit.Config{
		Base:         base,
		Store:        st,
		IgnoreRobots: true,
		UserAgent:    "TestBot/1.0",
		Retry:        retry.Policy{MaxRetries: -1},
		OnEscalate:   func(egresskit.Escalation) { w.escalations.Add(1) },
	})
	w.client = &http.Client{Transport: w.chain}
	return w
}

func newFleet(t *testing.T, n int, cfg redisstore.Config) []*worker {
	t.Helper()
	addr := redistest.Addr(t)
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = newWorker(t, addr, cfg)
	}
	return ws
}

// get sends a GET and returns the status (0 on error) and the error.
func (w *worker) get(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestFleetSharesBreaker: eight failures spread over three workers open the
// breaker for all of them; the ninth request, from any worker, is never
// sent.
func TestFleetSharesBreaker(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	})
	fleet := newFleet(t, 3, fleetConfig(redistest.Prefix(t)))
	for i := range 8 {
		if status, err := fleet[i%3].get(ctx, o.URL+"/"); status != 502 {
			t.Fatalf("request %d from worker %d = %d, %v; want 502", i+1, i%3, status, err)
		}
	}
	for i, w := range fleet {
		_, err := w.get(ctx, o.URL+"/")
		var oe *breaker.OpenError
		if !errors.Is(err, egresskit.ErrOpen) || !errors.As(err, &oe) || oe.Until.IsZero() {
			t.Errorf("worker %d after 8 failures: err = %v, want *breaker.OpenError with Until", i, err)
		}
	}
	if got := o.n.Load(); got != 8 {
		t.Errorf("origin saw %d requests, want 8", got)
	}
	for i, w := range fleet {
		st, err := w.chain.Status(ctx, o.host())
		if err != nil || st.Breaker != breaker.Open {
			t.Errorf("worker %d: State = %v, %v; want open", i, st.Breaker, err)
		}
	}
}

// TestFleetSharesThrottle: a 429 with Retry-After seen by one worker halves
// the rate and pauses the host for every worker.
func TestFleetSharesThrottle(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	cfg := fleetConfig(redistest.Prefix(t))
	cfg.HostState.Limit = ratelimit.Config{PerMinute: 600, Burst: 10}
	fleet := newFleet(t, 2, cfg)
	a, b := fleet[0], fleet[1]
	if status, err := a.get(ctx, o.URL+"/"); status != 429 {
		t.Fatalf("worker A: %d, %v; want 429", status, err)
	}
	st, err := b.chain.Status(ctx, o.host())
	if err != nil {
		t.Fatal(err)
	}
	if st.PerMinute != 300 || st.PausedUntil.IsZero() || st.Recent.Throttled != 1 {
		t.Errorf("worker B sees rate %v, paused until %v, recent %v; want 300, paused, 1 throttled", st.PerMinute, st.PausedUntil, st.Recent)
	}
	// B's next request would wait out A's 30s pause: with a 1s deadline it
	// is refused without being sent.
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = b.get(dctx, o.URL+"/")
	var de *ratelimit.DeadlineError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) || de.Wait < 25*time.Second {
		t.Errorf("worker B during A's pause: err = %v, want a *ratelimit.DeadlineError with a wait of about 30s", err)
	}
	if got := o.n.Load(); got != 1 {
		t.Errorf("origin saw %d requests, want 1", got)
	}
}

// TestFleetSharesHalt: a refusal naming the agent, seen by one worker,
// halts the host for all of them until one resumes it; the escalation
// hook runs once, on the worker that saw the refusal.
func TestFleetSharesHalt(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html>TestBot is not welcome here.</html>")
	})
	fleet := newFleet(t, 3, fleetConfig(redistest.Prefix(t)))
	if status, err := fleet[0].get(ctx, o.URL+"/"); status != 403 {
		t.Fatalf("worker 0: %d, %v; want the 403", status, err)
	}
	for i, w := range fleet {
		for range 3 {
			if _, err := w.get(ctx, o.URL+"/again"); !errors.Is(err, egresskit.ErrHalted) {
				t.Errorf("worker %d after the halt: err = %v, want egresskit.ErrHalted", i, err)
			}
		}
	}
	if got := o.n.Load(); got != 1 {
		t.Errorf("origin saw %d requests, want 1", got)
	}
	if got := fleet[0].escalations.Load() + fleet[1].escalations.Load() + fleet[2].escalations.Load(); got != 1 {
		t.Errorf("escalations = %d, want 1", got)
	}

	o.handle(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "welcome back") })
	if err := fleet[2].chain.Resume(ctx, o.host()); err != nil {
		t.Fatal(err)
	}
	for i, w := range fleet {
		if status, err := w.get(ctx, o.URL+"/"); status != 200 {
			t.Errorf("worker %d after Resume by worker 2: %d, %v; want 200", i, status, err)
		}
	}
	if got := o.n.Load(); got != 4 {
		t.Errorf("origin saw %d requests, want 4", got)
	}
}
