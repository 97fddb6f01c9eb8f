package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/session"
)

// recorder is a RoundTripper that records what it is given and answers
// with err, or 200.
type recorder struct {
	calls atomic.Int32
	last  atomic.Pointer[http.Request]
	err   error
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.calls.Add(1)
	r.last.Store(req)
	if req.Body != nil {
		req.Body.Close()
	}
	if r.err != nil {
		return nil, r.err
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// closeCounter is a request body that counts Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func TestTransportAppliesSession(t *testing.T) {
	ctx := context.Background()
	m := mustManager(session.Config{})
	if _, err := m.Create(ctx, "s1", session.CreateOptions{
		Endpoint: "ep-7",
		Header:   http.Header{"User-Agent": {"session-agent"}, "X-Tenant": {"t1"}},
		Token:    session.Token{Type: "Bearer", Value: "tok"},
	}); err != nil {
		t.Fatal(err)
	}
	next := &recorder{}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/", nil)
	req.Header.Set("User-Agent", "caller-agent")
	resp, err := m.Transport(next, "s1").RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sent := next.last.Load()
	for k, want := range map[string]string{"User-Agent": "caller-agent", "X-Tenant": "t1", "Authorization": "Bearer tok"} {
		if got := sent.Header.Get(k); got != want {
			t.Errorf("sent %s = %q, want %q", k, got, want)
		}
	}
	if req.Header.Get("Authorization") != "" || req.Header.Get("X-Tenant") != "" {
		t.Errorf("the caller's request was modified: %v", req.Header)
	}
	// The binding travels in the context; egress reads it. The context's
	// description names the value it carries.
	if s := fmt.Sprint(sent.Context()); !strings.Contains(s, "ep-7") {
		t.Errorf("request context %s does not carry the egress binding", s)
	}
}

func TestTransportEgressLost(t *testing.T) {
	ctx := context.Background()
	m := mustManager(session.Config{})
	if _, err := m.Create(ctx, "s1", session.CreateOptions{Endpoint: "ep-gone"}); err != nil {
		t.Fatal(err)
	}
	next := &recorder{err: fmt.Errorf("egress: endpoint %q: %w", "ep-gone", egress.ErrBindingUnavailable)}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/", nil)
	_, err := m.Transport(next, "s1").RoundTrip(req)
	var lost *session.EgressLostError
	if !errors.As(err, &lost) || !errors.Is(err, session.ErrEgressLost) || !errors.Is(err, egress.ErrBindingUnavailable) || lost.Endpoint != "ep-gone" {
		t.Fatalf("RoundTrip with the bound endpoint gone = %v, want *EgressLostError for ep-gone", err)
	}
	if n := next.calls.Load(); n != 1 {
		t.Errorf("next called %d times, want 1: never retried through another endpoint", n)
	}
	// The caller's explicit choice: rebind, and the request goes.
	if err := m.Rebind(ctx, "s1", "ep-new"); err != nil {
		t.Fatal(err)
	}
	next.err = nil
	resp, err := m.Transport(next, "s1").RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip after Rebind = %v", err)
	}
	resp.Body.Close()
	if s := fmt.Sprint(next.last.Load().Context()); !strings.Contains(s, "ep-new") {
		t.Errorf("after Rebind the context %s does not carry ep-new", s)
	}
}

func TestTransportFailsBeforeSending(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := mustManager(session.Config{Now: func() time.Time { return now }, RefreshSkew: time.Minute})
	if _, err := m.Create(ctx, "expired", session.CreateOptions{Token: session.Token{Value: "v", Expires: now.Add(-time.Second)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "soon", session.CreateOptions{Token: session.Token{Value: "v", Expires: now.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want error
	}{
		{"expired", session.ErrNoRefresher},
		{"unknown", session.ErrNotFound},
		{"bad\nid", session.ErrInvalidID},
	} {
		next := &recorder{}
		body := &closeCounter{Reader: strings.NewReader("payload")}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://example.com/", body)
		_, err := m.Transport(next, tc.id).RoundTrip(req)
		if !errors.Is(err, tc.want) {
			t.Errorf("RoundTrip(%q) = %v, want %v", tc.id, err, tc.want)
		}
		if next.calls.Load() != 0 || body.closed.Load() != 1 {
			t.Errorf("RoundTrip(%q): next called %d times, body closed %d times; want 0, 1", tc.id, next.calls.Load(), body.closed.Load())
		}
	}
	// Without a refresher, a token close to expiry is still used until it expires.
	next := &recorder{}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/", nil)
	resp, err := m.Transport(next, "soon").RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip(valid token near expiry, no refresher) = %v", err)
	}
	resp.Body.Close()
}

// TestRefreshWaitHonoursContext: a worker whose token has expired waits
// for the lease holder to refresh it, but no longer than its context.
func TestRefreshWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var refreshes atomic.Int32
		m := mustManager(session.Config{
			PollInterval: 100 * time.Millisecond,
			Refresh: func(context.Context, string, session.Token) (session.Token, error) {
				refreshes.Add(1)
				return session.Token{Value: "new", Expires: time.Now().Add(time.Hour)}, nil
			},
		})
		if _, err := m.Create(ctx, "s1", session.CreateOptions{Token: session.Token{Value: "old", Expires: time.Now().Add(-time.Second)}}); err != nil {
			t.Fatal(err)
		}
		// Another worker holds the session for a long multi-step flow.
		held, err := m.Acquire(ctx, "s1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		next := &recorder{}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "https://example.com/", nil)
		start := time.Now()
		_, err = m.Transport(next, "s1").RoundTrip(req)
		var re *session.RefreshError
		if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RoundTrip while another worker holds the lease = %v, want *RefreshError wrapping DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("waited %v, want 2s", waited)
		}
		if refreshes.Load() != 0 || next.calls.Load() != 0 {
			t.Errorf("refreshes %d, requests %d; want 0, 0", refreshes.Load(), next.calls.Load())
		}
		// The holder itself refreshes under its own lease.
		req, _ = http.NewRequestWithContext(session.WithLease(ctx, held), http.MethodGet, "https://example.com/", nil)
		resp, err := m.Transport(next, "s1").RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip under the holder's lease = %v", err)
		}
		resp.Body.Close()
		if got := next.last.Load().Header.Get("Authorization"); got != "new" || refreshes.Load() != 1 {
			t.Errorf("holder sent Authorization %q after %d refreshes; want new, 1", got, refreshes.Load())
		}
	})
}

// TestRefreshThroughOwnTransport: a refresher that calls the token
// endpoint through the session's own client (its cookies, its egress
// endpoint) neither deadlocks nor sends the expired token.
func TestRefreshThroughOwnTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		next := &recorder{}
		var m *session.Manager
		var tokenCallAuth string
		m = mustManager(session.Config{
			Refresh: func(ctx context.Context, id string, cur session.Token) (session.Token, error) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://example.com/token", strings.NewReader("refresh="+string(cur.Refresh)))
				resp, err := m.Transport(next, id).RoundTrip(req)
				if err != nil {
					return session.Token{}, err
				}
				resp.Body.Close()
				tokenCallAuth = next.last.Load().Header.Get("Authorization")
				return session.Token{Value: "new", Expires: time.Now().Add(time.Hour)}, nil
			},
		})
		if _, err := m.Create(ctx, "s1", session.CreateOptions{Endpoint: "ep-1", Token: session.Token{Value: "old", Refresh: "r", Expires: time.Now().Add(-time.Second)}}); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/api", nil)
		resp, err := m.Transport(next, "s1").RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		resp.Body.Close()
		if got := next.last.Load().Header.Get("Authorization"); tokenCallAuth != "" || got != "new" {
			t.Errorf("token call sent Authorization %q, API call %q; want none, new", tokenCallAuth, got)
		}
	})
}
