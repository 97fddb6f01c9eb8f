package egresskit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// TestWaitingAttemptRechecksHost: attempt B is admitted while attempt A is
// in flight and waits 10s for its pacing token; A's answer then opens the
// breaker, halts the host or pauses it. B is not sent to an open or halted
// host (and its admission is recorded as Canceled, handed back); after a
// pause its admission, reckoned before the pause, is recorded as Canceled
// and taken again, so B goes out only when the pause is over.
func TestWaitingAttemptRechecksHost(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  func(w http.ResponseWriter) // A's answer
		wantErr error                       // B's error; nil: B is sent
		sentAt  time.Duration               // when B reaches the host, if sent
	}{
		{"breaker opens", func(w http.ResponseWriter) { http.Error(w, "down", http.StatusBadGateway) }, egresskit.ErrOpen, 0},
		{"host halts", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html>TestBot is not welcome here.</html>")
		}, egresskit.ErrHalted, 0},
		{"pause", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}, nil, 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				release := make(chan struct{})
				var mu sync.Mutex
				var sent []time.Duration
				s := newSite()
				s.handle("h.test", func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/a" {
						<-release
						tt.answer(w)
						return
					}
					mu.Lock()
					sent = append(sent, time.Since(start))
					mu.Unlock()
					io.WriteString(w, "ok")
				})
				cfg := fastConfig(s)
				cfg.Retry = retry.Policy{MaxRetries: -1}
				cfg.Store = mustMemory(hoststate.Config{
					Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: time.Hour},
					Limit:   ratelimit.Config{PerMinute: 6, Burst: 1}, // a token every 10s
				})
				var bEvents []telemetry.Event
				cfg.Observers = []telemetry.Observer{telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
					if strings.HasSuffix(e.URL, "/b") {
						mu.Lock()
						bEvents = append(bEvents, *e)
						mu.Unlock()
					}
				})}
				chain := mustChain(cfg)
				c := &http.Client{Transport: chain}
				done := make(chan struct{})
				go func() {
					defer close(done)
					if resp, err := c.Get("http://h.test/a"); err == nil {
						resp.Body.Close()
					}
				}()
				synctest.Wait() // A is in flight, holding the only token
				var errB error
				bStart := time.Now()
				bDone := make(chan struct{})
				go func() {
					defer close(bDone)
					_, errB = get(c, "http://h.test/b")
				}()
				synctest.Wait() // B waits for its token
				close(release)
				<-done
				<-bDone

				mu.Lock()
				defer mu.Unlock()
				if tt.wantErr != nil {
					if !errors.Is(errB, tt.wantErr) {
						t.Errorf("B: err = %v, want %v", errB, tt.wantErr)
					}
					if len(sent) != 0 {
						t.Errorf("B reached the host at %v; want it not sent", sent)
					}
					// The event of an attempt not sent is dated when it
					// started, and tells the wait it was given.
					if len(bEvents) != 1 || !bEvents[0].Time.Equal(bStart) || bEvents[0].Wait != 10*time.Second {
						t.Errorf("B's events: %+v; want one, dated %v, with its 10s wait", bEvents, bStart)
					}
				} else {
					if errB != nil {
						t.Errorf("B: %v, want it sent", errB)
					}
					if len(sent) != 1 || sent[0] < tt.sentAt {
						t.Errorf("B reached the host at %v, want once, not before %v (the pause's end)", sent, tt.sentAt)
					}
				}
				st, err := chain.Status(context.Background(), "h.test")
				if err != nil {
					t.Fatal(err)
				}
				if st.Recent.Canceled != 1 {
					t.Errorf("outcomes recorded: %v; want B's first admission recorded as Canceled once", st.Recent)
				}
			})
		})
	}
}
