package egresskit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// forbidding serves a plain 403 (nginx's default page, no marker) for the
// paths forbid accepts and 200 for the others, and counts requests.
func forbidding(forbid func(path string) bool) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		w.Header().Set("Content-Type", "text/html")
		if forbid(r.URL.Path) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
			return
		}
		io.WriteString(w, "<html><body>ok</body></html>")
	}))
	return srv, &n
}

func watchConfig(esc func(egresskit.Escalation)) egresskit.Config {
	return egresskit.Config{
		UserAgent:  "TestBot/1.0",
		Retry:      retry.Policy{BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond},
		Store:      mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 600000, Burst: 1000}}),
		OnEscalate: esc,
	}
}

// TestBlockWatchHaltsRunOfRefusals: a host that answers a plain 403 to ten
// distinct URLs in a row is halted as a suspected block, escalated with the
// evidence, and receives no further request.
func TestBlockWatchHaltsRunOfRefusals(t *testing.T) {
	srv, served := forbidding(func(string) bool { return true })
	defer srv.Close()
	var (
		mu   sync.Mutex
		escs []egresskit.Escalation
	)
	tr := mustChain(watchConfig(func(e egresskit.Escalation) {
		mu.Lock()
		defer mu.Unlock()
		escs = append(escs, e)
	}))
	c := &http.Client{Transport: tr}
	for i := range 10 {
		resp, err := c.Get(fmt.Sprintf("%s/item/%d?token=secret", srv.URL, i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if got, want := egresskit.Halted(resp), i == 9; got != want {
			t.Errorf("request %d: Halted = %v, want %v", i, got, want)
		}
	}
	_, err := c.Get(srv.URL + "/item/10")
	if !errors.Is(err, egresskit.ErrHalted) {
		t.Errorf("request after the run: err = %v, want ErrHalted", err)
	}
	if n := served.Load(); n != 10 {
		t.Errorf("server received %d requests, want 10", n)
	}
	key, _ := tr.HostKey(srv.URL)
	st, err := tr.Status(context.Background(), key)
	if err != nil || !st.Halted {
		t.Errorf("State = %+v, %v; want halted", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(escs) != 1 {
		t.Fatalf("%d escalations, want 1", len(escs))
	}
	e := escs[0]
	if e.Reason != "suspected block" || e.Status != 403 || e.Host != key || e.Suspected == nil {
		t.Fatalf("Escalation = %+v", e)
	}
	ev := e.Suspected
	if ev.Rule != "run" || ev.URLs != 10 || ev.Refusals != 10 || ev.Statuses[403] != 10 {
		t.Errorf("Evidence = %+v", ev)
	}
	if want := "10 refusal-like answers (403×10) to 10 distinct URLs with no success in between"; ev.Reason != want {
		t.Errorf("Evidence.Reason = %q, want %q", ev.Reason, want)
	}
	if strings.Contains(e.URL, "secret") {
		t.Errorf("escalation URL %q carries a secret", e.URL)
	}
	if !strings.Contains(string(e.BodyHead), "403 Forbidden") {
		t.Errorf("BodyHead = %q", e.BodyHead)
	}

	// Resuming the host starts its record afresh.
	if err := tr.Resume(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		resp, err := c.Get(fmt.Sprintf("%s/other/%d", srv.URL, i))
		if err != nil {
			t.Fatalf("after resume, request %d: %v", i, err)
		}
		resp.Body.Close()
		if egresskit.Halted(resp) {
			t.Fatalf("after resume, request %d halted", i)
		}
	}
}

// TestBlockWatchSparesPrivatePages: three private URLs answering 403 among
// fifty successes do not halt the host.
func TestBlockWatchSparesPrivatePages(t *testing.T) {
	srv, served := forbidding(func(p string) bool { return strings.HasPrefix(p, "/private/") })
	defer srv.Close()
	var escalated atomic.Int64
	tr := mustChain(watchConfig(func(egresskit.Escalation) { escalated.Add(1) }))
	c := &http.Client{Transport: tr}
	for i := range 53 {
		path := fmt.Sprintf("/page/%d", i)
		if i == 7 || i == 23 || i == 40 {
			path = fmt.Sprintf("/private/%d", i)
		}
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if egresskit.Halted(resp) {
			t.Fatalf("request %d (%s) halted the host", i, path)
		}
	}
	if n := served.Load(); n != 53 {
		t.Errorf("server received %d requests, want 53", n)
	}
	if n := escalated.Load(); n != 0 {
		t.Errorf("%d escalations, want none", n)
	}
}

// TestBlockWatchDisabled: with the detector off, a run of plain 403s stays
// a run of permanent failures.
func TestBlockWatchDisabled(t *testing.T) {
	srv, served := forbidding(func(string) bool { return true })
	defer srv.Close()
	cfg := watchConfig(nil)
	cfg.BlockWatch = blockwatch.Config{Disabled: true}
	c := &http.Client{Transport: mustChain(cfg)}
	for i := range 15 {
		resp, err := c.Get(fmt.Sprintf("%s/item/%d", srv.URL, i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if egresskit.Halted(resp) {
			t.Fatalf("request %d halted with the detector off", i)
		}
	}
	if n := served.Load(); n != 15 {
		t.Errorf("server received %d requests, want 15", n)
	}
}
