package egresskit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// errStoreDown is the error of a store that cannot reach its shared state.
var errStoreDown = errors.New("store down")

// droppingStore is a store that keeps no local copy of a halt: while down,
// Record fails and changes nothing (Admit still answers).
type droppingStore struct {
	hoststate.Memory
	down atomic.Bool
}

func (s *droppingStore) Record(ctx context.Context, host string, a hoststate.Admission, r classify.Result) (hoststate.Effect, error) {
	if s.down.Load() {
		return hoststate.Effect{}, errStoreDown
	}
	return s.Memory.Record(ctx, host, a, r)
}

// TestHaltHeldWhenStoreDropsIt: a store that fails to record a refusal
// and keeps no copy of the halt does not lose it: the chain escalates it
// once, refuses the host without sending, puts the store's error in the
// attempt's event, offers the halt to the store again on each request
// until the store takes it, and Resume lifts it.
func TestHaltHeldWhenStoreDropsIt(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><body>Access denied: TestBot is blocked.</body></html>")
	}))
	defer srv.Close()
	st := &droppingStore{Memory: mustMemory(hoststate.Config{})}
	var escalations atomic.Int64
	var mu sync.Mutex // guards errs
	var errs []string
	tr := mustChain(egresskit.Config{
		Store: st, IgnoreRobots: true, UserAgent: "TestBot/1.0",
		Retry:      retry.Policy{MaxRetries: -1},
		OnEscalate: func(egresskit.Escalation) { escalations.Add(1) },
		Observers: []telemetry.Observer{telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
			mu.Lock()
			errs = append(errs, e.Err)
			mu.Unlock()
		})},
	})
	c := &http.Client{Transport: tr}
	key, _ := tr.HostKey(srv.URL)
	ctx := context.Background()

	st.down.Store(true)
	resp, err := c.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !egresskit.Halted(resp) {
		t.Fatal("Halted(403 naming the bot) = false")
	}
	mu.Lock()
	if len(errs) != 1 || !strings.Contains(errs[0], errStoreDown.Error()) {
		t.Errorf("event errors = %q, want the store's error", errs)
	}
	mu.Unlock()
	for range 2 {
		if _, err := c.Get(srv.URL + "/again"); !errors.Is(err, egresskit.ErrHalted) {
			t.Errorf("request with the store down: err = %v, want ErrHalted", err)
		}
	}
	if s, _ := st.Status(ctx, key); s.Halted {
		t.Fatal("the store took the halt while down")
	}

	st.down.Store(false)
	if _, err := c.Get(srv.URL + "/back"); !errors.Is(err, egresskit.ErrHalted) {
		t.Errorf("request with the store back: err = %v, want ErrHalted", err)
	}
	if s, _ := st.Status(ctx, key); !s.Halted {
		t.Error("the halt was not offered to the store when it came back")
	}
	if _, err := c.Get(srv.URL + "/store"); !errors.Is(err, egresskit.ErrHalted) {
		t.Errorf("request refused by the store: err = %v, want ErrHalted", err)
	}
	if n := escalations.Load(); n != 1 {
		t.Errorf("escalations = %d, want 1", n)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}

	if err := tr.Resume(ctx, key); err != nil {
		t.Fatal(err)
	}
	resp, err = c.Get(srv.URL + "/resumed")
	if err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	resp.Body.Close()
	if n := sent.Load(); n != 2 {
		t.Errorf("origin saw %d requests after Resume, want 2", n)
	}
}
