package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/hoststate/hoststatetest"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session/sessionstore"
	"github.com/egresskit/egresskit/session/sessiontest"
	"github.com/redis/go-redis/v9"
)

// clusterClient returns a client of cluster c, closed when t ends.
func clusterClient(t testing.TB, c *redistest.Cluster) *redis.ClusterClient {
	t.Helper()
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: c.Addrs(), ContextTimeoutEnabled: true, DialTimeout: time.Second, MaxRetries: -1,
	})
	t.Cleanup(func() { client.Close() })
	return client
}

// halt halts host through st.
func halt(t testing.TB, st *redisstore.Store, host string) {
	t.Helper()
	ctx := context.Background()
	a, err := st.Admit(ctx, host)
	if err != nil {
		t.Fatalf("Admit(%s) = %v", host, err)
	}
	if eff, err := st.Record(ctx, host, a, classify.Result{Outcome: classify.Refused}); err != nil || !eff.Halted {
		t.Fatalf("Record(%s, Refused) = %+v, %v", host, eff, err)
	}
}

// TestCluster runs on a real Redis Cluster of 3 masters, made with
// redis-cli --cluster create: the shared scenarios of hoststatetest and
// of sessiontest, then a master killed mid-crawl.
func TestCluster(t *testing.T) {
	start := time.Now()
	cluster := redistest.StartClusterOf(t, 3)
	t.Logf("cluster of 3 masters ready in %v", time.Since(start))
	client := clusterClient(t, cluster)
	ctx := context.Background()
	if err := client.Eval(ctx, "return 1", []string{"{a}x", "{b}y"}).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a script over two slots = %v, want CROSSSLOT: the server must check slots", err)
	}
	// Every script touches only its host's (or session's) slot.
	t.Run("scenarios", func(t *testing.T) {
		hoststatetest.Run(t, func(t *testing.T, cfg hoststate.Config, body func(*testing.T, hoststatetest.Env)) {
			clk := newClock()
			st, err := redisstore.New(client, redisstore.Config{
				Prefix:       redistest.Prefix(t),
				HostState:    cfg,
				OnRedisError: redisstore.FailClosed,
				Timeout:      testTimeout,
				Now:          clk.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			body(t, hoststatetest.Env{Store: st, Now: clk.Now, Advance: clk.Advance})
		})
	})
	t.Run("sessions", func(t *testing.T) {
		sessiontest.Run(t, func(t *testing.T, now func() time.Time) sessionstore.Store {
			return sessStore(t, client, now)
		})
	})
	t.Run("master killed", func(t *testing.T) { testMasterKilled(t, cluster) })
}

// testMasterKilled: one master of cluster is killed mid-crawl. The hosts of the other masters' slots keep working
// through Redis — their halts stand for a worker that never saw them, and
// new halts are shared — while the killed master's hosts follow the
// policy: FailClosed fails them (not sent); FailOpen runs on local state
// (the whole State does, until the master is back), refusing the halts
// it remembers. When the master comes back empty, the remembered halts
// of its slots are written back.
func testMasterKilled(t *testing.T, cluster *redistest.Cluster) {
	for _, policy := range []redisstore.ErrorPolicy{redisstore.FailClosed, redisstore.FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			cfg := redisstore.Config{
				Prefix: policy.String(), OnRedisError: policy, Timeout: 500 * time.Millisecond,
				RetryInterval: time.Minute, Now: clk.Now, CheckInterval: -1,
			}
			var warn warnings
			seenCfg := cfg
			seenCfg.OnWarning = warn.add
			seen, err := redisstore.New(clusterClient(t, cluster), seenCfg)
			if err != nil {
				t.Fatal(err)
			}
			other, err := redisstore.New(clusterClient(t, cluster), cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Two hosts per master: one halted before the kill, one free.
			halted := map[*redistest.Server]string{}
			free := map[*redistest.Server]string{}
			for i := 0; len(halted) < 3 || len(free) < 3; i++ {
				host := fmt.Sprintf("h%d.example", i)
				state, _, _ := redisstore.KeysOf(seen, host)
				m, err := cluster.Master(ctx, state)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case halted[m] == "":
					halted[m] = host
				case free[m] == "":
					free[m] = host
				}
			}
			for _, host := range halted {
				halt(t, seen, host)
			}
			killed := cluster.Masters[1]
			killed.Kill()

			for _, m := range cluster.Masters {
				if m == killed {
					continue
				}
				if _, err := other.Admit(ctx, halted[m]); !errors.Is(err, sentinel.ErrHalted) {
					t.Errorf("halt on a live master, worker that never saw it: Admit = %v, want ErrHalted", err)
				}
				if _, err := other.Admit(ctx, free[m]); err != nil {
					t.Errorf("free host on a live master: Admit = %v, want admitted", err)
				}
			}
			live := cluster.Masters[0]
			if policy == redisstore.FailClosed {
				if _, err := other.Admit(ctx, free[killed]); !errors.Is(err, redisstore.ErrUnavailable) {
					t.Errorf("FailClosed, host of the killed master: Admit = %v, want ErrUnavailable", err)
				}
				// A halt the Store remembers is reported as the halt.
				if _, err := seen.Admit(ctx, halted[killed]); !errors.Is(err, sentinel.ErrHalted) {
					t.Errorf("FailClosed, remembered halt of the killed master: Admit = %v, want ErrHalted", err)
				}
			} else {
				if _, err := seen.Admit(ctx, free[killed]); err != nil {
					t.Errorf("FailOpen, host of the killed master: Admit = %v, want admitted from local state", err)
				}
				if _, err := seen.Admit(ctx, halted[killed]); !errors.Is(err, sentinel.ErrHalted) {
					t.Errorf("FailOpen, remembered halt of the killed master: Admit = %v, want ErrHalted", err)
				}
				if w := warn.last(); w.Kind != redisstore.Outage || len(w.Servers) != 1 || w.Servers[0] != killed.Addr {
					t.Errorf("FailOpen: last warning %+v, want Outage naming %s", w, killed.Addr)
				}
			}
			// The other masters' hosts stay on Redis, also for the worker
			// that met the killed master: a halt made after the kill is
			// shared at once.
			halt(t, other, free[live])
			if _, err := seen.Admit(ctx, free[live]); !errors.Is(err, sentinel.ErrHalted) {
				t.Errorf("halt made after the kill on a live master: Admit = %v, want ErrHalted", err)
			}
			if st, err := seen.Status(ctx, free[live]); err != nil || !st.Halted || st.Recent.Refused != 1 {
				t.Errorf("live master's host read by the worker that met the killed one: %+v, %v; want Redis's state (halted, 1 refusal)", st, err)
			}

			// The master comes back with no data; its remembered halt is
			// written back and shared again.
			if err := killed.Restart(); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			start := time.Now()
			if err := cluster.WaitReady(wctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("cluster ready again %v after the restart", time.Since(start))
			clk.Advance(time.Minute)
			for range 3 { // the cluster client may still need to find the node
				if _, err = seen.Admit(ctx, halted[killed]); errors.Is(err, sentinel.ErrHalted) {
					break
				}
			}
			if !errors.Is(err, sentinel.ErrHalted) {
				t.Errorf("remembered halt after the master's restart: Admit = %v, want ErrHalted", err)
			}
			if policy == redisstore.FailOpen {
				recovered := false
				for _, w := range warn.w {
					recovered = recovered || w.Kind == redisstore.Recovered && len(w.Servers) == 1 && w.Servers[0] == killed.Addr
				}
				if !recovered {
					t.Errorf("FailOpen: warnings %v, want Recovered naming %s", warn.kinds(), killed.Addr)
				}
			}
			var st hoststate.Status
			for range 3 {
				if st, err = other.Status(ctx, halted[killed]); err == nil {
					break
				}
			}
			if err != nil || !st.Halted {
				t.Errorf("halt of the restarted master's slot, read by the other worker: halted %v, %v; want halted", st.Halted, err)
			}
			for _, m := range cluster.Masters {
				if m == killed {
					continue
				}
				if _, err := other.Admit(ctx, halted[m]); !errors.Is(err, sentinel.ErrHalted) {
					t.Errorf("halt on a live master after the restart: Admit = %v, want ErrHalted", err)
				}
			}
		})
	}
}
