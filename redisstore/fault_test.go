package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// warnings collects the Warnings of a State.
type warnings struct {
	mu sync.Mutex // guards w
	w  []redisstore.Warning
}

func (w *warnings) add(x redisstore.Warning) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w = append(w.w, x)
}

func (w *warnings) kinds() []redisstore.WarningKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	var k []redisstore.WarningKind
	for _, x := range w.w {
		k = append(k, x.Kind)
	}
	return k
}

func (w *warnings) last() redisstore.Warning {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w[len(w.w)-1]
}

func sameKinds(a, b []redisstore.WarningKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func refuse(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, "<html>Access denied: TestBot is blocked.</html>")
}

func ok(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }

// TestFailOpenSurvivesRedisCrash kills the test's own redis-server in the
// middle of a crawl. Under FailOpen the crawl goes on, on local state, with
// one Outage warning; halts seen before the crash and made during it are
// enforced locally; after a restart (an empty Redis, as after a crash
// without persistence) the next try writes both halts back and the shared
// state is Redis's again.
func TestFailOpenSurvivesRedisCrash(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	clk := newClock()
	var warn warnings
	cfg := fleetConfig("crash")
	cfg.OnRedisError = redisstore.FailOpen
	cfg.Timeout = time.Second
	cfg.RetryInterval = time.Minute
	cfg.Now = clk.Now
	cfg.OnWarning = warn.add
	w := newWorker(t, srv.Addr, cfg)
	site, before, during := newOrigin(t, ok), newOrigin(t, refuse), newOrigin(t, refuse)

	for range 3 {
		if status, err := w.get(ctx, site.URL); status != 200 {
			t.Fatalf("before the crash: %d, %v", status, err)
		}
	}
	w.get(ctx, before.URL) // halted in Redis
	if _, err := w.get(ctx, before.URL); !errors.Is(err, sentinel.ErrHalted) {
		t.Fatalf("halted host before the crash: err = %v, want ErrHalted", err)
	}

	srv.Kill()
	for i := range 3 {
		if status, err := w.get(ctx, site.URL); status != 200 {
			t.Fatalf("request %d after the crash: %d, %v; want 200 from local state", i+1, status, err)
		}
	}
	if got := warn.kinds(); !sameKinds(got, []redisstore.WarningKind{redisstore.Outage}) {
		t.Fatalf("warnings = %v, want one Outage", got)
	}
	if werr := warn.last().Err; werr == nil {
		t.Error("Outage warning without the client's error")
	}
	if _, err := w.get(ctx, before.URL); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("host halted in Redis before the crash: err = %v, want ErrHalted from local state", err)
	}
	if status, _ := w.get(ctx, during.URL); status != 403 {
		t.Fatalf("refusing host during the crash: %d, want 403", status)
	}
	if _, err := w.get(ctx, during.URL); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("host halted during the crash: err = %v, want ErrHalted", err)
	}
	if st, err := w.state.Status(ctx, site.host()); err != nil || st.Recent.OK != 3 {
		t.Errorf("local State = %+v, %v; want the 3 OKs since the crash", st.Recent, err)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Until RetryInterval has passed, the State stays local.
	w.get(ctx, site.URL)
	if got := warn.kinds(); len(got) != 1 {
		t.Fatalf("warnings before RetryInterval = %v, want only Outage", got)
	}
	clk.Advance(time.Minute)
	if status, err := w.get(ctx, site.URL); status != 200 {
		t.Fatalf("after the restart: %d, %v", status, err)
	}
	if got := warn.kinds(); !sameKinds(got, []redisstore.WarningKind{redisstore.Outage, redisstore.Recovered}) {
		t.Fatalf("warnings = %v, want Outage then Recovered", got)
	}
	if r := warn.last(); r.Halts != 2 {
		t.Errorf("Recovered.Halts = %d, want 2 halts written back", r.Halts)
	}

	// Another worker sees what Redis holds now: both halts, and only the
	// OK sent since the return, once the worker sent the OK it held back.
	if err := w.state.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	obs := mustState(t, srv.Addr, cfg)
	for _, o := range []*origin{before, during} {
		if st, err := obs.Status(ctx, o.host()); err != nil || !st.Halted {
			t.Errorf("Redis after the re-sync: %s halted = %v, %v; want halted", o.host(), st.Halted, err)
		}
	}
	// Both halts are in the queue of halted hosts again: one lost with
	// Redis's data, one made while Redis was down.
	if q, err := obs.Halts(ctx, 0); err != nil || len(q) != 2 {
		t.Errorf("Halts after the re-sync = %+v, %v; want both hosts", q, err)
	}
	if st, err := obs.Status(ctx, site.host()); err != nil || st.Recent.OK != 1 {
		t.Errorf("Redis after the re-sync: recent %v, %v; want 1 OK (local state dropped)", st.Recent, err)
	}
	if n1, n2, n3 := site.n.Load(), before.n.Load(), during.n.Load(); n1 != 8 || n2 != 1 || n3 != 1 {
		t.Errorf("origins saw %d, %d, %d requests; want 8, 1, 1", n1, n2, n3)
	}
}

// TestFailOpenHungRedis: a paused (hung) server costs one Timeout, then the
// State runs locally.
func TestFailOpenHungRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	var warn warnings
	clk := newClock()
	st := mustState(t, srv.Addr, redisstore.Config{
		Prefix: "hung", Timeout: 100 * time.Millisecond, OnWarning: warn.add, Now: clk.Now,
		HostState: hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000, Burst: 10}},
	})
	if _, err := st.Admit(ctx, "a.example"); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	for range 3 {
		if _, err := st.Admit(ctx, "a.example"); err != nil {
			t.Fatalf("Admit with Redis hung = %v, want local admission", err)
		}
	}
	if got := warn.kinds(); !sameKinds(got, []redisstore.WarningKind{redisstore.Outage}) {
		t.Fatalf("warnings = %v, want one Outage", got)
	}
	if werr := warn.last().Err; !isTimeout(werr) {
		t.Errorf("Outage error = %v, want a timeout", werr)
	}
	srv.Resume()
	clk.Advance(time.Second)
	if _, err := st.Admit(ctx, "a.example"); err != nil {
		t.Fatal(err)
	}
	if got := warn.kinds(); !sameKinds(got, []redisstore.WarningKind{redisstore.Outage, redisstore.Recovered}) {
		t.Errorf("warnings = %v, want Outage then Recovered", got)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &te) && te.Timeout())
}

// TestFailClosed: with Redis down or hung, requests fail fast with
// ErrUnavailable and are not sent.
func TestFailClosed(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	cfg := fleetConfig("closed")
	cfg.Timeout = 100 * time.Millisecond
	w := newWorker(t, srv.Addr, cfg)
	site := newOrigin(t, ok)
	if status, err := w.get(ctx, site.URL); status != 200 {
		t.Fatalf("with Redis up: %d, %v", status, err)
	}

	srv.Pause()
	_, err := w.state.Admit(ctx, site.host())
	var ue *redisstore.UnavailableError
	// Bounded by the store's Timeout (100ms: the context deadline it sets
	// on the command), not by the client's 3s read timeout (a network
	// timeout, not the context's).
	if !errors.Is(err, redisstore.ErrUnavailable) || !errors.As(err, &ue) || !errors.Is(ue.Cause, context.DeadlineExceeded) {
		t.Errorf("Admit with Redis hung = %v, want *UnavailableError caused by the store's Timeout (context.DeadlineExceeded)", err)
	}
	srv.Resume()

	srv.Kill()
	for range 3 {
		if _, err := w.get(ctx, site.URL); !errors.Is(err, redisstore.ErrUnavailable) {
			t.Errorf("request with Redis down: err = %v, want ErrUnavailable", err)
		}
	}
	if _, err := w.state.Status(ctx, site.host()); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("State with Redis down = %v, want ErrUnavailable", err)
	}
	if got := site.n.Load(); got != 1 {
		t.Errorf("origin saw %d requests, want 1", got)
	}
}

// TestResumeNeedsRedis: Resume fails with ErrUnavailable under FailOpen
// too, and then the halt is still enforced.
func TestResumeNeedsRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	st := mustState(t, srv.Addr, redisstore.Config{Prefix: "resume", Timeout: time.Second})
	a, err := st.Admit(ctx, "a.example")
	if err != nil {
		t.Fatal(err)
	}
	if eff, err := st.Record(ctx, "a.example", a, classify.Result{Outcome: classify.Refused}); err != nil || !eff.Halted {
		t.Fatalf("Record(Refused) = %+v, %v", eff, err)
	}
	srv.Kill()
	if err := st.Resume(ctx, "a.example"); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("Resume with Redis down = %v, want ErrUnavailable", err)
	}
	if _, err := st.Admit(ctx, "a.example"); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("Admit after a failed Resume = %v, want ErrHalted", err)
	}
}

// TestScriptFlushMidCrawl: SCRIPT FLUSH between requests (as after a
// restart or failover) costs a reload, not an error; the breaker keeps
// counting across it.
func TestScriptFlushMidCrawl(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := redistest.Dial(t, srv.Addr)
	w := newWorker(t, srv.Addr, fleetConfig("flush"))
	site := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	for range 4 {
		if status, err := w.get(ctx, site.URL); status != 503 {
			t.Fatalf("%d, %v; want 503", status, err)
		}
	}
	evals := commandCalls(t, admin, "eval")
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if status, err := w.get(ctx, site.URL); status != 503 {
			t.Fatalf("after SCRIPT FLUSH: %d, %v; want 503", status, err)
		}
	}
	if _, err := w.get(ctx, site.URL); !errors.Is(err, sentinel.ErrOpen) {
		t.Errorf("9th request: err = %v, want ErrOpen (8 failures across the flush)", err)
	}
	if got := commandCalls(t, admin, "eval") - evals; got != 2 {
		t.Errorf("EVAL calls after the flush = %d, want 2 (one reload each of admit and record)", got)
	}
	if got := site.n.Load(); got != 8 {
		t.Errorf("origin saw %d requests, want 8", got)
	}
}

// commandCalls reads the calls of cmd from INFO commandstats.
func commandCalls(t testing.TB, c redis.UniversalClient, cmd string) int {
	t.Helper()
	return parseCalls(infoStats(t, c), cmd)
}

// infoStats returns INFO commandstats.
func infoStats(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// parseCalls finds "cmdstat_CMD:calls=N," in an INFO commandstats reply.
func parseCalls(info, cmd string) int {
	for line := range strings.Lines(info) {
		if rest, found := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); found {
			return leadingInt(rest)
		}
	}
	return 0
}

// totalCalls sums the calls of every command in an INFO commandstats reply.
func totalCalls(info string) int {
	n := 0
	for line := range strings.Lines(info) {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		if _, rest, found := strings.Cut(line, ":calls="); found {
			n += leadingInt(rest)
		}
	}
	return n
}

func leadingInt(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
