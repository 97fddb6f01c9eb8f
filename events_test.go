package egresskit_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// recorder keeps a copy of every event.
type recorder struct {
	mu     sync.Mutex // guards events
	events []telemetry.Event
}

func (r *recorder) Observe(_ context.Context, e *telemetry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *e
	c.Markers = append([]string(nil), e.Markers...)
	r.events = append(r.events, c)
}

func TestOneEventPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		var n atomic.Int32
		s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
			switch n.Add(1) {
			case 1:
				http.Error(w, "busy", http.StatusServiceUnavailable)
			case 2:
				w.Header().Set("Retry-After", "2")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			default:
				io.WriteString(w, "ok")
			}
		})
		rec := &recorder{}
		cfg := fastConfig(s)
		cfg.Observers = []telemetry.Observer{rec}
		c := &http.Client{Transport: mustChain(cfg)}
		if status, err := get(c, "http://a.test/p?api_key=k3y"); err != nil || status != 200 {
			t.Fatalf("get = %d, %v", status, err)
		}
		want := []struct {
			status  int
			outcome classify.Outcome
			final   bool
		}{
			{503, classify.Transient, false},
			{429, classify.Throttled, false},
			{200, classify.OK, true},
		}
		if len(rec.events) != len(want) {
			t.Fatalf("got %d events, want %d: %+v", len(rec.events), len(want), rec.events)
		}
		for i, w := range want {
			e := rec.events[i]
			if e.Attempt != i+1 || e.Retries != i || e.Status != w.status || e.Outcome != w.outcome || e.Final != w.final {
				t.Errorf("event %d = attempt %d retries %d status %d outcome %v final %v; want %d %d %d %v %v",
					i, e.Attempt, e.Retries, e.Status, e.Outcome, e.Final, i+1, i, w.status, w.outcome, w.final)
			}
			if e.Host != "a.test" || e.Method != "GET" || e.Time.IsZero() || e.Breaker != "closed" {
				t.Errorf("event %d = %+v: host, method, time or breaker unset", i, e)
			}
			if strings.Contains(e.URL, "k3y") || !strings.HasPrefix(e.URL, "http://a.test/p") {
				t.Errorf("event %d URL = %q, want redacted", i, e.URL)
			}
		}
		// The third attempt waited for the Retry-After pause in the pacing
		// layer or the retry layer; either way the pause was honoured.
		if d := rec.events[2].Time.Sub(rec.events[1].Time); d < 2*time.Second {
			t.Errorf("third attempt %v after the 429, want >= 2s", d)
		}
	})
}

func TestEventsForRequestsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.handle("x.test", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "TestBot is blocked")
		})
		rec := &recorder{}
		cfg := fastConfig(s)
		cfg.Observers = []telemetry.Observer{rec}
		c := &http.Client{Transport: mustChain(cfg)}
		get(c, "http://x.test/1")
		get(c, "http://x.test/2")
		if len(rec.events) != 2 {
			t.Fatalf("got %d events, want 2", len(rec.events))
		}
		first, second := rec.events[0], rec.events[1]
		if first.Outcome != classify.Refused || first.Breaker != "halted" || !first.Final {
			t.Errorf("refusal event = %+v", first)
		}
		if second.Status != 0 || second.Breaker != "halted" || second.Err == "" || !second.Final || second.Duration != 0 {
			t.Errorf("not-sent event = %+v", second)
		}
	})
}

func TestChainRaceManyHosts(t *testing.T) {
	s := newSite()
	cfg := fastConfig(s)
	cfg.Retry = retry.Policy{MaxRetries: 1, BaseDelay: -1}
	var failing atomic.Int64
	handler := func(w http.ResponseWriter, r *http.Request) {
		if failing.Add(1)%7 == 0 {
			http.Error(w, "flaky", http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok")
	}
	const hosts = 1000
	for i := range hosts {
		s.handle(hostName(i), handler)
	}
	c := &http.Client{Transport: mustChain(cfg)}
	var wg sync.WaitGroup
	var errs atomic.Int64
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if _, err := get(c, "http://"+hostName((g*100+i)%hosts)+"/"); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Errorf("%d requests failed", errs.Load())
	}
}

func hostName(i int) string {
	return "h" + strconv.Itoa(i) + ".test"
}
