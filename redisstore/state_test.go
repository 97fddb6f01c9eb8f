package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestConcurrentProbes: 64 goroutines over four workers race for the one
// half-open probe slot; exactly one wins, because admit is one atomic
// script.
func TestConcurrentProbes(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	clk := newClock()
	cfg := redisstore.Config{
		Prefix:       redistest.Prefix(t),
		HostState:    hoststate.Config{Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: time.Minute}},
		OnRedisError: redisstore.FailClosed,
		Timeout:      testTimeout,
		Now:          clk.Now,
	}
	states := make([]*redisstore.Store, 4)
	for i := range states {
		states[i] = mustState(t, addr, cfg)
	}
	a, err := states[0].Admit(ctx, "p.example")
	if err != nil {
		t.Fatal(err)
	}
	states[0].Record(ctx, "p.example", a, classify.Result{Outcome: classify.Transient})
	clk.Advance(time.Minute + time.Millisecond)

	var probes, open atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			a, err := states[i%4].Admit(ctx, "p.example")
			switch {
			case err == nil && a.Probe:
				probes.Add(1)
			case errors.Is(err, sentinel.ErrOpen):
				open.Add(1)
			default:
				t.Errorf("Admit = %+v, %v", a, err)
			}
		})
	}
	wg.Wait()
	if probes.Load() != 1 || open.Load() != 63 {
		t.Errorf("%d probes and %d refusals, want 1 and 63", probes.Load(), open.Load())
	}
}

// TestProbeLease: a probe whose outcome is never recorded (its worker
// died) holds the half-open slot for ProbeLease only; then a new probe is
// admitted, and the lost one's late outcome is ignored.
func TestProbeLease(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st := mustState(t, redistest.Addr(t), redisstore.Config{
		Prefix:       redistest.Prefix(t),
		HostState:    hoststate.Config{Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: time.Minute}},
		OnRedisError: redisstore.FailClosed,
		ProbeLease:   2 * time.Minute,
		Timeout:      testTimeout,
		Now:          clk.Now,
	})
	const host = "lease.example"
	a, _ := st.Admit(ctx, host)
	st.Record(ctx, host, a, classify.Result{Outcome: classify.Transient})
	clk.Advance(time.Minute + time.Millisecond)
	lost, err := st.Admit(ctx, host)
	if err != nil || !lost.Probe {
		t.Fatalf("first probe = %+v, %v", lost, err)
	}
	clk.Advance(2*time.Minute - time.Millisecond)
	if _, err := st.Admit(ctx, host); !errors.Is(err, sentinel.ErrOpen) {
		t.Fatalf("Admit within the lease = %v, want ErrOpen", err)
	}
	clk.Advance(time.Millisecond)
	probe, err := st.Admit(ctx, host)
	if err != nil || !probe.Probe || probe.Generation == lost.Generation {
		t.Fatalf("Admit after the lease = %+v, %v; want a new probe of a new generation", probe, err)
	}
	eff, _ := st.Record(ctx, host, lost, classify.Result{Outcome: classify.OK})
	if eff.From != breaker.HalfOpen || eff.To != breaker.HalfOpen {
		t.Errorf("lost probe's late OK: %v→%v, want ignored (half-open)", eff.From, eff.To)
	}
	eff, _ = st.Record(ctx, host, probe, classify.Result{Outcome: classify.OK})
	if eff.To != breaker.Closed {
		t.Errorf("new probe's OK: %v→%v, want closed", eff.From, eff.To)
	}
}

// counter is a go-redis hook counting the commands sent, pipelines
// included, and the round trips.
type counter struct {
	cmds, trips atomic.Int64
	mu          sync.Mutex // guards names
	names       map[string]int
}

func newCounter() *counter { return &counter{names: map[string]int{}} }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		c.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		c.trips.Add(1)
		return next(ctx, cmds)
	}
}

func (c *counter) count(cmd redis.Cmder) {
	c.cmds.Add(1)
	c.mu.Lock()
	c.names[cmd.Name()]++
	c.mu.Unlock()
}

func (c *counter) reset() {
	c.cmds.Store(0)
	c.trips.Store(0)
	c.mu.Lock()
	clear(c.names)
	c.mu.Unlock()
}

// TestRoundTripsPerRequest measures, on the client (a hook) and on the
// server (INFO commandstats), the Redis commands of 100 requests through
// the chain and a Flush: with RecordDelay off, one EVALSHA before and one
// after each attempt; with OKs held back, one EVALSHA per attempt (its
// admission carries the previous OK) and one for the Flush. With tokens
// leased (the host's rate gives 100 in the 100ms window), one admission
// in 17 asks Redis (it takes 16 tokens more). Nothing else.
func TestRoundTripsPerRequest(t *testing.T) {
	const n = 100
	leasedAdmits := int64((n + 16) / 17) // 6
	tests := []struct {
		name  string
		delay time.Duration
		lease time.Duration
		want  int64
	}{
		{"record delay off", -1, -1, 2 * n},
		{"OKs held back", time.Minute, -1, n + 1},
		{"record delay off, tokens leased", -1, 0, leasedAdmits + n},
		{"OKs held back, tokens leased", time.Minute, 0, leasedAdmits + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t) // commandstats of this test alone
			admin := redistest.Dial(t, srv.Addr)
			site := newOrigin(t, ok)
			hook := newCounter()
			c := redistest.Dial(t, srv.Addr)
			c.AddHook(hook)
			cfg := fleetConfig("rtt")
			cfg.CheckInterval = -1 // no periodic INFO among the counted commands
			cfg.RecordDelay = tt.delay
			cfg.LeaseWindow = tt.lease
			st, err := redisstore.New(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := workerFor(t, st)
			w.get(ctx, site.URL) // loads the scripts
			if err := st.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// A new host's bucket starts with one token; idle, it fills
			// to the burst of 100 in 100ms, and no request below waits
			// for a token.
			time.Sleep(150 * time.Millisecond)
			hook.reset()
			before := infoStats(t, admin)

			for range n {
				if status, err := w.get(ctx, site.URL); status != 200 {
					t.Fatalf("%d, %v", status, err)
				}
			}
			if err := st.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			after := infoStats(t, admin)
			if got := hook.trips.Load(); got != tt.want {
				t.Errorf("client: %d round trips for %d requests, want %d", got, n, tt.want)
			}
			hook.mu.Lock()
			if int64(hook.names["evalsha"]) != tt.want || len(hook.names) != 1 {
				t.Errorf("client: commands %v, want only %d evalsha", hook.names, tt.want)
			}
			hook.mu.Unlock()
			// The server counts the commands scripts run too; apart from those
			// (and the first INFO, counted in the second reading) it received
			// only the EVALSHAs.
			inner := 0
			for _, cmd := range []string{"time", "get", "set", "hmget", "hset", "del", "pexpire", "persist"} {
				inner += parseCalls(after, cmd) - parseCalls(before, cmd)
			}
			if got := totalCalls(after) - totalCalls(before) - 1 - inner; int64(got) != tt.want {
				t.Errorf("server: %d commands besides the scripts' own for %d requests, want %d", got, n, tt.want)
			}
			if got := parseCalls(after, "evalsha") - parseCalls(before, "evalsha"); int64(got) != tt.want {
				t.Errorf("server: %d EVALSHA calls for %d requests, want %d", got, n, tt.want)
			}
		})
	}
}

// TestKeyTTLs checks the physical expiry of a host's keys: the state hash
// lives for the idle TTL after its last use, at least until an open
// period ends, for ever while the host is halted (and with a negative
// IdleTTL); the halt key never expires.
func TestKeyTTLs(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := redisstore.Config{
		Prefix:       redistest.Prefix(t),
		HostState:    hoststate.Config{Breaker: breaker.Config{FailureThreshold: 1, OpenTimeout: time.Hour}},
		OnRedisError: redisstore.FailClosed,
		Timeout:      testTimeout,
	}
	st := mustState(t, redistest.Addr(t), cfg)
	ttl := func(key string) time.Duration {
		t.Helper()
		d, err := client.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	const host = "ttl.example"
	stateKey, haltKey, _ := redisstore.KeysOf(st, host)
	a, _ := st.Admit(ctx, host)
	if d := ttl(stateKey); d < 9*time.Minute || d > 10*time.Minute {
		t.Errorf("after Admit: TTL %v, want about the 10m idle TTL", d)
	}
	st.Record(ctx, host, a, classify.Result{Outcome: classify.Transient})
	if d := ttl(stateKey); d < 59*time.Minute || d > time.Hour {
		t.Errorf("while open for 1h: TTL %v, want about 1h", d)
	}
	if _, err := st.Record(ctx, host, hoststate.Admission{}, classify.Result{Outcome: classify.Refused}); err != nil {
		t.Fatal(err)
	}
	if d1, d2 := ttl(stateKey), ttl(haltKey); d1 != -1 || d2 != -1 {
		t.Errorf("halted: TTLs %v and %v, want none (-1ns) on both", d1, d2)
	}
	if err := st.Resume(ctx, host); err != nil {
		t.Fatal(err)
	}
	if d := ttl(stateKey); d < 59*time.Minute || d > time.Hour {
		t.Errorf("after Resume, still open: TTL %v, want about 1h", d)
	}

	cfg.HostState.Limit.IdleTTL = -1
	never := mustState(t, redistest.Addr(t), cfg)
	never.Admit(ctx, "never.example")
	stateKey, _, _ = redisstore.KeysOf(never, "never.example")
	if d := ttl(stateKey); d != -1 {
		t.Errorf("with a negative IdleTTL: TTL %v, want none", d)
	}
}

// Every key of a host carries the host as its Cluster hash tag, and a
// host that cannot be a hash tag is refused; an unreachable Redis under
// FailClosed fails with an error naming the operation.
func TestKeysAndUnavailableOp(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: nowhere(), ContextTimeoutEnabled: true, DialerRetries: 1})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.Config{Prefix: "crawl", OnRedisError: redisstore.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	state, halt, _ := redisstore.KeysOf(st, "example.com:8080")
	if state != "crawl:{example.com:8080}:st" || halt != "crawl:{example.com:8080}:halt" {
		t.Errorf("KeysOf = %q, %q", state, halt)
	}
	if _, _, err := redisstore.KeysOf(st, "bad{host}"); !errors.Is(err, redisstore.ErrInvalidHost) {
		t.Errorf("KeysOf(bad{host}) = %v, want ErrInvalidHost", err)
	}
	_, err = st.Admit(context.Background(), "example.com")
	var ue *redisstore.UnavailableError
	if !errors.Is(err, redisstore.ErrUnavailable) || !errors.As(err, &ue) || ue.Op != "admit" {
		t.Errorf("Admit = %v, want an unavailableError of op admit", err)
	}
}
