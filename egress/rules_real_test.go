package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/testprog"
)

// TestRealProxiesHonourRules runs a pool of four real proxies — tinyproxy
// and microsocks (socks5h) in region eu, the same pair in region us — with
// a rule that sends 127.0.0.1 through eu only; [::1] has no rule. Counts
// are taken at the proxies. Requests to the ruled host leave only through
// eu proxies; with both eu proxies killed they fail, first with the dial
// errors that quarantine them, then with the *RuleError, and none leaves
// through us. The unruled host uses every endpoint.
func TestRealProxiesHonourRules(t *testing.T) {
	var hits4, hits6 atomic.Int64
	origin := func(n *atomic.Int64) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			io.WriteString(w, "origin")
		})
	}
	v4 := httptest.NewServer(origin(&hits4))
	t.Cleanup(v4.Close)
	ln6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	v6 := httptest.NewUnstartedServer(origin(&hits6))
	v6.Listener.Close()
	v6.Listener = ln6
	v6.Start()
	t.Cleanup(v6.Close)

	type proxy struct {
		id, region string
		p          *testprog.Proxy
		url        string
	}
	var proxies []*proxy
	for _, region := range []string{"eu", "us"} {
		tp := testprog.Tinyproxy(t, testprog.ProxyOptions{})
		ms := testprog.Microsocks(t, testprog.ProxyOptions{})
		proxies = append(proxies,
			&proxy{region + "-tinyproxy", region, tp, tp.URL()},
			&proxy{region + "-microsocks", region, ms, ms.URLWith("socks5h", "", "")})
	}
	t.Logf("%s %s, %s %s", proxies[0].p.Program, proxies[0].p.Version, proxies[1].p.Program, proxies[1].p.Version)
	var eps []egress.Endpoint
	for _, p := range proxies {
		eps = append(eps, egress.Endpoint{ID: p.id, Proxy: p.url, Capacity: 1, Labels: map[string]string{"region": p.region}})
	}
	pool := newPool(t, egress.Config{
		Endpoints:  eps,
		Rules:      []egress.Rule{{Name: "eu-only", Hosts: []string{"127.0.0.1"}, Labels: map[string]string{"region": "eu"}}},
		SubsetSize: len(eps), // every endpoint in every subset: load decides among them
		Health:     egress.HealthConfig{QuarantineAfter: 1, QuarantineBaseDelay: 10 * time.Minute},
	})
	forwarded := func() map[string]int {
		m := map[string]int{}
		for _, p := range proxies {
			m[p.id] = p.p.Forwarded()
		}
		return m
	}
	// waitForwarded waits until the proxies' logs account for n more
	// requests than in before (logs are written after the request), and
	// returns the counts.
	waitForwarded := func(before map[string]int, n int) map[string]int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			now, total := forwarded(), 0
			for id, c := range now {
				total += c - before[id]
			}
			if total >= n || time.Now().After(deadline) {
				return now
			}
			time.Sleep(10 * time.Millisecond) // polling the proxies' logs
		}
	}
	send := func(url string) (*http.Response, egress.Choice, error) {
		var c egress.Choice
		req, _ := http.NewRequestWithContext(egress.WithRecorder(context.Background(), &c), http.MethodGet, url, nil)
		req.Close = true // one connection per request: the proxies count each
		resp, err := pool.RoundTrip(req)
		return resp, c, err
	}

	// Two requests at a time to the ruled host: both eu proxies carry
	// them, no us proxy does.
	before := forwarded()
	const ruled = 10
	for range ruled / 2 {
		var open []*http.Response
		for range 2 {
			resp, c, err := send(v4.URL)
			if err != nil {
				t.Fatalf("ruled request: %v", err)
			}
			if c.Rule != "eu-only" || !strings.HasPrefix(c.EndpointID, "eu-") {
				t.Fatalf("ruled request chose %v, want an eu endpoint under eu-only", c)
			}
			open = append(open, resp)
		}
		for _, resp := range open {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	after := waitForwarded(before, ruled)
	for _, p := range proxies {
		got := after[p.id] - before[p.id]
		switch {
		case p.region == "us" && got != 0:
			t.Errorf("%s carried %d requests to the eu-only host, want 0", p.id, got)
		case p.region == "eu" && got == 0:
			t.Errorf("%s carried no request to the eu-only host, want some", p.id)
		}
		t.Logf("%s carried %d of %d eu-only requests", p.id, got, ruled)
	}
	if hits4.Load() != ruled {
		t.Errorf("the origin saw %d ruled requests, want %d", hits4.Load(), ruled)
	}

	// Four requests held open at once to the unruled host: each endpoint
	// (capacity 1) carries one.
	before = forwarded()
	var open []*http.Response
	used := map[string]bool{}
	for range len(eps) {
		resp, c, err := send(v6.URL)
		if err != nil {
			t.Fatalf("unruled request: %v", err)
		}
		if c.Rule != "" {
			t.Errorf("unruled request chose %v under a rule", c)
		}
		used[c.EndpointID] = true
		open = append(open, resp)
	}
	for _, resp := range open {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	after = waitForwarded(before, len(eps))
	for _, p := range proxies {
		if got := after[p.id] - before[p.id]; got != 1 || !used[p.id] {
			t.Errorf("%s carried %d unruled requests, want 1", p.id, got)
		}
	}

	// Every eu proxy down: the ruled host's requests fail, and none
	// leaves through us.
	for _, p := range proxies[:2] {
		p.p.Kill()
	}
	before = forwarded()
	hitsBefore := hits4.Load()
	var ruleErrs int
	for i := range 6 {
		resp, c, err := send(v4.URL)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("request %d with eu down went through %v", i, c)
		}
		var re *egress.RuleError
		var pe *egress.ProxyError
		switch {
		case errors.As(err, &re):
			if re.Rule != "eu-only" || re.Host != "127.0.0.1" {
				t.Errorf("request %d: %v, want the rule eu-only and host 127.0.0.1 named", i, err)
			}
			ruleErrs++
		case errors.As(err, &pe) && strings.HasPrefix(pe.EndpointID, "eu-") && pe.Kind == egress.KindDial:
			if ruleErrs > 0 {
				t.Errorf("request %d: dial error %v after the rule error, want the rule error", i, err)
			}
		default:
			t.Errorf("request %d with eu down: %v, want an eu dial error or a *RuleError", i, err)
		}
	}
	if ruleErrs < 4 {
		t.Errorf("%d of 6 requests failed with the *RuleError, want at least 4 (2 dial failures quarantine the eu proxies)", ruleErrs)
	}
	// Give the us proxies' logs time to show a leak, if there were one.
	resp, _, err := send(v6.URL)
	if err != nil {
		t.Fatalf("unruled request with eu down: %v", err)
	}
	resp.Body.Close()
	after = waitForwarded(before, 1)
	for _, p := range proxies[2:] {
		if got := after[p.id] - before[p.id]; got > 1 {
			t.Errorf("%s carried %d requests after eu went down, want only the unruled one", p.id, got)
		}
	}
	if got := hits4.Load() - hitsBefore; got != 0 {
		t.Errorf("the origin saw %d ruled requests with eu down, want 0", got)
	}
}
