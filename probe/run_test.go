package probe_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/probe"
)

func TestRunBadInput(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	good := probe.Target{URL: srv.URL + "/"}
	long := "http://example.com/" + strings.Repeat("a", 100<<10)
	tests := []struct {
		name    string
		targets []probe.Target
		opts    probe.Options
		want    error
	}{
		{"no targets", nil, probe.Options{}, probe.ErrNoTargets},
		{"no scheme", []probe.Target{good, {URL: "example.com/x"}}, probe.Options{}, probe.ErrUnsupportedScheme},
		{"no host", []probe.Target{good, {URL: "http:///x"}}, probe.Options{}, probe.ErrMissingHost},
		{"ftp", []probe.Target{good, {URL: "ftp://user:hunter22@example.com/x"}}, probe.Options{}, probe.ErrUnsupportedScheme},
		{"100 KB url", []probe.Target{good, {URL: long}}, probe.Options{}, probe.ErrTooLong},
		{"bad port", []probe.Target{{URL: "http://example.com:0/"}}, probe.Options{}, probe.ErrBadPort},
		{"proxy bad port", []probe.Target{good, {URL: srv.URL, Egress: "http://user:hunter22@127.0.0.1:99999"}}, probe.Options{}, probe.ErrBadPort},
		{"endpoint bad port", []probe.Target{good}, probe.Options{Proxies: []egress.Endpoint{{ID: "p", Proxy: "http://user:hunter22@127.0.0.1:70000"}}}, probe.ErrBadPort},
		{"endpoint bad scheme", []probe.Target{good}, probe.Options{Proxies: []egress.Endpoint{{ID: "p", Proxy: "ftp://127.0.0.1:21"}}}, probe.ErrUnsupportedScheme},
		{"duplicate endpoint", []probe.Target{good}, probe.Options{Proxies: []egress.Endpoint{{ID: "p", Proxy: "direct"}, {ID: "p", Proxy: "direct"}}}, probe.ErrSyntax},
		{"unknown egress", []probe.Target{{URL: srv.URL, Egress: "nope"}}, probe.Options{}, probe.ErrUnknownEgress},
		{"negative deadline", []probe.Target{good}, probe.Options{Deadline: -time.Second}, egresskit.ErrInvalidConfig},
		{"negative per-request timeout", []probe.Target{good}, probe.Options{PerRequestTimeout: -1}, egresskit.ErrInvalidConfig},
		{"negative concurrency", []probe.Target{good}, probe.Options{Concurrency: -1}, egresskit.ErrInvalidConfig},
		{"POST", []probe.Target{good}, probe.Options{Method: http.MethodPost}, egresskit.ErrInvalidConfig},
		{"success threshold above 1", []probe.Target{good}, probe.Options{Thresholds: probe.Thresholds{DegradedSuccessRate: 1.5}}, egresskit.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := probe.Run(context.Background(), tt.targets, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run(%s) error = %v, want %v", tt.name, err, tt.want)
			}
			if rep != nil {
				t.Errorf("Run(%s) returned a report with its error", tt.name)
			}
			if msg := err.Error(); strings.Contains(msg, "hunter22") || len(msg) > 300 {
				t.Errorf("Run(%s) error %q leaks a credential or the whole input", tt.name, msg)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests; bad input must fail before any request", n)
	}
	var te *probe.TargetError
	_, err := probe.Run(context.Background(), []probe.Target{good, good, {URL: "ftp://x"}}, probe.Options{})
	if !errors.As(err, &te) || te.Index != 2 {
		t.Errorf("Run error = %v, want a *TargetError for target 2", err)
	}
}

func TestRunTimeoutsAndRedirects(t *testing.T) {
	site := siteServer(t).URL
	hold := newHoldListener(t)
	targets := []probe.Target{
		{URL: site + "/ok/"},
		{URL: "http://" + hold.addr() + "/hangs"},
		{URL: site + "/redirect/"},
		{URL: site + "/loop/"},
		{URL: site + "/status/404/"},
		{URL: site + "/status/503/"},
	}
	// The hanging target's result below says the per-request timeout
	// ended it (no wall-clock bound is asserted: a hang would fail the
	// test by its timeout).
	rep, err := probe.Run(context.Background(), targets, probe.Options{
		PerRequestTimeout: 200 * time.Millisecond,
		Deadline:          time.Minute,
		MaxRedirects:      3,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		outcome classify.Outcome
		status  int
		errText string
	}{
		{classify.OK, 200, ""},
		{classify.Transient, 0, "timeout"},
		{classify.OK, 200, ""},
		{classify.Permanent, 0, "redirects"},
		{classify.Permanent, 404, "HTTP status 404"},
		{classify.Transient, 503, "HTTP status 503"},
	}
	for i, w := range want {
		r := rep.Results[i]
		if r.Outcome != w.outcome || r.Status != w.status || !strings.Contains(r.Err, w.errText) || (w.errText == "") != (r.Err == "") {
			t.Errorf("Results[%d] (%s) = outcome %v status %d err %q, want %v %d %q", i, r.URL, r.Outcome, r.Status, r.Err, w.outcome, w.status, w.errText)
		}
	}
	if r := rep.Results[1]; !r.TimedOut || r.Deadline || r.Stage != probe.StageRequest {
		t.Errorf("hung result = %+v, want TimedOut in stage request", r)
	}
	if rep.Timeouts != 1 || rep.Blocked != 1 {
		t.Errorf("Timeouts, Blocked = %d, %d, want 1, 1 (a hang is no block: the 503 is)", rep.Timeouts, rep.Blocked)
	}
}

func TestRunCanceled(t *testing.T) {
	site := siteServer(t).URL
	hold := newHoldListener(t)
	targets := []probe.Target{{URL: site + "/ok/"}}
	for range 5 {
		targets = append(targets, probe.Target{URL: "http://" + hold.addr() + "/hangs"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int64
	rep, err := probe.Run(ctx, targets, probe.Options{
		Concurrency: 2,
		Progress: func(p probe.Progress) {
			if calls.Add(1) == 1 {
				cancel()
			}
			if p.Total != len(targets) {
				t.Errorf("Progress.Total = %d, want %d", p.Total, len(targets))
			}
		},
	})
	if !errors.Is(err, probe.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want ErrCanceled wrapping context.Canceled", err)
	}
	if rep == nil || len(rep.Results) != len(targets) {
		t.Fatalf("Run returned %v, want a partial report of %d results", rep, len(targets))
	}
	if got := calls.Load(); got != int64(len(targets)) {
		t.Errorf("Progress called %d times, want %d", got, len(targets))
	}
	if r := rep.Results[0]; !r.Success() {
		t.Errorf("Results[0] = %+v, want success", r)
	}
	for _, r := range rep.Results[1:] {
		if r.Outcome != classify.Canceled || r.Deadline || r.Err != "canceled" {
			t.Errorf("result after cancel = %+v, want canceled, not deadline", r)
		}
	}
	if rep.Measured != 1 || rep.Outcomes.Canceled != 5 {
		t.Errorf("Measured %d, Canceled %d, want 1, 5", rep.Measured, rep.Outcomes.Canceled)
	}
}

func TestRunPhasesAndHead(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(site))
	defer srv.Close()
	tlsConf := srv.Client().Transport.(*http.Transport).TLSClientConfig
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		rep, err := probe.Run(context.Background(), []probe.Target{{URL: srv.URL + "/ok/"}}, probe.Options{
			Method:          method,
			TLSClientConfig: tlsConf,
			// With robots.txt checked, its fetch opens the connection
			// the probe then reuses; this test measures a fresh one.
			IgnoreRobots: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Results[0]
		if !r.Success() || r.Stage != probe.StageResponse || r.Reused {
			t.Fatalf("%s: result = %+v, want a success on a fresh connection", method, r)
		}
		p := r.Phases
		if p.Connect <= 0 || p.TLS <= 0 || p.TTFB <= 0 || p.TTFB > r.Latency || p.Connect+p.TLS > p.TTFB {
			t.Errorf("%s: phases %+v, latency %v: want connect, TLS > 0 and connect+TLS <= TTFB <= latency", method, p, r.Latency)
		}
		if p.DNS != 0 {
			t.Errorf("%s: DNS phase %v for an IP literal, want 0", method, p.DNS)
		}
	}
}

func TestRunRedactsAndRoutes(t *testing.T) {
	site := siteServer(t).URL
	authProxy := newForwardProxy(t, true)
	plain := newForwardProxy(t, false)
	dead := "http://" + proxyUser + ":" + proxyPass + "@" + deadAddr(t)
	withCreds := strings.Replace(site, "http://", "http://alice:hunter22@", 1)
	targets := []probe.Target{
		{URL: withCreds + "/ok/?token=tok-123456&page=2"}, // round-robin: p1
		{URL: site + "/ok/2"},                             // round-robin: p2
		{URL: site + "/ok/3"},                             // round-robin: p1
		{URL: site + "/ok/4", Egress: "direct"},
		{URL: site + "/ok/5", Egress: dead},
		{URL: site + "/ok/6", Egress: "p2"},
	}
	rep, err := probe.Run(context.Background(), targets, probe.Options{
		Proxies: []egress.Endpoint{{ID: "p1", Proxy: authProxy}, {ID: "p2", Proxy: plain}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEgress := []string{"p1", "p2", "p1", "direct", "http://" + deadAddr2(dead), "p2"}
	for i, r := range rep.Results {
		if r.Egress != wantEgress[i] {
			t.Errorf("Results[%d].Egress = %q, want %q", i, r.Egress, wantEgress[i])
		}
	}
	if got := rep.Results[0].URL; strings.Contains(got, "hunter22") || strings.Contains(got, "tok-123456") || !strings.Contains(got, "page=2") {
		t.Errorf("Results[0].URL = %q, want userinfo and token removed, page kept", got)
	}
	if r := rep.Results[4]; r.Success() || r.Err == "" || strings.Contains(r.Err, proxyPass) || r.Proxy != "http://"+deadAddr2(dead) {
		t.Errorf("dead proxy result = %+v, want a redacted failure", r)
	}
	b, _ := rep.MarshalJSON()
	for _, secret := range []string{proxyPass, "hunter22", "tok-123456"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the JSON report contains %q", secret)
		}
	}
}

// deadAddr2 returns the host:port of a proxy URL.
func deadAddr2(proxyURL string) string {
	return proxyURL[strings.LastIndex(proxyURL, "@")+1:]
}

func TestRunContextDeadline(t *testing.T) {
	hold := newHoldListener(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rep, err := probe.Run(ctx, []probe.Target{{URL: "http://" + hold.addr() + "/"}, {URL: "http://" + hold.addr() + "/2"}},
		probe.Options{Deadline: time.Minute, Concurrency: 1})
	if err != nil {
		t.Fatalf("Run: %v; a context deadline is the run's deadline, not a cancellation", err)
	}
	for i, r := range rep.Results {
		wantStage := probe.StageRequest
		if i == 1 {
			wantStage = probe.StageQueued // concurrency 1: the deadline came first
		}
		if !r.Deadline || r.Err != "deadline" || r.Stage != wantStage {
			t.Errorf("Results[%d] = %+v, want cut by the deadline in stage %v", i, r, wantStage)
		}
	}
	if rep.NotStarted != 1 || rep.Outcomes.Deadline != 2 {
		t.Errorf("NotStarted %d, Deadline %d, want 1, 2", rep.NotStarted, rep.Outcomes.Deadline)
	}
}

func TestRunAgentNamed(t *testing.T) {
	site := siteServer(t).URL
	rep, err := probe.Run(context.Background(), []probe.Target{{URL: site + "/named/"}, {URL: site + "/status/403/"}}, probe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Outcome != classify.Refused || r.Reason != "agent named" {
		t.Errorf("403 naming the user agent's token = %v %q, want refused, \"agent named\"", r.Outcome, r.Reason)
	}
	if r := rep.Results[1]; r.Outcome != classify.Permanent {
		t.Errorf("plain 403 = %v, want permanent", r.Outcome)
	}
	if rep.Blocked != 2 || len(rep.Recommendation.HaltHosts) != 1 {
		t.Errorf("Blocked %d, HaltHosts %v, want 2 and the host", rep.Blocked, rep.Recommendation.HaltHosts)
	}
}
