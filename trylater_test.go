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
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/robots"
)

// TestLongRetryAfterTryLater: with the zero Config (only Base set, to
// reach the in-memory hosts), a host answers 429 with Retry-After: 3600.
// The next request to it returns at once ErrTryLater carrying the hour,
// whatever the client's timeout; another host is served as before. With
// MaxWait negative (no bound) the request waits out the hour and is sent.
// In a synctest bubble: the durations are the bubble's clock.
func TestLongRetryAfterTryLater(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxWait  time.Duration
		timeout  time.Duration // http.Client.Timeout; 0: none
		deadline bool          // the client's deadline decides, not MaxWait
		sent     bool          // MaxWait negative: the request waits and is sent
	}{
		{name: "zero Config, no client timeout"},
		{name: "client timeout under the bound", timeout: 10 * time.Second, deadline: true},
		{name: "client timeout over the bound", timeout: 2 * time.Minute},
		{name: "MaxWait 1m", maxWait: time.Minute},
		{name: "MaxWait none, client timeout", maxWait: -1, timeout: 10 * time.Minute, deadline: true},
		{name: "MaxWait none, no client timeout", maxWait: -1, sent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				var busy atomic.Int32
				s.handle("busy.test", func(w http.ResponseWriter, r *http.Request) {
					if busy.Add(1) == 1 {
						w.Header().Set("Retry-After", "3600")
						http.Error(w, "slow down", http.StatusTooManyRequests)
						return
					}
					io.WriteString(w, "ok")
				})
				s.handle("calm.test", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
				c := &http.Client{Transport: mustChain(egresskit.Config{Base: s.handler, MaxWait: tc.maxWait}), Timeout: tc.timeout}

				if status, err := get(c, "http://busy.test/first"); status != http.StatusTooManyRequests {
					t.Fatalf("first request = %d, %v; want the 429 itself", status, err)
				}
				start := time.Now()
				status, err := get(c, "http://busy.test/next")
				took := time.Since(start)
				if tc.sent {
					if err != nil || status != 200 || took < 3590*time.Second {
						t.Fatalf("with no bound: %d, %v after %v; want 200 after the hour's pause", status, err, took)
					}
					return
				}
				bound := tc.maxWait
				if bound == 0 {
					bound = 30 * time.Second
				}
				if took != 0 {
					t.Errorf("the refused request returned after %v, want at once", took)
				}
				if !errors.Is(err, egresskit.ErrTryLater) {
					t.Fatalf("next request = %d, %v; want ErrTryLater", status, err)
				}
				we, ok := errors.AsType[*ratelimit.WaitError](err)
				if !ok {
					t.Fatalf("err = %v, want a *ratelimit.WaitError", err)
				}
				if we.RetryAfter < 3590*time.Second || we.RetryAfter > 3600*time.Second {
					t.Errorf("RetryAfter = %v, want about 3600s", we.RetryAfter)
				}
				if at := egresskit.RetryAt(err); at.Sub(start) < 3590*time.Second || at.Sub(start) > 3600*time.Second {
					t.Errorf("RetryAt = %v after the request, want about 3600s", at.Sub(start))
				}
				if got := errors.Is(err, context.DeadlineExceeded); got != tc.deadline {
					t.Errorf("errors.Is(err, context.DeadlineExceeded) = %v, want %v (%v)", got, tc.deadline, err)
				}
				wantBound := bound
				if tc.deadline {
					wantBound = 0
				}
				if we.Bound != wantBound {
					t.Errorf("Bound = %v, want %v", we.Bound, wantBound)
				}
				if errors.Is(err, egresskit.ErrDisallowed) || errors.Is(err, egresskit.ErrHalted) || errors.Is(err, egresskit.ErrOpen) {
					t.Errorf("err = %v matches another action's sentinel", err)
				}
				if !strings.Contains(err.Error(), "ratelimit: busy.test asks us to wait") {
					t.Errorf("err = %q, want it to say that ratelimit decided, and what", err)
				}
				if got := s.requests("busy.test"); got != 1 {
					t.Errorf("busy.test received %d requests, want 1", got)
				}
				start = time.Now()
				if status, err := get(c, "http://calm.test/"); status != 200 || err != nil || time.Since(start) != 0 {
					t.Errorf("another host: %d, %v after %v; want 200 at once", status, err, time.Since(start))
				}
			})
		})
	}
}

// TestSentinelPerAction: every request the chain does not send matches
// exactly one of the three actions a crawler takes — skip the URL
// (ErrDisallowed), try the host later (ErrTryLater, with RetryAt), wait
// for a human (ErrHalted) — and its message starts with the package that
// decided, in the README's words. A halt's message never says "breaker".
func TestSentinelPerAction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// serve answers the host's robots.txt and pages; prime is the
		// path requested first, to put the host in its state.
		serve  func(w http.ResponseWriter, r *http.Request)
		prime  string
		want   error
		prefix string // of the innermost message
		says   string // a word of it
	}{
		{name: "robots rule", want: egresskit.ErrDisallowed, prefix: "robots: ", says: "disallowed by robots.txt",
			serve: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					io.WriteString(w, "User-agent: *\nDisallow: /page\n")
					return
				}
				io.WriteString(w, "ok")
			}},
		{name: "robots 503", want: egresskit.ErrTryLater, prefix: "robots: ", says: "robots.txt of h.test unreachable",
			serve: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					http.Error(w, "down", http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, "ok")
			}},
		{name: "robots 429", want: egresskit.ErrTryLater, prefix: "robots: ", says: "robots.txt of h.test unreachable",
			serve: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return
				}
				io.WriteString(w, "ok")
			}},
		{name: "paused", prime: "/first", want: egresskit.ErrTryLater, prefix: "ratelimit: ", says: "asks us to wait",
			serve: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/first" {
					w.Header().Set("Retry-After", "600")
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return
				}
				notFoundRobots(w, r)
			}},
		{name: "open", prime: "/first", want: egresskit.ErrTryLater, prefix: "breaker: ", says: "is failing",
			serve: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/first" {
					http.Error(w, "broken", http.StatusInternalServerError)
					return
				}
				notFoundRobots(w, r)
			}},
		{name: "halted", prime: "/first", want: egresskit.ErrHalted, prefix: "egresskit: ", says: "refused us, halted since",
			serve: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/first" {
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(http.StatusForbidden)
					io.WriteString(w, "<html><body>TestBot is not welcome here.</body></html>")
					return
				}
				notFoundRobots(w, r)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := mustMemory(hoststate.Config{Breaker: breaker.Config{FailureThreshold: 1}})
				c := &http.Client{Transport: mustChain(egresskit.Config{
					Base:       egresstest.NewHandlerTransport(http.HandlerFunc(tc.serve)),
					UserAgent:  "TestBot/1.0",
					Retry:      retry.Policy{MaxRetries: -1},
					Store:      store,
					OnEscalate: func(egresskit.Escalation) {},
				})}
				if tc.prime != "" {
					if status, err := get(c, "http://h.test"+tc.prime); err != nil || status < 400 {
						t.Fatalf("priming request = %d, %v; want the host's refusal or failure", status, err)
					}
				}
				status, err := get(c, "http://h.test/page")
				if err == nil {
					t.Fatalf("GET /page = %d, want an error", status)
				}
				for _, s := range []error{egresskit.ErrDisallowed, egresskit.ErrTryLater, egresskit.ErrHalted} {
					if got := errors.Is(err, s); got != (s == tc.want) {
						t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, s == tc.want)
					}
				}
				inner := innermost(err)
				if !strings.HasPrefix(inner, tc.prefix) || !strings.Contains(inner, tc.says) {
					t.Errorf("message %q, want it to start %q and say %q", inner, tc.prefix, tc.says)
				}
				if tc.want == egresskit.ErrHalted && strings.Contains(err.Error(), "breaker") {
					t.Errorf("a halt's error says %q: a halt is not an open breaker", err)
				}
				if at := egresskit.RetryAt(err); (tc.want == egresskit.ErrTryLater) != !at.IsZero() {
					t.Errorf("RetryAt = %v for %v", at, err)
				} else if !at.IsZero() && !at.After(time.Now()) {
					t.Errorf("RetryAt = %v, not after now (%v)", at, time.Now())
				}
				if tc.name == "open" && !errors.Is(err, egresskit.ErrOpen) {
					t.Errorf("an open breaker's error %v does not match ErrOpen", err)
				}
				if de, ok := errors.AsType[*robots.DisallowedError](err); ok && tc.want == egresskit.ErrTryLater && de.Source != robots.Unreachable {
					t.Errorf("robots.txt unreachable: Source = %v", de.Source)
				}
			})
		})
	}
}

// notFoundRobots answers 404 for robots.txt (every URL allowed) and 200
// for the rest.
func notFoundRobots(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	io.WriteString(w, "ok")
}

// innermost is the message of the typed error in err's chain that says
// what decided.
func innermost(err error) string {
	if e, ok := errors.AsType[*robots.DisallowedError](err); ok {
		return e.Error()
	}
	if e, ok := errors.AsType[*ratelimit.WaitError](err); ok {
		return e.Error()
	}
	if e, ok := errors.AsType[*breaker.OpenError](err); ok {
		return e.Error()
	}
	if e, ok := errors.AsType[*breaker.HaltError](err); ok {
		return e.Error()
	}
	return err.Error()
}
