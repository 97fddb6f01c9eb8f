package egresskit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/blocks"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/internal/settle"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/robots"
)

// closeRecorder is a request body that counts its Close calls.
type closeRecorder struct {
	io.Reader
	closed atomic.Int32
}

func (b *closeRecorder) Close() error { b.closed.Add(1); return nil }

// TestBodyClosedWhenNotSent: on every path where the chain sends nothing,
// RoundTrip still closes the request body, as http.RoundTripper requires.
func TestBodyClosedWhenNotSent(t *testing.T) {
	for _, tt := range []struct {
		name    string
		url     string
		setup   func(s *site, cfg *egresskit.Config)
		prime   func(t *testing.T, c *http.Client) // requests made before the one under test
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
	}{
		{name: "invalid request", url: "ftp://files.test/x", wantErr: egresskit.ErrInvalidRequest},
		{name: "out of scope", url: "http://deny.test/x", wantErr: egresskit.ErrOutOfScope,
			setup: func(_ *site, cfg *egresskit.Config) { cfg.Scope.Deny = []string{"deny.test"} }},
		{name: "robots disallow", url: "http://robots.test/private", wantErr: egresskit.ErrDisallowed,
			setup: func(s *site, _ *egresskit.Config) { s.robots["robots.test"] = "User-agent: *\nDisallow: /private\n" }},
		{name: "halted", url: "http://halt.test/x", wantErr: egresskit.ErrHalted,
			setup: func(s *site, _ *egresskit.Config) {
				s.handle("halt.test", func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "TestBot is not welcome here", http.StatusForbidden)
				})
			},
			prime: func(t *testing.T, c *http.Client) { get(c, "http://halt.test/first") }},
		{name: "breaker open", url: "http://down.test/x", wantErr: egresskit.ErrOpen,
			setup: func(s *site, cfg *egresskit.Config) {
				cfg.Store = mustMemory(hoststate.Config{Breaker: breaker.Config{FailureThreshold: 1}})
				s.handle("down.test", func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "down", http.StatusBadGateway)
				})
			},
			prime: func(t *testing.T, c *http.Client) { get(c, "http://down.test/first") }},
		{name: "pacing wait past deadline", url: "http://slow.test/x", wantErr: context.DeadlineExceeded,
			setup: func(s *site, cfg *egresskit.Config) {
				cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1, Burst: 1}})
				s.handle("slow.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			},
			prime: func(t *testing.T, c *http.Client) { get(c, "http://slow.test/first") },
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Second)
			}},
		{name: "caller canceled", url: "http://gone.test/x", wantErr: context.Canceled,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				cfg := fastConfig(s)
				cfg.Retry = retry.Policy{MaxRetries: -1}
				if tt.setup != nil {
					tt.setup(s, &cfg)
				}
				chain := mustChain(cfg)
				if tt.prime != nil {
					tt.prime(t, &http.Client{Transport: chain})
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tt.ctx != nil {
					ctx, cancel = tt.ctx()
				}
				defer cancel()
				body := &closeRecorder{Reader: strings.NewReader("payload")}
				req, err := http.NewRequestWithContext(ctx, "PUT", tt.url, body)
				if err != nil {
					t.Fatal(err)
				}
				before := s.requests(req.URL.Host)
				resp, err := chain.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("RoundTrip = %v, %v; want an error matching %v", resp, err, tt.wantErr)
				}
				if got := s.requests(req.URL.Host) - before; got != 0 {
					t.Errorf("the host received %d requests, want 0", got)
				}
				if got := body.closed.Load(); got != 1 {
					t.Errorf("request body closed %d times, want 1", got)
				}
			})
		})
	}
}

// TestHungHostTripsBreakerUnderClientTimeout: a host that never answers,
// with only http.Client.Timeout bounding the requests (as most crawlers and
// Colly's SetRequestTimeout do), counts each expired deadline against the
// host, so its breaker opens and later requests are not sent.
func TestHungHostTripsBreakerUnderClientTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("hung.test", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		chain := mustChain(fastConfig(s)) // pacing never binds; the default breaker trips at 8
		c := &http.Client{Transport: chain, Timeout: 400 * time.Millisecond}
		var open int
		for range 16 {
			_, err := get(c, "http://hung.test/")
			if err == nil {
				t.Fatal("the hung host answered")
			}
			if errors.Is(err, egresskit.ErrOpen) {
				open++
			}
		}
		if got := s.requests("hung.test"); got > 9 {
			t.Errorf("the hung host received %d of 16 requests, want at most 9", got)
		}
		st, err := chain.Status(context.Background(), "hung.test")
		if err != nil || st.Breaker != breaker.Open || open == 0 {
			t.Errorf("breaker %v (%v), %d requests failed fast; want open, some failed fast", st.Breaker, err, open)
		}
	})
}

// trickle is a base transport whose response headers arrive at once and
// whose HTML page then arrives one byte every 100ms.
type trickle struct {
	page string
	sent atomic.Int64
}

func (tr *trickle) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		for i := range len(tr.page) {
			time.Sleep(100 * time.Millisecond)
			tr.sent.Add(1) // counted before the reader can see it
			if _, err := pw.Write([]byte{tr.page[i]}); err != nil {
				return
			}
		}
		pw.Close()
	}()
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/html"}}, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// TestTricklingPageReturnsAfterPeekBudget: with no caller deadline, a 200
// page whose body trickles in is returned once the peek's time budget has
// passed (not after its 4 KiB head, which would take minutes), classified
// on what had arrived, and read in full by the caller.
func TestTricklingPageReturnsAfterPeekBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		page := "<html><body>" + strings.Repeat("<p>slow news</p>", 300) + "</body></html>"
		base := &trickle{page: page}
		cfg := egresskit.Config{Base: base, IgnoreRobots: true}
		c := &http.Client{Transport: mustChain(cfg)}
		start := time.Now()
		resp, err := c.Get("http://slow.test/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("RoundTrip returned after %v, want at most 2s", took)
		}
		if sent := base.sent.Load(); sent >= 4096 {
			t.Errorf("RoundTrip returned after %d bytes of the body, want fewer than the 4 KiB peek", sent)
		}
		if r := classify.Of(resp, nil); r.Outcome != classify.OK || !r.PeekCut {
			t.Errorf("Result = %v (PeekCut %v), want ok with PeekCut", r.Outcome, r.PeekCut)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != page {
			t.Errorf("body: %d bytes, %v; want the whole %d-byte page", len(b), err, len(page))
		}
	})
}

// TestRobotsJudgedForAgentSent: robots.txt is judged for the User-Agent a
// request is actually sent with, as when Colly sets its own, and a refusal
// naming that agent halts the host; a request without one is sent as, and
// judged for, Config.UserAgent.
func TestRobotsJudgedForAgentSent(t *testing.T) {
	const colly = "colly - https://github.com/gocolly/colly"
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["site.test"] = "User-agent: colly\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
		var sentUA []string
		s.handle("site.test", func(w http.ResponseWriter, r *http.Request) {
			sentUA = append(sentUA, r.Header.Get("User-Agent"))
			io.WriteString(w, "ok")
		})
		s.robots["ban.test"] = "User-agent: *\nAllow: /\n"
		s.handle("ban.test", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "Colly is not welcome here", http.StatusForbidden)
		})
		chain := mustChain(fastConfig(s)) // UserAgent "TestBot/1.0"
		c := &http.Client{Transport: chain}

		req, _ := http.NewRequest("GET", "http://site.test/page", nil)
		req.Header.Set("User-Agent", colly)
		if resp, err := c.Do(req); !errors.Is(err, egresskit.ErrDisallowed) {
			if resp != nil {
				resp.Body.Close()
			}
			t.Errorf("request sent as %q: err = %v, want egresskit.ErrDisallowed", colly, err)
		}
		if status, err := get(c, "http://site.test/page"); status != 200 || err != nil {
			t.Errorf("request without a User-Agent: %d, %v; want 200", status, err)
		}
		if len(sentUA) != 1 || sentUA[0] != "TestBot/1.0" {
			t.Errorf("the site saw User-Agents %q, want only TestBot/1.0", sentUA)
		}

		req, _ = http.NewRequest("GET", "http://ban.test/page", nil)
		req.Header.Set("User-Agent", colly)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !egresskit.Halted(resp) {
			t.Errorf("a 403 naming the agent sent (%v): not halted", classify.Of(resp, nil).Reason)
		}
	})
}

// TestIdentityBounded: a Transport keeps at most 16 identities; a 17th
// distinct User-Agent is refused before anything is sent.
func TestIdentityBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("a.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		c := &http.Client{Transport: mustChain(fastConfig(s))}
		for i := range 17 {
			req, _ := http.NewRequest("GET", "http://a.test/", nil)
			req.Header.Set("User-Agent", "Bot"+strings.Repeat("x", i)+"/1.0")
			resp, err := c.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if wantErr := i == 16; errors.Is(err, egresskit.ErrTooManyAgents) != wantErr {
				t.Errorf("User-Agent %d: err = %v, want ErrTooManyAgents: %v", i+1, err, wantErr)
			}
		}
		if got := s.requests("a.test"); got != 16 {
			t.Errorf("host received %d requests, want 16", got)
		}
	})
}

// TestDefaults pins the defaults the package documentation and the README
// quote.
func TestDefaults(t *testing.T) {
	lim, br, rb := ratelimit.DefaultConfig(), circuits.DefaultConfig(), robotstxt.DefaultConfig()
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"pacing per minute", lim.PerMinute, 60.0},
		{"pacing burst", lim.Burst, 1},
		{"breaker threshold", br.FailureThreshold, 8},
		{"breaker open time", br.OpenTimeout, 300 * time.Second},
		{"breaker probes", br.HalfOpenProbes, 1},
		{"robots unreachable wait", rb.RetryBaseDelay, time.Minute},
		{"robots unreachable cap", rb.RetryMaxDelay, time.Hour},
		{"peek size", settle.DefaultPeekSize, 4096},
		{"2xx peek size", settle.DefaultOKPeekSize, 1024},
		{"block watch run", blocks.DefaultConfig().Run, 10},
		{"peek time", settle.DefaultPeekTimeout, time.Second},
		{"DefaultConfig retries", egresskit.DefaultConfig().Retry.MaxRetries, 3},
		{"DefaultConfig agent", egresskit.DefaultConfig().UserAgent, egresskit.DefaultUserAgent},
		{"OpenError matches ErrOpen", errors.Is(&breaker.OpenError{Host: "h"}, egresskit.ErrOpen), true},
		{"HaltError matches ErrHalted", errors.Is(&breaker.HaltError{Host: "h"}, egresskit.ErrHalted), true},
		{"DisallowedError matches ErrDisallowed", errors.Is(&robots.DisallowedError{Host: "h"}, egresskit.ErrDisallowed), true},
		{"DefaultConfig MaxWait", egresskit.DefaultConfig().MaxWait, 30 * time.Second},
		{"OpenError matches ErrTryLater", errors.Is(&breaker.OpenError{Host: "h"}, egresskit.ErrTryLater), true},
		{"unreachable robots.txt matches ErrTryLater", errors.Is(&robots.DisallowedError{Host: "h", Source: robots.Unreachable}, egresskit.ErrTryLater), true},
		{"unreachable robots.txt is not ErrDisallowed", errors.Is(&robots.DisallowedError{Host: "h", Source: robots.Unreachable}, egresskit.ErrDisallowed), false},
		{"HaltError is not ErrTryLater", errors.Is(&breaker.HaltError{Host: "h"}, egresskit.ErrTryLater), false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
