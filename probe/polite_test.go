package probe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/probe"
)

// gauge counts requests in flight to one server and keeps the peak.
type gauge struct {
	now, peak atomic.Int32
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// slowHost answers every page after a short hold, so that probes overlap,
// and counts how many are in flight at once. robots.txt is a 404.
func slowHost(t *testing.T, g *gauge) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		g.enter()
		defer g.leave()
		time.Sleep(20 * time.Millisecond) // the server holding the request, not a test wait
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRunPerHostCap(t *testing.T) {
	tests := []struct {
		name    string
		perHost int
		want    int32 // peak in flight per host; 0: above the default cap
	}{
		{"default cap", 0, probe.DefaultPerHost},
		{"cap of one", 1, 1},
		{"no cap", -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ga, gb gauge
			a, b := slowHost(t, &ga), slowHost(t, &gb)
			var targets []probe.Target
			for i := range 12 {
				targets = append(targets, probe.Target{URL: fmt.Sprintf("%s/a/%d", a.URL, i)},
					probe.Target{URL: fmt.Sprintf("%s/b/%d", b.URL, i)})
			}
			rep, err := probe.Run(context.Background(), targets, probe.Options{PerHost: tt.perHost, Deadline: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Succeeded != len(targets) {
				t.Fatalf("Succeeded = %d, want %d (reasons %q)", rep.Succeeded, len(targets), rep.Reasons)
			}
			for name, g := range map[string]*gauge{"a": &ga, "b": &gb} {
				peak := g.peak.Load()
				switch {
				case tt.want > 0 && peak > tt.want:
					t.Errorf("host %s: peak in flight %d, want at most %d", name, peak, tt.want)
				case tt.want == 0 && peak <= probe.DefaultPerHost:
					t.Errorf("host %s without a cap: peak in flight %d, want above %d", name, peak, probe.DefaultPerHost)
				}
			}
		})
	}
}

// robotsSite serves robots.txt (body, or status when not 200) and records
// every request's path and User-Agent.
type robotsSite struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "path UA"
}

func newRobotsSite(t *testing.T, status int, body string) *robotsSite {
	t.Helper()
	s := &robotsSite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.URL.Path+" "+r.Header.Get("User-Agent"))
		s.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			w.WriteHeader(status)
			fmt.Fprint(w, body)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *robotsSite) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func TestRunRobots(t *testing.T) {
	const rules = "User-agent: *\nDisallow: /private/\n\nUser-agent: egresskit\nDisallow: /private/\nDisallow: /no-egresskit/\n"
	tests := []struct {
		name           string
		status         int
		opts           probe.Options
		path           string
		wantDisallowed bool
		wantSent       bool
		wantUA         string
	}{
		{"allowed path", 200, probe.Options{}, "/public/1", false, true, egresskit.DefaultUserAgent},
		{"disallowed by the group of the agent token", 200, probe.Options{}, "/private/1", true, false, egresskit.DefaultUserAgent},
		{"disallowed for the chain's agent token", 200, probe.Options{}, "/no-egresskit/1", true, false, egresskit.DefaultUserAgent},
		{"another agent token is not named", 200, probe.Options{UserAgent: "othercrawler/2"}, "/no-egresskit/1", false, true, "othercrawler/2"},
		{"told to ignore robots.txt", 200, probe.Options{IgnoreRobots: true}, "/private/1", false, true, egresskit.DefaultUserAgent},
		{"robots.txt missing", 404, probe.Options{}, "/private/1", false, true, egresskit.DefaultUserAgent},
		{"robots.txt unreachable still probes", 503, probe.Options{}, "/private/1", false, true, egresskit.DefaultUserAgent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site := newRobotsSite(t, tt.status, rules)
			opts := tt.opts
			opts.Deadline = 10 * time.Second
			rep, err := probe.Run(context.Background(), []probe.Target{{URL: site.URL + tt.path}, {URL: site.URL + "/public/2"}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Results[0]
			if r.Disallowed != tt.wantDisallowed {
				t.Errorf("Disallowed = %v, want %v (result %+v)", r.Disallowed, tt.wantDisallowed, r)
			}
			sent := false
			for _, s := range site.requests() {
				path, ua, _ := strings.Cut(s, " ")
				if path == tt.path {
					sent = true
				}
				if ua != tt.wantUA {
					t.Errorf("request %s sent User-Agent %q, want %q", path, ua, tt.wantUA)
				}
			}
			if sent != tt.wantSent {
				t.Errorf("probe of %s sent = %v, want %v (requests %q)", tt.path, sent, tt.wantSent, site.requests())
			}
			wantMeasured, wantDis := 2, 0
			if tt.wantDisallowed {
				wantMeasured, wantDis = 1, 1
				if r.Started() || r.Err != "disallowed by robots.txt" {
					t.Errorf("disallowed result = %+v, want not started, Err \"disallowed by robots.txt\"", r)
				}
			}
			if rep.Measured != wantMeasured || rep.Disallowed != wantDis {
				t.Errorf("Measured %d, Disallowed %d, want %d, %d", rep.Measured, rep.Disallowed, wantMeasured, wantDis)
			}
			if tt.wantDisallowed && rep.Status != probe.Healthy {
				t.Errorf("Status = %v (%q), want HEALTHY: a disallowed URL says nothing of the host's health", rep.Status, rep.Reasons)
			}
		})
	}
}

// A robots.txt that never answers is bounded by the Run's deadline.
func TestRunRobotsUnderDeadline(t *testing.T) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	defer close(hold)
	rep, err := probe.Run(context.Background(), []probe.Target{{URL: srv.URL + "/a"}}, probe.Options{Deadline: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; !r.Deadline || r.Stage == probe.StageQueued {
		t.Errorf("result = %+v, want cut by the deadline while started (the robots.txt fetch)", r)
	}
}

func TestRunRejectsBadUserAgent(t *testing.T) {
	for _, ua := range []string{"crawler/1\r\nX-Evil: 1", "crawler\n", "a\x00b", "a\x7fb"} {
		_, err := probe.Run(context.Background(), []probe.Target{{URL: "http://127.0.0.1:1/"}}, probe.Options{UserAgent: ua})
		if !errors.Is(err, egresskit.ErrInvalidConfig) {
			t.Errorf("Run(UserAgent %q) = %v, want ErrInvalidConfig", ua, err)
		}
		if err != nil && strings.Contains(err.Error(), ua) {
			t.Errorf("error %q repeats the header value", err)
		}
	}
	if _, err := probe.Run(context.Background(), []probe.Target{{URL: "http://127.0.0.1:1/"}}, probe.Options{UserAgent: "crawler/1 (+https://example.org/bot; tab\there)", Deadline: time.Millisecond}); errors.Is(err, egresskit.ErrInvalidConfig) {
		t.Errorf("Run(ordinary agent) = %v, want it accepted", err)
	}
}
