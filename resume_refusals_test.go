package egresskit_test

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
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
)

// refusingSite answers /named with a 403 naming TestBot once inflight
// requests are waiting for it (or 2s passed), so that they are refused
// together, and /ok with 200.
func refusingSite(t *testing.T, inflight int, h2 bool) (*httptest.Server, *atomic.Int32) {
	var arrived atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/ok":
			io.WriteString(w, "<html><body>fine</body></html>")
		default:
			if arrived.Add(1) >= int32(inflight) {
				once.Do(func() { close(all) })
			}
			select {
			case <-all:
			case <-time.After(2 * time.Second):
			}
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html><body>TestBot is not welcome here.</body></html>")
		}
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &arrived
}

// TestResumeAfterConcurrentRefusals: 8 challenge pages in flight at once
// halt the host once and do not open its breaker; Resume with the URL a
// person would paste lifts the halt, and the next request is sent at
// once. Resuming a host that is not halted returns ErrNotHalted. Against
// the memory store and a real Redis, over HTTP/1.1 and HTTP/2.
func TestResumeAfterConcurrentRefusals(t *testing.T) {
	limit := hoststate.Config{Limit: ratelimit.Config{PerMinute: 600000, Burst: 1000}}
	stores := map[string]func(t *testing.T) hoststate.Store{
		"memory": func(*testing.T) hoststate.Store { return mustMemory(limit) },
		"redis": func(t *testing.T) hoststate.Store {
			st, err := redisstore.New(redistest.Client(t), redisstore.Config{Prefix: redistest.Prefix(t),
				HostState: limit, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		for name, mk := range stores {
			t.Run(proto+"/"+name, func(t *testing.T) { resumeAfterRefusals(t, mk(t), proto == "HTTP/2") })
		}
	}
}

func resumeAfterRefusals(t *testing.T, store hoststate.Store, h2 bool) {
	const n = 8
	srv, arrived := refusingSite(t, n, h2)
	var escalations atomic.Int32
	cfg := watchConfig(func(egresskit.Escalation) { escalations.Add(1) })
	cfg.Store = store
	if h2 {
		cfg.Base = srv.Client().Transport
	}
	tr := mustChain(cfg)
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := c.Get(srv.URL + "/named?token=s3cr3t-value")
			if err != nil {
				return // halted before it was sent
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	if got := arrived.Load(); got != n {
		t.Fatalf("%d refusals reached the host, want %d in flight together", got, n)
	}
	if got := escalations.Load(); got != 1 {
		t.Errorf("%d escalations, want 1", got)
	}
	ctx := context.Background()
	st, err := tr.Status(ctx, srv.URL+"/named?x=1")
	if err != nil || !st.Halted || st.Breaker != breaker.Closed || st.ConsecutiveFailures != 0 {
		t.Fatalf("after %d refusals: Status = %+v, %v; want halted, breaker closed with no failure", n, st, err)
	}
	// The halt's record: once, with its evidence, and no secret.
	q, err := cfg.Store.Halts(ctx, 0)
	if err != nil || len(q) != 1 {
		t.Fatalf("Halts = %+v, %v; want one record", q, err)
	}
	if h := q[0]; h.Host != st.Host || h.Status != 403 || h.Worker == "" || h.Reason == "" ||
		!strings.Contains(h.BodyHead, "not welcome") || !strings.Contains(h.URL, "/named?token=") ||
		strings.Contains(h.URL+h.BodyHead, "s3cr3t") {
		t.Errorf("halt record = %+v; want status 403, a reason, the page's head and a redacted URL", h)
	}
	if err := tr.Resume(ctx, srv.URL); err != nil {
		t.Fatalf("Resume(%q) = %v", srv.URL, err)
	}
	resp, err := c.Get(srv.URL + "/ok")
	if err != nil {
		t.Fatalf("the first request after Resume: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || (h2 && resp.ProtoMajor != 2) {
		t.Errorf("the first request after Resume: %s %s", resp.Proto, resp.Status)
	}
	if q, err := cfg.Store.Halts(ctx, 0); err != nil || len(q) != 0 {
		t.Errorf("Halts after Resume = %+v, %v; want none", q, err)
	}
	if _, notes, err := cfg.Store.History(ctx, srv.URL); err != nil || len(notes) != 1 || !notes[0].Resumed {
		t.Errorf("History after Resume: notes %+v, %v; want the resume", notes, err)
	}
	for _, h := range []string{srv.URL, "nonexistent.example"} {
		if err := tr.Resume(ctx, h); !errors.Is(err, hoststate.ErrNotHalted) {
			t.Errorf("Resume(%q) of a host not halted = %v, want ErrNotHalted", h, err)
		}
	}
	if err := tr.Resume(ctx, "exa mple/x"); !errors.Is(err, hostkey.ErrInvalidHost) {
		t.Errorf("Resume of no host = %v, want hostkey.ErrInvalidHost", err)
	}
}
