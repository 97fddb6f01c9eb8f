package egresskit_test

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/robots"
)

// TestZeroConfigIsRecommended: the zero Config (given only a transport to
// reach the test hosts) retries, paces, obeys robots.txt and halts a host
// that refuses us; DefaultConfig behaves the same; "none" is spelled with
// a negative number.
func TestZeroConfigIsRecommended(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  egresskit.Config
	}{{"zero", egresskit.Config{}}, {"DefaultConfig", egresskit.DefaultConfig()}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				s.handle("down.test", func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "down", http.StatusServiceUnavailable)
				})
				s.handle("ok.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>ok</html>") })
				s.handle("priv.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
				s.handle("wall.test", func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("cf-mitigated", "challenge")
					w.WriteHeader(http.StatusForbidden)
					io.WriteString(w, "<html><title>Just a moment...</title></html>")
				})
				s.mu.Lock()
				s.robots["priv.test"] = "User-agent: *\nDisallow: /private\n"
				s.mu.Unlock()
				cfg := tt.cfg
				cfg.Base = s.handler
				c := &http.Client{Transport: mustChain(cfg)}

				// retries: a failing GET is sent 1 + 3 times.
				get(c, "http://down.test/")
				if got := s.requests("down.test"); got != 4 {
					t.Errorf("retries: host received %d requests, want 4", got)
				}
				// paces: 1 request per second per host.
				start := time.Now()
				for range 3 {
					if _, err := get(c, "http://ok.test/"); err != nil {
						t.Fatal(err)
					}
				}
				if el := time.Since(start); el < 2*time.Second {
					t.Errorf("paces: 3 requests to one host took %v, want ≥ 2s", el)
				}
				// obeys robots.txt.
				if _, err := get(c, "http://priv.test/private/x"); !errors.Is(err, egresskit.ErrDisallowed) {
					t.Errorf("robots.txt: err = %v, want ErrDisallowed", err)
				}
				// halts a host that refuses us: no retry, nothing more sent.
				get(c, "http://wall.test/a")
				if _, err := get(c, "http://wall.test/b"); !errors.Is(err, egresskit.ErrHalted) {
					t.Errorf("halt: err = %v, want ErrHalted", err)
				}
				if got := s.requests("wall.test"); got != 1 {
					t.Errorf("halt: host received %d requests, want 1", got)
				}
			})
		})
	}
	t.Run("none", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newSite()
			s.handle("down.test", func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "down", http.StatusServiceUnavailable)
			})
			get(&http.Client{Transport: mustChain(egresskit.Config{Base: s.handler, Retry: retry.Policy{MaxRetries: -1}})}, "http://down.test/")
			if got := s.requests("down.test"); got != 1 {
				t.Errorf("MaxRetries -1: host received %d requests, want 1", got)
			}
		})
	})
}

// TestNewRefusesInvalidConfig: every configuration New cannot honour is
// refused by New, with the field named and nothing sent; none is first
// seen at RoundTrip.
func TestNewRefusesInvalidConfig(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   func(*egresskit.Config)
	}{
		{"Robots.UserAgent", func(c *egresskit.Config) { c.Robots.UserAgent = "Other/1.0" }},
		{"Robots.AgentToken", func(c *egresskit.Config) { c.Robots.AgentToken = "Other" }},
		{"Classify.AgentToken", func(c *egresskit.Config) { c.Classify.AgentToken = "Other" }},
		{"UserAgent", func(c *egresskit.Config) { c.UserAgent = "Bot/1.0\r\nX-Evil: 1" }},
		{"HostKey", func(c *egresskit.Config) { c.HostKey = hostkey.Mode(7) }},
		{"Retry", func(c *egresskit.Config) { c.Retry.MaxDelay = -time.Second }},
		{"Retry", func(c *egresskit.Config) { c.Retry.BaseDelay, c.Retry.MaxDelay = time.Minute, time.Second }},
		{"Classify.PeekSize", func(c *egresskit.Config) { c.Classify.PeekSize = 2 << 20 }},
		{"Classify.OKPeekSize", func(c *egresskit.Config) { c.Classify.PeekSize, c.Classify.OKPeekSize = 512, 1024 }},
		{"Classify.Markers[0]", func(c *egresskit.Config) { c.Classify.Markers = []classify.Marker{{Name: "x"}} }},
		{"Classify.Markers[0]", func(c *egresskit.Config) { c.Classify.Markers = []classify.Marker{{Body: "blocked"}} }},
		{"Robots.TTL", func(c *egresskit.Config) { c.Robots.TTL = -1 }},
		{"Robots.MaxSize", func(c *egresskit.Config) { c.Robots.MaxSize = -1 }},
		{"Robots.RetryBaseDelay", func(c *egresskit.Config) { c.Robots.RetryBaseDelay, c.Robots.RetryMaxDelay = time.Hour, time.Minute }},
		{"BlockWatch.Run", func(c *egresskit.Config) { c.BlockWatch.Run = 1 }},
		{"BlockWatch.Run", func(c *egresskit.Config) { c.BlockWatch.Run = -1 }},
		{"BlockWatch.Window", func(c *egresskit.Config) { c.BlockWatch.Run, c.BlockWatch.Window = 5, 3 }},
		{"BlockWatch.Share", func(c *egresskit.Config) { c.BlockWatch.Share = math.NaN() }},
		{"BlockWatch.MaxHosts", func(c *egresskit.Config) { c.BlockWatch.MaxHosts = -1 }},
		{"BlockWatch.Statuses[1]", func(c *egresskit.Config) { c.BlockWatch.Statuses = []int{403, 200} }},
		{"Scope.Allow[1]", func(c *egresskit.Config) { c.Scope.Allow = []string{"a.test", ""} }},
		{"Scope.Deny[0]", func(c *egresskit.Config) { c.Scope.Deny = []string{"."} }},
	} {
		t.Run(tt.field, func(t *testing.T) {
			var cfg egresskit.Config
			tt.cfg(&cfg)
			tr, err := egresskit.New(cfg)
			if !errors.Is(err, egresskit.ErrInvalidConfig) || tr != nil {
				t.Fatalf("New = %v, %v; want nil, ErrInvalidConfig", tr, err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("New error %q does not name %s", err, tt.field)
			}
		})
	}
	// Valid edge values are accepted: off spelled negative where off exists.
	for _, cfg := range []egresskit.Config{
		{},
		egresskit.DefaultConfig(),
		{Retry: retry.Policy{MaxRetries: -1, BaseDelay: -1, AttemptTimeout: -1, Deadline: -1}},
		{Classify: classify.Config{PeekSize: -1, PeekTimeout: -1}},
		{BlockWatch: blockwatch.Config{Disabled: true, Run: -5}},
		{BlockWatch: blockwatch.Config{Share: 2}},
		{Robots: robots.Config{MaxRedirects: -1, UnreachableLimit: -1, MaxCrawlDelay: -1}},
	} {
		if _, err := egresskit.New(cfg); err != nil {
			t.Errorf("New(%+v) = %v, want nil", cfg, err)
		}
	}
}
