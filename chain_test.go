package egresskit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// site is an in-memory web of hosts for synctest scenarios: each host has a
// handler, robots.txt is 404 unless set, and requests are counted per host
// and path.
type site struct {
	mu      sync.Mutex // guards hosts, robots and counts
	hosts   map[string]http.HandlerFunc
	robots  map[string]string
	counts  map[string]int // "host" and "host/robots.txt"
	handler *egresstest.Transport
}

func newSite() *site {
	s := &site{hosts: map[string]http.HandlerFunc{}, robots: map[string]string{}, counts: map[string]int{}}
	s.handler = egresstest.NewHandlerTransport(http.HandlerFunc(s.serve))
	return s
}

func (s *site) handle(host string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts[host] = h
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	host := r.URL.Host
	if r.URL.Path == "/robots.txt" {
		s.counts[host+"/robots.txt"]++
		body, ok := s.robots[host]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
		return
	}
	s.counts[host]++
	h := s.hosts[host]
	s.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h(w, r)
}

// requests returns how many non-robots requests host received.
func (s *site) requests(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[host]
}

// get sends a GET through c and returns the status (0 on error) and error,
// reading and closing the body.
func get(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

// fastConfig is a Config over s with pacing that never binds, so that
// scenarios measure only what they are about; a scenario that slows its
// host waits for it as long as it takes (MaxWait: none).
func fastConfig(s *site) egresskit.Config {
	return egresskit.Config{
		Base:      s.handler,
		UserAgent: "TestBot/1.0",
		Retry:     retry.Policy{MaxRetries: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second},
		Store:     mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}}),
		MaxWait:   -1,
	}
}

func TestTransientRecoversOnSecondAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		var n atomic.Int32
		s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok")
		})
		c := &http.Client{Transport: mustChain(fastConfig(s))}
		status, err := get(c, "http://a.test/page")
		if err != nil || status != 200 {
			t.Fatalf("get = %d, %v; want 200, nil", status, err)
		}
		if got := s.requests("a.test"); got != 2 {
			t.Errorf("server saw %d requests, want 2", got)
		}
	})
}

func TestThrottledWaitsRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter func(now time.Time) string
		want       time.Duration
	}{
		{"seconds", func(time.Time) string { return "5" }, 5 * time.Second},
		{"http-date", func(now time.Time) string { return now.Add(7 * time.Second).UTC().Format(http.TimeFormat) }, 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				var first time.Time
				var second time.Time
				var n atomic.Int32
				s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
					if n.Add(1) == 1 {
						first = time.Now()
						w.Header().Set("Retry-After", tt.retryAfter(first))
						http.Error(w, "slow down", http.StatusTooManyRequests)
						return
					}
					second = time.Now()
					io.WriteString(w, "ok")
				})
				c := &http.Client{Transport: mustChain(fastConfig(s))}
				status, err := get(c, "http://a.test/")
				if err != nil || status != 200 {
					t.Fatalf("get = %d, %v; want 200, nil", status, err)
				}
				// An HTTP date has a resolution of one second.
				if waited := second.Sub(first); waited < tt.want-time.Second || waited > tt.want+time.Second {
					t.Errorf("waited %v between attempts, want about %v", waited, tt.want)
				}
			})
		})
	}
}

func TestRetryAfterPastCapReturnsResponseAndPausesHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "come back later", http.StatusTooManyRequests)
		})
		chain := mustChain(fastConfig(s))
		c := &http.Client{Transport: chain}
		status, err := get(c, "http://a.test/")
		if err != nil || status != http.StatusTooManyRequests {
			t.Fatalf("get = %d, %v; want the real 429", status, err)
		}
		if got := s.requests("a.test"); got != 1 {
			t.Errorf("server saw %d requests, want 1 (no retry past the cap)", got)
		}
		st, err := chain.Status(context.Background(), "a.test")
		if err != nil {
			t.Fatal(err)
		}
		if until := time.Until(st.PausedUntil); until < 59*time.Minute {
			t.Errorf("host paused for %v, want about 1h", until)
		}
	})
}

func TestNamedRefusalHaltsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("blocked.test", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html>TestBot is not welcome here.</html>")
		})
		s.handle("fine.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		var escalations []egresskit.Escalation
		cfg := fastConfig(s)
		cfg.OnEscalate = func(e egresskit.Escalation) { escalations = append(escalations, e) }
		chain := mustChain(cfg)
		c := &http.Client{Transport: chain}

		resp, err := c.Get("http://blocked.test/a?token=s3cr3t")
		if err != nil {
			t.Fatalf("first request: %v, want the real 403", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !egresskit.Halted(resp) || !strings.Contains(string(body), "not welcome") {
			t.Errorf("first response = %d halted=%v body=%q; want the whole 403, halted", resp.StatusCode, egresskit.Halted(resp), body)
		}
		for i := range 3 {
			_, err := get(c, fmt.Sprintf("http://blocked.test/%d", i))
			if !errors.Is(err, egresskit.ErrHalted) {
				t.Errorf("request after halt: err = %v, want ErrHalted", err)
			}
		}
		if got := s.requests("blocked.test"); got != 1 {
			t.Errorf("blocked host saw %d requests, want exactly 1", got)
		}
		if status, err := get(c, "http://fine.test/"); err != nil || status != 200 {
			t.Errorf("other host: %d, %v; want 200", status, err)
		}
		if len(escalations) != 1 {
			t.Fatalf("escalations = %d, want 1", len(escalations))
		}
		e := escalations[0]
		if e.Host != "blocked.test" || e.Status != 403 || !strings.Contains(string(e.BodyHead), "not welcome") {
			t.Errorf("escalation = %+v", e)
		}
		if strings.Contains(e.URL, "s3cr3t") {
			t.Errorf("escalation URL %q leaks a secret", e.URL)
		}
		if err := chain.Resume(context.Background(), "blocked.test"); err != nil {
			t.Fatal(err)
		}
		s.handle("blocked.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "welcome back") })
		if status, err := get(c, "http://blocked.test/again"); err != nil || status != 200 {
			t.Errorf("after Resume: %d, %v; want 200", status, err)
		}
	})
}

// TestHaltedThroughClientTimeout: http.Client wraps the body when it has a
// Timeout; the refusal must still be recognisable.
func TestHaltedThroughClientTimeout(t *testing.T) {
	s := newSite()
	s.handle("blocked.test", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "TestBot is not welcome")
	})
	c := &http.Client{Transport: mustChain(fastConfig(s)), Timeout: time.Minute}
	resp, err := c.Get("http://blocked.test/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !egresskit.Halted(resp) || classify.Of(resp, nil).Outcome != classify.Refused {
		t.Errorf("Halted = %v, outcome %v; want true, refused", egresskit.Halted(resp), classify.Of(resp, nil).Outcome)
	}
}

func TestSlowHostCutByTimeouts(t *testing.T) {
	tests := []struct {
		name         string
		policy       retry.Policy
		wantAttempts int
		maxElapsed   time.Duration
	}{
		{"attempt timeout", retry.Policy{MaxRetries: 2, BaseDelay: -1, AttemptTimeout: time.Second}, 3, 4 * time.Second},
		{"overall deadline", retry.Policy{MaxRetries: 5, BaseDelay: -1, AttemptTimeout: 10 * time.Second, Deadline: 15 * time.Second}, 2, 16 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				s.handle("slow.test", func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-time.After(time.Minute):
						io.WriteString(w, "late")
					case <-r.Context().Done():
					}
				})
				cfg := fastConfig(s)
				cfg.Retry = tt.policy
				c := &http.Client{Transport: mustChain(cfg)}
				start := time.Now()
				_, err := get(c, "http://slow.test/")
				if err == nil {
					t.Fatal("slow host answered, want a timeout")
				}
				if elapsed := time.Since(start); elapsed > tt.maxElapsed {
					t.Errorf("took %v, want at most %v", elapsed, tt.maxElapsed)
				}
				if got := s.requests("slow.test"); got != tt.wantAttempts {
					t.Errorf("server saw %d attempts, want %d", got, tt.wantAttempts)
				}
			})
		})
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	for _, probeOK := range []bool{true, false} {
		t.Run(fmt.Sprintf("probe ok=%v", probeOK), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				var healthy atomic.Bool
				s.handle("down.test", func(w http.ResponseWriter, r *http.Request) {
					if healthy.Load() {
						io.WriteString(w, "ok")
						return
					}
					http.Error(w, "down", http.StatusBadGateway)
				})
				cfg := fastConfig(s)
				cfg.Retry = retry.Policy{MaxRetries: -1}
				// One token a minute, so that the open time (300s) refills
				// only 5 of the burst of 20 and the tokens spent show.
				// A host's bucket starts with one token and fills while it
				// is idle (kept: IdleTTL -1): one request, 20 idle minutes,
				// and the burst of 20 is there.
				cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1, Burst: 20, IdleTTL: -1}})
				chain := mustChain(cfg)
				c := &http.Client{Transport: chain}
				healthy.Store(true)
				if status, _ := get(c, "http://down.test/first"); status != 200 {
					t.Fatalf("first request: status %d, want 200", status)
				}
				healthy.Store(false)
				time.Sleep(20 * time.Minute)
				for i := range 8 {
					if status, _ := get(c, "http://down.test/"); status != 502 {
						t.Fatalf("request %d: status %d, want 502", i+1, status)
					}
				}
				before, _ := chain.Status(context.Background(), "down.test")
				_, err := get(c, "http://down.test/")
				var open *breaker.OpenError
				if !errors.As(err, &open) || !errors.Is(err, egresskit.ErrOpen) {
					t.Fatalf("9th request: err = %v, want *breaker.OpenError", err)
				}
				if got := s.requests("down.test"); got != 9 {
					t.Errorf("server saw %d requests, want 9 (the first, 8 failures; the 10th never sent)", got)
				}
				after, _ := chain.Status(context.Background(), "down.test")
				if before.Breaker != breaker.Open || after.Breaker != breaker.Open {
					t.Errorf("breaker state after 8 failures %v, after the refused 9th %v; want open, open", before.Breaker, after.Breaker)
				}
				// More refused requests while open: none may take a token.
				for range 20 {
					if _, err := get(c, "http://down.test/"); !errors.Is(err, egresskit.ErrOpen) {
						t.Fatalf("request while open: err = %v, want ErrOpen", err)
					}
				}
				time.Sleep(300*time.Second + time.Millisecond)
				healthy.Store(probeOK)
				status, _ := get(c, "http://down.test/probe")
				if got := s.requests("down.test"); got != 10 {
					t.Errorf("after open time: server saw %d requests, want 10 (one probe)", got)
				}
				st, _ := chain.Status(context.Background(), "down.test")
				if probeOK {
					if status != 200 || st.Breaker != breaker.Closed {
						t.Errorf("successful probe: status %d, breaker %v; want 200, closed", status, st.Breaker)
					}
					// The 21 refused requests took no token: of the burst of
					// 20, the 8 failures left 12, the open time added 5 and
					// the probe took 1, so 16 requests go out at once and the
					// 17th waits for the next token.
					for i := range 17 {
						start := time.Now()
						if status, err := get(c, "http://down.test/after"); status != 200 {
							t.Fatalf("request %d after recovery: status %d, err %v", i+1, status, err)
						}
						waited := time.Since(start)
						if i < 16 && waited != 0 {
							t.Fatalf("request %d after recovery waited %v, want no wait: the burst was spent while open", i+1, waited)
						}
						if i == 16 && waited == 0 {
							t.Fatalf("request 17 after recovery did not wait: more than 16 tokens were left")
						}
					}
				} else {
					if st.Breaker != breaker.Open {
						t.Errorf("failed probe: breaker %v, want open", st.Breaker)
					}
					if _, err := get(c, "http://down.test/again"); !errors.Is(err, egresskit.ErrOpen) {
						t.Errorf("after failed probe: err = %v, want ErrOpen", err)
					}
				}
			})
		})
	}
}

func TestOpenBreakerSpendsNoToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("down.test", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		})
		cfg := fastConfig(s)
		cfg.Retry = retry.Policy{MaxRetries: -1}
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60, Burst: 1}})
		chain := mustChain(cfg)
		c := &http.Client{Transport: chain}
		for range 8 {
			get(c, "http://down.test/")
		}
		// Eight requests at 1/s took at least 7s of pacing.
		for range 50 {
			start := time.Now()
			if _, err := get(c, "http://down.test/"); !errors.Is(err, egresskit.ErrOpen) {
				t.Fatalf("err = %v, want ErrOpen", err)
			}
			if waited := time.Since(start); waited != 0 {
				t.Fatalf("refused request waited %v for a token, want 0", waited)
			}
		}
	})
}

func Test429HalvesRateAndPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("busy.test", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		})
		cfg := fastConfig(s)
		cfg.Retry = retry.Policy{MaxRetries: -1}
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 40}})
		chain := mustChain(cfg)
		c := &http.Client{Transport: chain}
		if status, _ := get(c, "http://busy.test/"); status != 429 {
			t.Fatalf("status %d, want 429", status)
		}
		st, err := chain.Status(context.Background(), "busy.test")
		if err != nil {
			t.Fatal(err)
		}
		if st.PerMinute != 20 {
			t.Errorf("rate after 429 = %v/min, want 20 (halved, not reset)", st.PerMinute)
		}
		if paused := time.Until(st.PausedUntil); paused < 5*time.Second {
			t.Errorf("paused for %v, want >= 5s", paused)
		}
	})
}

func TestAlwaysThrottledHostGetsBoundedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("busy.test", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		})
		cfg := fastConfig(s)
		cfg.Retry = retry.Policy{MaxRetries: 3, BaseDelay: 100 * time.Millisecond}
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60}})
		chain := mustChain(cfg)
		c := &http.Client{Transport: chain}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://busy.test/", nil)
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			} else if errors.Is(err, egresskit.ErrOpen) || errors.Is(err, context.DeadlineExceeded) {
				// Not sent: open breaker, or a pacing wait past the end.
				time.Sleep(time.Second)
			} else {
				t.Fatalf("unexpected error: %v", err)
			}
		}
		// The first 429 halves 60/min and pauses one interval (2s, more
		// than the Retry-After of 1s); every later one finds the host
		// still shut (no OK since the pause ended): four times the pause,
		// a quarter of the rate. Requests at 0, 2, 10 and 42s; the next
		// would be at 170s. Retries and the caller's loop cannot add any:
		// every attempt needs a token.
		if got := s.requests("busy.test"); got != 4 {
			t.Errorf("always-throttled host saw %d requests in 60s, want 4", got)
		}
	})
}

func TestRobotsDisallowNeverReachesBreakerOrLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["r.test"] = "User-agent: *\nDisallow: /private\n"
		s.handle("r.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		cfg := fastConfig(s)
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60, Burst: 1}})
		chain := mustChain(cfg)
		c := &http.Client{Transport: chain}
		for range 20 {
			start := time.Now()
			_, err := get(c, "http://r.test/private/x")
			if !errors.Is(err, egresskit.ErrDisallowed) {
				t.Fatalf("err = %v, want egresskit.ErrDisallowed", err)
			}
			if time.Since(start) != 0 {
				t.Fatal("a disallowed request waited for a token")
			}
		}
		st, _ := chain.Status(context.Background(), "r.test")
		if st.Recent != (ratelimit.Outcomes{}) || st.ConsecutiveFailures != 0 {
			t.Errorf("disallowed requests reached the host state: %+v", st)
		}
		if got := s.requests("r.test"); got != 0 {
			t.Errorf("server saw %d requests, want 0", got)
		}
		if status, err := get(c, "http://r.test/public"); err != nil || status != 200 {
			t.Errorf("allowed path: %d, %v", status, err)
		}
		s.mu.Lock()
		fetches := s.counts["r.test/robots.txt"]
		s.mu.Unlock()
		if fetches != 1 {
			t.Errorf("robots.txt fetched %d times, want 1", fetches)
		}
	})
}

func TestCrawlDelayBecomesCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["slow.test"] = "User-agent: *\nCrawl-delay: 10\n"
		s.handle("slow.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		chain := mustChain(fastConfig(s))
		c := &http.Client{Transport: chain}
		if _, err := get(c, "http://slow.test/"); err != nil {
			t.Fatal(err)
		}
		st, _ := chain.Status(context.Background(), "slow.test")
		if st.Ceiling != 6 || st.PerMinute > 6 {
			t.Errorf("ceiling %v, rate %v; want 6/min from Crawl-delay 10", st.Ceiling, st.PerMinute)
		}
	})
}

func TestBadRequests(t *testing.T) {
	chain := mustChain(egresskit.Config{Base: egresstest.NewScript(egresstest.Step{})})
	tests := []struct {
		name string
		req  *http.Request
	}{
		{"nil", nil},
		{"no url", &http.Request{Method: "GET", Header: http.Header{}}},
		{"no host", mustRequest(t, "http:///path")},
		{"ftp", mustRequest(t, "ftp://example.com/file")},
		{"port only", mustRequest(t, "http://:8080/")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := chain.RoundTrip(tt.req)
			if err == nil || resp != nil {
				t.Fatalf("RoundTrip = %v, %v; want an error", resp, err)
			}
		})
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestScope(t *testing.T) {
	s := newSite()
	s.handle("in.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg := fastConfig(s)
	cfg.Scope = egresskit.Scope{Allow: []string{".in.test"}, Deny: []string{"bad.in.test"}}
	c := &http.Client{Transport: mustChain(cfg)}
	if status, err := get(c, "http://in.test/"); err != nil || status != 200 {
		t.Errorf("in scope: %d, %v", status, err)
	}
	for _, u := range []string{"http://out.test/", "http://bad.in.test/"} {
		if _, err := get(c, u); !errors.Is(err, egresskit.ErrOutOfScope) {
			t.Errorf("get(%s) err = %v, want ErrOutOfScope", u, err)
		}
	}
}

func TestNonReplayableBodyIsNotRetried(t *testing.T) {
	script := egresstest.NewScript(egresstest.Step{Status: 503}, egresstest.Step{Status: 200})
	cfg := egresskit.Config{Base: script, IgnoreRobots: true,
		Retry: retry.Policy{RetryNonIdempotent: true, BaseDelay: -1},
		Store: mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 10}})}
	chain := mustChain(cfg)
	req, _ := http.NewRequest("POST", "http://a.test/form", io.NopCloser(strings.NewReader("x=1")))
	req.GetBody = nil
	resp, err := chain.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || script.Requests() != 1 {
		t.Errorf("status %d after %d requests; want the first 503 and no retry", resp.StatusCode, script.Requests())
	}
	if got := classify.Of(resp, nil).Outcome; got != classify.Transient {
		t.Errorf("outcome %v, want transient", got)
	}
}

// TestWaitingRequestRechecksHost: a request admitted before another attempt
// halted the host, paused it or opened its breaker is not sent when its
// pacing wait ends.
func TestWaitingRequestRechecksHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("blocked.test", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(10 * time.Millisecond)
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "TestBot is not welcome here.")
		})
		cfg := fastConfig(s)
		cfg.Retry = retry.Policy{MaxRetries: -1}
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60, Burst: 1}})
		c := &http.Client{Transport: mustChain(cfg)}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() { _, errs[i] = get(c, "http://blocked.test/") })
		}
		wg.Wait()
		if got := s.requests("blocked.test"); got != 1 {
			t.Errorf("halted host saw %d requests, want 1", got)
		}
		if !errors.Is(errs[0], egresskit.ErrHalted) && !errors.Is(errs[1], egresskit.ErrHalted) {
			t.Errorf("errors %v; want one ErrHalted", errs)
		}
	})
}

// TestAttemptTimeoutExcludesPacingWait: AttemptTimeout counts from sending,
// not from the start of the wait for a token.
func TestAttemptTimeoutExcludesPacingWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(500 * time.Millisecond)
			io.WriteString(w, "ok")
		})
		cfg := fastConfig(s)
		cfg.Retry = retry.Policy{MaxRetries: -1, AttemptTimeout: time.Second}
		cfg.Store = mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60, Burst: 1}})
		c := &http.Client{Transport: mustChain(cfg)}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range 3 {
			wg.Go(func() { _, errs[i] = get(c, "http://a.test/") })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("request %d: %v; want success after its pacing wait", i, err)
			}
		}
		if got := s.requests("a.test"); got != 3 {
			t.Errorf("server saw %d requests, want 3", got)
		}
	})
}

// closer counts CloseIdleConnections calls.
type closer struct {
	canned
	n int
}

func (c *closer) CloseIdleConnections() { c.n++ }

func TestCloseIdleConnectionsReachesBase(t *testing.T) {
	base := &closer{}
	c := &http.Client{Transport: mustChain(egresskit.Config{Base: base, IgnoreRobots: true})}
	c.CloseIdleConnections()
	if base.n != 1 {
		t.Errorf("http.Client.CloseIdleConnections reached the base transport %d times, want 1", base.n)
	}
}
