package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	egressprom "github.com/egresskit/egresskit/telemetry/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// site is a target host for the crawl: it counts the requests it answered
// other than for robots.txt, which are the attempts the chain sent.
type site struct {
	*httptest.Server
	pages atomic.Int64
}

func newSite(t *testing.T, robotsTxt string, page http.HandlerFunc) *site {
	t.Helper()
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			io.WriteString(w, robotsTxt)
			return
		}
		s.pages.Add(1)
		page(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRealPrometheusSentAndUnsent crawls five hosts through the chain
// while a real Prometheus scrapes the Collector: one that answers, one
// whose robots.txt disallows part of it, one that refuses the crawler
// (halted), one that fails until its breaker opens, one paced so slowly
// that a short deadline cannot wait for it, and one out of scope. What
// Prometheus stored shows the attempts sent, equal to what the hosts
// answered, apart from the requests the chain refused before sending, by
// reason; promtool finds no problem in the exposition.
func TestRealPrometheusSentAndUnsent(t *testing.T) {
	ok := newSite(t, "User-agent: *\nDisallow: /private\n", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>a page</html>")
	})
	refusing := newSite(t, "", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html>PromBot is not welcome here.</html>")
	})
	failing := newSite(t, "", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	slow := newSite(t, "", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>a slow page</html>")
	})

	col := egressprom.New(egressprom.Config{})
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(col)
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer metrics.Close()
	server := testprog.StartPrometheus(t, strings.TrimPrefix(metrics.URL, "http://"), 500*time.Millisecond)

	chain := mustChain(egresskit.Config{
		UserAgent: "PromBot/1.0",
		Store: mustMemory(hoststate.Config{
			Breaker: breaker.Config{FailureThreshold: 3},
			Limit: ratelimit.Config{PerMinute: 60000,
				Overrides: map[string]float64{hostOf(t, slow.URL): 1}}, // one a minute
		}),
		Retry:     retry.Policy{MaxRetries: -1},
		Scope:     egresskit.Scope{Deny: []string{"denied.test"}},
		Observers: []telemetry.Observer{col},
	})
	get := func(ctx context.Context, u string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := chain.RoundTrip(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	bg := context.Background()
	for i := range 20 {
		if err := get(bg, fmt.Sprintf("%s/page/%d", ok.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if err := get(bg, fmt.Sprintf("%s/private/%d", ok.URL, i)); !errors.Is(err, egresskit.ErrDisallowed) {
			t.Fatalf("disallowed page: %v, want ErrDisallowed", err)
		}
	}
	for i := range 6 { // the first is refused by the host and halts it
		err := get(bg, fmt.Sprintf("%s/%d", refusing.URL, i))
		if i > 0 && !errors.Is(err, egresskit.ErrHalted) {
			t.Fatalf("request %d to the halted host: %v, want ErrHalted", i, err)
		}
	}
	for i := range 8 { // three failures open the breaker
		err := get(bg, fmt.Sprintf("%s/%d", failing.URL, i))
		if i >= 3 && !errors.Is(err, egresskit.ErrOpen) {
			t.Fatalf("request %d to the failing host: %v, want ErrOpen", i, err)
		}
	}
	if err := get(bg, slow.URL+"/first"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the next token is a minute away
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		err := get(ctx, fmt.Sprintf("%s/%d", slow.URL, i))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("request %d to the slow host: %v, want context.DeadlineExceeded", i, err)
		}
	}
	for range 2 {
		if err := get(bg, "http://denied.test/"); !errors.Is(err, egresskit.ErrOutOfScope) {
			t.Fatalf("out of scope: %v, want ErrOutOfScope", err)
		}
	}

	sent := ok.pages.Load() + refusing.pages.Load() + failing.pages.Load() + slow.pages.Load()
	wantUnsent := map[string]float64{
		"reason=disallowed": 4, "reason=halted": 5, "reason=open": 5, "reason=deadline": 3, "reason=out_of_scope": 2,
	}
	wantAttempts := map[string]float64{
		"egress_reason=none,outcome=ok":        21,
		"egress_reason=none,outcome=refused":   1,
		"egress_reason=none,outcome=transient": 3,
	}
	if sent != 25 {
		t.Fatalf("the hosts answered %d requests, want 25", sent)
	}
	// Wait for a scrape after the crawl: Prometheus holds what the
	// Collector counted.
	var attempts, unsent map[string]float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		attempts, err = server.Query("sum by (outcome, egress_reason) (egresskit_attempts_total)")
		if err == nil {
			unsent, err = server.Query("sum by (reason) (egresskit_unsent_total)")
		}
		if err == nil && equal(attempts, wantAttempts) && equal(unsent, wantUnsent) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus %s after 30s: attempts %v (err %v), unsent %v;\nwant attempts %v (the hosts answered %d), unsent %v",
				server.Version, attempts, err, unsent, wantAttempts, sent, wantUnsent)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sum := 0.0
	for _, v := range attempts {
		sum += v
	}
	t.Logf("Prometheus %s: attempts %v (sum %v, the hosts answered %d), unsent %v", server.Version, attempts, sum, sent, unsent)
	if sum != float64(sent) {
		t.Errorf("sum of egresskit_attempts_total = %v, want %d: the requests the hosts answered", sum, sent)
	}

	resp, err := http.Get(metrics.URL)
	if err != nil {
		t.Fatal(err)
	}
	exposition, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out := testprog.CheckMetrics(t, exposition); out != "" {
		t.Errorf("promtool check metrics:\n%s", out)
	}
}

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	return strings.TrimPrefix(rawURL, "http://")
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
