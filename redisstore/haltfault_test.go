package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/redis/go-redis/v9"
)

// redisFault is a way for Redis to fail while a refusal is judged, and
// to come back.
type redisFault struct {
	name string
	// args are the redis-server arguments the fault needs.
	args []string
	// stop makes srv fail; back makes it answer again.
	stop func(t *testing.T, srv *redistest.Server) (back func())
}

var redisFaults = []redisFault{
	{name: "kill9-empty-restart", stop: func(t *testing.T, srv *redistest.Server) func() {
		srv.Kill()
		return func() {
			if err := srv.Restart(); err != nil {
				t.Error(err)
			}
		}
	}},
	{name: "sigstop", stop: func(t *testing.T, srv *redistest.Server) func() {
		srv.Pause()
		return srv.Resume
	}},
	{name: "debug-sleep", args: []string{"--enable-debug-command", "local"}, stop: debugSleep},
}

// debugSleep makes srv sleep (DEBUG SLEEP 2) and returns once it no longer
// answers a PING within 20ms; back waits until the sleep is over.
func debugSleep(t *testing.T, srv *redistest.Server) func() {
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	done := make(chan error, 1)
	go func() { done <- admin.Do(context.Background(), "DEBUG", "SLEEP", "2").Err() }()
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer probe.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := probe.Ping(ctx).Err()
		cancel()
		if err != nil {
			break
		}
	}
	return func() {
		if err := <-done; err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
		}
		admin.Close()
	}
}

// challenge200 is a JS challenge served with 200: only its body, read by
// the caller after RoundTrip returned, says it is a refusal.
func challenge200(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "classify", "testdata", "corpus", "block", "sucuri", "cloudscraper-js_js_challenge_cookie.html"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// events collects the final events of a chain.
type events struct {
	mu sync.Mutex // guards e
	e  []telemetry.Event
}

func (ev *events) Observe(_ context.Context, e *telemetry.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.e = append(ev.e, *e)
}

func (ev *events) all() []telemetry.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]telemetry.Event(nil), ev.e...)
}

// TestRefusalWhileRedisFails: Redis fails (killed and restarted empty,
// paused with SIGSTOP, asleep in DEBUG SLEEP) while a refusal is judged —
// a 403 naming the bot, with Redis stopped by the origin mid-response, and
// a 200 challenge page whose body the caller reads after Redis stopped.
// Under FailClosed and under FailOpen alike: the host is halted, escalated
// once, reaches the origin no more, the attempt's event carries the
// store's error (FailClosed), and once Redis answers the halt is in it,
// where another worker sees it.
func TestRefusalWhileRedisFails(t *testing.T) {
	page := challenge200(t)
	for _, policy := range []redisstore.ErrorPolicy{redisstore.FailClosed, redisstore.FailOpen} {
		for _, f := range redisFaults {
			for _, lazy := range []bool{false, true} {
				name := policy.String() + "/" + f.name + "/403"
				if lazy {
					name = policy.String() + "/" + f.name + "/challenge200"
				}
				t.Run(name, func(t *testing.T) {
					refusalWhileRedisFails(t, policy, f, lazy, page)
				})
			}
		}
	}
}

func refusalWhileRedisFails(t *testing.T, policy redisstore.ErrorPolicy, f redisFault, lazy bool, page []byte) {
	ctx := context.Background()
	srv := redistest.StartWith(t, f.args...)
	var warn warnings
	cfg := fleetConfig(redistest.Prefix(t))
	cfg.OnRedisError = policy
	cfg.Timeout = 200 * time.Millisecond
	cfg.RetryInterval = 100 * time.Millisecond
	cfg.OnWarning = warn.add
	st := mustState(t, srv.Addr, cfg)
	var ev events
	var escalations int
	var mu sync.Mutex // guards escalations
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	chain := mustChain(egresskit.Config{
		Base: base, Store: st, IgnoreRobots: true, UserAgent: "TestBot/1.0",
		Retry:     retry.Policy{MaxRetries: -1},
		Observers: []telemetry.Observer{&ev},
		OnEscalate: func(egresskit.Escalation) {
			mu.Lock()
			escalations++
			mu.Unlock()
		},
	})
	client := &http.Client{Transport: chain}

	var back func()
	o := newOrigin(t, nil)
	o.handle(func(w http.ResponseWriter, r *http.Request) {
		if lazy {
			w.WriteHeader(http.StatusOK)
			w.Write(page)
			return
		}
		back = f.stop(t, srv) // the attempt was admitted; Redis fails before its record
		refuse(w, r)
	})

	resp, err := client.Get(o.URL + "/")
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	if lazy {
		back = f.stop(t, srv) // the page is judged as it is read, after this
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !egresskit.Halted(resp) {
		t.Errorf("Halted(first response) = false, want true (status %d)", resp.StatusCode)
	}
	for i := range 2 {
		if _, err := client.Get(o.URL + "/again"); !errors.Is(err, egresskit.ErrHalted) {
			t.Errorf("request %d with Redis failing: err = %v, want ErrHalted", i+2, err)
		}
	}
	if policy == redisstore.FailClosed {
		var last telemetry.Event
		for _, e := range ev.all() {
			if e.Attempt == 1 && e.Status != 0 {
				last = e
			}
		}
		if !strings.Contains(last.Err, "redis") {
			t.Errorf("event of the refused attempt: Err = %q, want the store's error", last.Err)
		}
	}

	back()
	obs := mustState(t, srv.Addr, redisstore.Config{Prefix: cfg.Prefix, OnRedisError: redisstore.FailClosed, Timeout: testTimeout})
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Requests from this worker are refused without reaching the
		// origin, and one of them writes the halt back.
		if _, err := client.Get(o.URL + "/after"); !errors.Is(err, egresskit.ErrHalted) {
			t.Fatalf("request after Redis returned: err = %v, want ErrHalted", err)
		}
		s, err := obs.Status(ctx, o.host())
		if err == nil && s.Halted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the halt is not in Redis 10s after it returned: %+v, %v", s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another worker is refused by Redis.
	other := workerFor(t, obs)
	if _, err := other.get(ctx, o.URL+"/other"); !errors.Is(err, egresskit.ErrHalted) {
		t.Errorf("another worker after Redis returned: err = %v, want ErrHalted", err)
	}
	mu.Lock()
	if escalations != 1 {
		t.Errorf("escalations = %d, want 1", escalations)
	}
	mu.Unlock()
	if n := o.n.Load(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
	var degraded bool
	for _, k := range warn.kinds() {
		degraded = degraded || k == redisstore.Outage
	}
	if !degraded {
		t.Errorf("warnings = %v, want a Outage one", warn.kinds())
	}
}
