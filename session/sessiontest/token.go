package sessiontest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/internal/peek"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// tokenServer issues tokens on POST /token and serves GET /api to the
// holders of a valid one. It counts both.
type tokenServer struct {
	*httptest.Server
	mu      sync.Mutex // guards the fields below
	valid   map[string]bool
	issued  int
	served  int
	refused int
	fail    bool
}

func newTokenServer(initial string) *tokenServer {
	ts := &tokenServer{valid: map[string]bool{}}
	if initial != "" {
		ts.valid[initial] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.fail {
			http.Error(w, "token service down", http.StatusServiceUnavailable)
			return
		}
		ts.issued++
		tok := fmt.Sprint("issued-", ts.issued)
		ts.valid[tok] = true
		fmt.Fprint(w, tok)
	})
	mux.HandleFunc("GET /api", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if !ts.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
			ts.refused++
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		ts.served++
	})
	ts.Server = httptest.NewServer(mux)
	return ts
}

// refresher returns a Config.Refresh that asks ts for a token valid for an
// hour of clock's time.
func (ts *tokenServer) refresher(now func() time.Time) func(context.Context, string, session.Token) (session.Token, error) {
	return func(ctx context.Context, id string, cur session.Token) (session.Token, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/token", nil)
		if err != nil {
			return session.Token{}, err
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			return session.Token{}, err
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := fmt.Fprint(&b, readAll(resp)); err != nil {
			return session.Token{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return session.Token{}, fmt.Errorf("token endpoint: %s", resp.Status)
		}
		return session.Token{Type: "Bearer", Value: session.Secret(b.String()), Expires: now().Add(time.Hour)}, nil
	}
}

func readAll(resp *http.Response) string {
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// managerTokenRefreshOnce stores a token valid for 40s (due for refresh
// after 20s with the default skew), lets elapsed pass, and sends 32
// concurrent requests through two Managers.
func managerTokenRefreshOnce(t *testing.T, e env, elapsed time.Duration) {
	ts := newTokenServer("initial")
	defer ts.Close()
	ms := managers(t, e, 2, func(c *session.Config) {
		c.Refresh = ts.refresher(e.clock.Now)
		c.PollInterval = time.Millisecond
	})
	id := newSession(t, ms[0], session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "initial", Expires: e.clock.Now().Add(40 * time.Second)},
	})
	e.clock.Advance(elapsed)
	if elapsed >= 40*time.Second {
		ts.valid["initial"] = false // an expired token is refused
	}

	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		client := &http.Client{Transport: ms[i%2].Transport(ts.Client().Transport, id)}
		wg.Go(func() {
			resp, err := client.Get(ts.URL + "/api")
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request = %v, want 200", err)
	}
	ts.mu.Lock()
	issued, served, refused := ts.issued, ts.served, ts.refused
	ts.mu.Unlock()
	if issued != 1 || served != n || refused != 0 {
		t.Errorf("refreshes %d, served %d, refused %d; want 1, %d, 0", issued, served, refused, n)
	}
	s, err := ms[1].Get(context.Background(), id)
	if err != nil || s.Token.Value != "issued-1" || s.Lease.Token != 0 {
		t.Errorf("stored token %v, lease %+v, %v; want issued-1 and the refresh lease released", s.Token, s.Lease, err)
	}
}

// managerShortToken: a token that lives less than the refresh skew is
// refreshed halfway through its life, not on every request.
func managerShortToken(t *testing.T, e env) {
	ts := newTokenServer("initial")
	defer ts.Close()
	m := managers(t, e, 1, func(c *session.Config) {
		c.Refresh = func(ctx context.Context, id string, cur session.Token) (session.Token, error) {
			tok, err := ts.refresher(e.clock.Now)(ctx, id, cur)
			tok.Expires = e.clock.Now().Add(10 * time.Second) // shorter than the 30s skew
			return tok, err
		}
	})[0]
	id := newSession(t, m, session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "initial", Expires: e.clock.Now().Add(10 * time.Second)},
	})
	client := &http.Client{Transport: m.Transport(ts.Client().Transport, id)}
	// Requests at 0s, 3s, 6s, 9s and 12s; the first token is due at 5s,
	// the one refreshed at 6s (expiring at 16s) is due at 11s.
	for range 5 {
		for range 3 {
			resp, err := client.Get(ts.URL + "/api")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		e.clock.Advance(3 * time.Second)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.issued != 2 || ts.served != 15 {
		t.Errorf("refreshes %d, served %d; want 2, 15", ts.issued, ts.served)
	}
}

// gatedStore holds Acquire calls until its gate opens.
type gatedStore struct {
	sessionstore.Store
	gate    chan struct{}
	waiting chan struct{} // receives once per held Acquire
}

func (g *gatedStore) Acquire(ctx context.Context, id, holder string, ttl time.Duration) (sessionstore.Lease, error) {
	g.waiting <- struct{}{}
	<-g.gate
	return g.Store.Acquire(ctx, id, holder, ttl)
}

// managerTokenRefreshedMeanwhile: worker B reads an expired token, worker
// A refreshes it before B takes the lease; B must use A's token, not
// refresh again.
func managerTokenRefreshedMeanwhile(t *testing.T, e env) {
	ts := newTokenServer("")
	defer ts.Close()
	tweak := func(c *session.Config) {
		c.Refresh = ts.refresher(e.clock.Now)
		c.PollInterval = time.Millisecond
	}
	a := managers(t, e, 1, tweak)[0]
	gated := &gatedStore{Store: e.store, gate: make(chan struct{}), waiting: make(chan struct{}, 1)}
	e.store = gated
	b := managers(t, e, 1, tweak)[0]
	id := newSession(t, a, session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "expired", Expires: e.clock.Now().Add(-time.Second)},
	})

	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: b.Transport(ts.Client().Transport, id)}).Get(ts.URL + "/api")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	select {
	case <-gated.waiting: // B has read the expired token and wants the lease
	case err := <-done:
		t.Fatalf("worker B returned %v before taking the lease", err)
	}
	resp, err := (&http.Client{Transport: a.Transport(ts.Client().Transport, id)}).Get(ts.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(gated.gate)
	if err := <-done; err != nil {
		t.Errorf("worker B = %v, want 200", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.issued != 1 || ts.served != 2 {
		t.Errorf("refreshes %d, served %d; want 1, 2", ts.issued, ts.served)
	}
}

func managerTokenRefreshFailure(t *testing.T, e env) {
	ts := newTokenServer("")
	defer ts.Close()
	ts.fail = true
	m := managers(t, e, 1, func(c *session.Config) {
		c.Refresh = ts.refresher(e.clock.Now)
		c.PollInterval = time.Millisecond
	})[0]
	id := newSession(t, m, session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "stale-token-value", Expires: e.clock.Now().Add(-time.Second)},
	})
	client := &http.Client{Transport: m.Transport(ts.Client().Transport, id)}
	resp, err := client.Get(ts.URL + "/api")
	if err == nil {
		resp.Body.Close()
	}
	if rid, ok := peek.Refresh(err); !ok || rid != id {
		t.Errorf("GET with an unrefreshable expired token = %v, want a failed refresh of %q", err, id)
	}
	if err != nil && strings.Contains(err.Error(), "stale-token-value") {
		t.Errorf("error %q holds the token value", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.served+ts.refused != 0 {
		t.Errorf("the server received %d requests, want 0: never send a stale token", ts.served+ts.refused)
	}
}
