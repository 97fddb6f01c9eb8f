package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// restoredHosts returns the hosts of the Restored warnings.
func (w *warnings) restoredHosts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var hosts []string
	for _, x := range w.w {
		if x.Kind == redisstore.Restored {
			hosts = append(hosts, x.Hosts...)
		}
	}
	return hosts
}

// TestHaltSurvivesRedisRestart: a host halted through a chain stays
// halted when Redis is killed (SIGKILL) and restarted empty, for the chain
// that saw the refusal and for one that saw the halt only through Redis:
// the next 5 requests of each reach the host 0 times, the escalation hook
// ran once in all, and a Restored warning names the host. A third chain,
// started after the restart and never told of the halt, is refused too
// once the halt is written back. Under both policies.
func TestHaltSurvivesRedisRestart(t *testing.T) {
	for _, policy := range []redisstore.ErrorPolicy{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t)
			cfg := fleetConfig("restart")
			cfg.OnRedisError = policy
			var warnA, warnB warnings
			cfgA, cfgB := cfg, cfg
			cfgA.OnWarning, cfgB.OnWarning = warnA.add, warnB.add
			a, b := newWorker(t, srv.Addr, cfgA), newWorker(t, srv.Addr, cfgB)
			site := newOrigin(t, refuse)

			if status, err := a.get(ctx, site.URL); status != 403 {
				t.Fatalf("refusing host: %d, %v; want 403", status, err)
			}
			if _, err := b.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
				t.Fatalf("second chain before the restart: err = %v, want ErrHalted", err)
			}

			srv.Kill()
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			for name, w := range map[string]*worker{"halting chain": a, "second chain": b} {
				for i := range 5 {
					if _, err := w.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
						t.Errorf("%s, request %d after the restart: err = %v, want ErrHalted", name, i+1, err)
					}
				}
			}
			if got := site.n.Load(); got != 1 {
				t.Errorf("host reached %d times, want 1 (the refusal)", got)
			}
			if got := a.escalations.Load() + b.escalations.Load(); got != 1 {
				t.Errorf("escalations = %d, want 1", got)
			}
			// The first chain to ask wrote the halt back; which one is
			// a matter of map order.
			restored := append(warnA.restoredHosts(), warnB.restoredHosts()...)
			if !slices.Equal(restored, []string{site.host()}) {
				t.Errorf("Restored warnings name %v, want [%s] once", restored, site.host())
			}

			c := newWorker(t, srv.Addr, cfg)
			if _, err := c.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
				t.Errorf("chain started after the restart: err = %v, want ErrHalted", err)
			}
			if got := site.n.Load(); got != 1 {
				t.Errorf("host reached %d times, want 1", got)
			}
		})
	}
}

// TestWatchRestoresIdleHalts: a worker that is idle when Redis restarts
// empty writes its halts back within one CheckInterval while Watch runs,
// so that a worker that never saw the halt is refused too.
func TestWatchRestoresIdleHalts(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	restored := make(chan redisstore.Warning, 4)
	cfg := fleetConfig("watch")
	cfg.CheckInterval = 20 * time.Millisecond
	cfg.OnWarning = func(w redisstore.Warning) {
		if w.Kind == redisstore.Restored {
			restored <- w
		}
	}
	a := newWorker(t, srv.Addr, cfg)
	site := newOrigin(t, refuse)
	if status, err := a.get(ctx, site.URL); status != 403 {
		t.Fatalf("refusing host: %d, %v; want 403", status, err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.state.Watch(wctx) }()
	defer func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch = %v, want context.Canceled", err)
		}
	}()

	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-restored:
		if w.Op != "watch" || w.Halts != 1 || !slices.Equal(w.Hosts, []string{site.host()}) || len(w.Servers) != 1 || w.Servers[0] != srv.Addr {
			t.Errorf("Restored warning = %+v, want op watch, 1 halt of %s, server %s", w, site.host(), srv.Addr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no Restored warning within 30s of the restart")
	}
	other := newWorker(t, srv.Addr, fleetConfig("watch"))
	if _, err := other.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("worker that never saw the halt: err = %v, want ErrHalted", err)
	}
	if got := site.n.Load(); got != 1 {
		t.Errorf("host reached %d times, want 1", got)
	}
}

// TestResumeStandsAfterRestart: a halt resumed by one worker is not
// written back by another that still remembers it, across a restart with
// data loss of everything but the resume (a replica that had it), nor
// when Redis admits the host again.
func TestResumeStandsAfterRestart(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := fleetConfig(redistest.Prefix(t))
	a, err := redisstore.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisstore.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const host = "resumed.example"
	adm, err := a.Admit(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if eff, err := a.Record(ctx, host, adm, classify.Result{Outcome: classify.Refused}); err != nil || !eff.Halted {
		t.Fatalf("Record(Refused) = %+v, %v", eff, err)
	}
	if _, err := b.Admit(ctx, host); !errors.Is(err, sentinel.ErrHalted) {
		t.Fatalf("b.Admit = %v, want ErrHalted", err)
	}
	if err := a.Resume(ctx, host); err != nil {
		t.Fatal(err)
	}
	// b remembers the halt; Redis admits the host: b sees the resume.
	for range 2 {
		if _, err := b.Admit(ctx, host); err != nil {
			t.Errorf("b.Admit after a's Resume = %v, want admitted", err)
		}
	}
	st, err := a.Status(ctx, host)
	if err != nil || st.Halted {
		t.Errorf("State after Resume = halted %v, %v; want not halted", st.Halted, err)
	}

	// A halt lost from Redis (deleted behind the store's back, as a
	// restart would) is written back by the worker that remembers it.
	const lost = "lost.example"
	adm, _ = a.Admit(ctx, lost)
	a.Record(ctx, lost, adm, classify.Result{Outcome: classify.Refused})
	_, haltKey, _ := redisstore.KeysOf(a, lost)
	if err := client.Del(ctx, haltKey).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Admit(ctx, lost); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("Admit of a halt Redis lost = %v, want ErrHalted", err)
	}
	if n, err := client.Exists(ctx, haltKey).Result(); err != nil || n != 1 {
		t.Errorf("halt key after the write-back: exists %d, %v; want 1", n, err)
	}
}

// TestNewRefusesEvictingRedis: New refuses a Redis whose maxmemory-policy
// may evict a halt, naming the policy, unless AllowEviction accepts it
// (with a Warning); volatile-* and noeviction are accepted silently. When
// CONFIG GET is refused (an ACL user without +config), New warns and goes
// on.
func TestNewRefusesEvictingRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := redistest.Dial(t, srv.Addr)
	tests := []struct {
		policy string
		allow  bool
		refuse bool
		warn   bool
	}{
		{"noeviction", false, false, false},
		{"volatile-lru", false, false, false},
		{"volatile-ttl", false, false, false},
		{"allkeys-lru", false, true, false},
		{"allkeys-lfu", false, true, false},
		{"allkeys-random", false, true, false},
		{"allkeys-lru", true, false, true},
	}
	for _, tt := range tests {
		if err := admin.ConfigSet(ctx, "maxmemory-policy", tt.policy).Err(); err != nil {
			t.Fatal(err)
		}
		var warn warnings
		cfg := fleetConfig("evict")
		cfg.AllowEviction = tt.allow
		cfg.OnWarning = warn.add
		st, err := redisstore.New(redistest.Dial(t, srv.Addr), cfg)
		var ee *redisstore.EvictionError
		if tt.refuse {
			if st != nil || !errors.Is(err, redisstore.ErrEvicting) || !errors.As(err, &ee) || ee.Policy != tt.policy || ee.Addr != srv.Addr ||
				!strings.Contains(err.Error(), tt.policy) {
				t.Errorf("New on %s = %v, %v; want an *EvictionError naming the policy", tt.policy, st, err)
			}
			continue
		}
		if err != nil || st == nil {
			t.Errorf("New on %s (allow %v) = %v, want a State", tt.policy, tt.allow, err)
			continue
		}
		got := warn.kinds()
		switch {
		case tt.warn && (!sameKinds(got, []redisstore.WarningKind{redisstore.Unchecked}) || !errors.As(warn.last().Err, &ee)):
			t.Errorf("New on %s with AllowEviction: warnings %v (%v), want one Unchecked with the *EvictionError", tt.policy, got, warn.w)
		case !tt.warn && len(got) != 0:
			t.Errorf("New on %s: warnings %v, want none", tt.policy, got)
		}
	}

	// An ACL user without +config: CONFIG GET is refused; New warns and
	// goes on, and the State works.
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "worker", "on", ">worker-pass", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	opt, _ := redistest.Options(srv.Addr)
	opt.Username, opt.Password = "worker", "worker-pass"
	c := redis.NewClient(opt)
	defer c.Close()
	var warn warnings
	cfg := fleetConfig("acl")
	cfg.OnWarning = warn.add
	st, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatalf("New without CONFIG permission = %v, want a State", err)
	}
	if got := warn.kinds(); !sameKinds(got, []redisstore.WarningKind{redisstore.Unchecked}) || warn.last().Op != "config" ||
		!strings.Contains(warn.last().Err.Error(), "NOPERM") {
		t.Errorf("warnings = %v, want one Unchecked for config with the NOPERM error", warn.w)
	}
	if _, err := st.Admit(ctx, "acl.example"); err != nil {
		t.Errorf("Admit as the ACL user = %v", err)
	}

	// A policy changed to an evicting one after New is reported by the
	// next check.
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	var later warnings
	cfg = fleetConfig("later")
	cfg.Now, cfg.CheckInterval, cfg.OnWarning = clk.Now, time.Minute, later.add
	st, err = redisstore.New(redistest.Dial(t, srv.Addr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lfu").Err(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := st.Admit(ctx, "later.example"); err != nil {
		t.Fatal(err)
	}
	var ee *redisstore.EvictionError
	if got := later.kinds(); !sameKinds(got, []redisstore.WarningKind{redisstore.Unchecked}) || !errors.As(later.last().Err, &ee) || ee.Policy != "allkeys-lfu" {
		t.Errorf("warnings after the policy became allkeys-lfu = %v, want one Unchecked with an *EvictionError", later.w)
	}
}

// TestJournal: a worker restarted together with Redis (killed, restarted
// empty) remembers its halts through Config.Journal: the new worker's
// chain does not reach the host in 5 requests, and its New writes the
// halt back, so a worker without a journal is refused too. A resume is
// journaled as well; a journal holding a line it did not write is
// refused by New, a last line cut short is not.
func TestJournal(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "halts")
	var warn warnings
	cfg := fleetConfig("journal")
	cfg.Journal = path
	cfg.OnWarning = warn.add
	a := newWorker(t, srv.Addr, cfg)
	site := newOrigin(t, refuse)
	if status, err := a.get(ctx, site.URL); status != 403 {
		t.Fatalf("refusing host: %d, %v; want 403", status, err)
	}

	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	b := newWorker(t, srv.Addr, cfg) // the restarted worker
	for i := range 5 {
		if _, err := b.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
			t.Errorf("restarted worker, request %d: err = %v, want ErrHalted", i+1, err)
		}
	}
	if got := warn.restoredHosts(); !slices.Equal(got, []string{site.host()}) {
		t.Errorf("Restored warnings name %v, want [%s]", got, site.host())
	}
	other := newWorker(t, srv.Addr, fleetConfig("journal"))
	if _, err := other.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("worker without a journal: err = %v, want ErrHalted", err)
	}
	if got, esc := site.n.Load(), a.escalations.Load()+b.escalations.Load()+other.escalations.Load(); got != 1 || esc != 1 {
		t.Errorf("host reached %d times, %d escalations; want 1, 1", got, esc)
	}

	// Resumed: the journal forgets the halt, and a worker started from it
	// does not write it back after another loss.
	if err := b.state.Resume(ctx, site.host()); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	site.handle(ok)
	c := newWorker(t, srv.Addr, cfg)
	if status, err := c.get(ctx, site.URL); status != 200 {
		t.Errorf("after Resume and another restart: %d, %v; want 200", status, err)
	}

	for _, tt := range []struct {
		content   string
		line      int    // 0: accepted
		compacted string // the file after New, when accepted
	}{
		{"H 1700000000000000 a.example\nR a.example\nH 1700000000000001 b.example:8080\n", 0, "H 1700000000000001 b.example:8080\n"},
		{"H 1700000000000000 a.example\nH 17000", 0, "H 1700000000000000 a.example\n"}, // torn last line
		{"H 1700000000000000 a.example\nX b.example\n", 2, ""},
		{"H soon a.example\n", 1, ""},
		{"H 1700000000000000 bad{host}\n", 1, ""},
		{"R \n", 1, ""},
	} {
		p := filepath.Join(t.TempDir(), "j")
		if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := fleetConfig(redistest.Prefix(t))
		cfg.Journal = p
		st, err := redisstore.New(redistest.Client(t), cfg)
		var je *redisstore.JournalError
		switch {
		case tt.line == 0 && err != nil:
			t.Errorf("journal %q: New = %v, want accepted", tt.content, err)
		case tt.line == 0:
			if b, _ := os.ReadFile(p); string(b) != tt.compacted {
				t.Errorf("journal %q after New: %q, want %q", tt.content, b, tt.compacted)
			}
			host := strings.Fields(tt.compacted)[2]
			if s, err := st.Status(ctx, host); err != nil || !s.Halted {
				t.Errorf("journal %q: %s halted in Redis = %v, %v; want written back", tt.content, host, s.Halted, err)
			}
		case tt.line > 0 && (!errors.Is(err, redisstore.ErrJournal) || !errors.As(err, &je) || je.Line != tt.line):
			t.Errorf("journal %q: New = %v, want a *JournalError for line %d", tt.content, err, tt.line)
		}
	}
}

// TestEvictedHaltRestored: on a Redis that evicts (allkeys-lru, accepted
// with AllowEviction) the halt key is evicted under memory pressure; the
// next check of a worker that remembers the halt sees evicted_keys grow
// and writes the halt back, so a worker that never saw it is refused.
func TestEvictedHaltRestored(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := redistest.Dial(t, srv.Addr)
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	var warn warnings
	cfg := fleetConfig("evicted")
	cfg.AllowEviction = true
	cfg.Now = clk.Now
	cfg.CheckInterval = time.Minute
	cfg.OnWarning = warn.add
	a := newWorker(t, srv.Addr, cfg)
	site, elsewhere := newOrigin(t, refuse), newOrigin(t, ok)
	if status, err := a.get(ctx, site.URL); status != 403 {
		t.Fatalf("refusing host: %d, %v; want 403", status, err)
	}
	_, haltKey, _ := redisstore.KeysOf(a.state, site.host())

	// Memory pressure: fill Redis past maxmemory until the halt is evicted.
	used, err := admin.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	limit := leadingInt(infoValue(used, "used_memory")) + 1<<20
	if err := admin.ConfigSet(ctx, "maxmemory", fmt.Sprint(limit)).Err(); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 1024)
	for batch := 0; ; batch++ {
		if n, err := admin.Exists(ctx, haltKey).Result(); err != nil || n == 0 {
			break
		}
		if batch == 100 {
			t.Fatal("the halt key was not evicted after 100 batches of 1 KiB values")
		}
		pipe := admin.Pipeline()
		for i := range 500 {
			pipe.Set(ctx, fmt.Sprintf("fill:%d:%d", batch, i), value, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}

	// The next operation of a, on another host, after CheckInterval.
	clk.Advance(time.Minute)
	if status, err := a.get(ctx, elsewhere.URL); status != 200 {
		t.Fatalf("other host: %d, %v", status, err)
	}
	if got := warn.restoredHosts(); !slices.Equal(got, []string{site.host()}) {
		t.Errorf("Restored warnings name %v, want [%s]", got, site.host())
	} else if w := warn.last(); !slices.Equal(w.Servers, []string{srv.Addr}) {
		t.Errorf("Restored warning names servers %v, want [%s] (evicted keys)", w.Servers, srv.Addr)
	}
	b := newWorker(t, srv.Addr, cfg)
	if _, err := b.get(ctx, site.URL); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("worker that never saw the halt: err = %v, want ErrHalted", err)
	}
	if got, esc := site.n.Load(), a.escalations.Load()+b.escalations.Load(); got != 1 || esc != 1 {
		t.Errorf("host reached %d times, %d escalations; want 1, 1", got, esc)
	}
}

// infoValue returns a field of an INFO reply.
func infoValue(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
