package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/redis/go-redis/v9"
)

// benchHostState paces nothing, so that benchmarks measure the state's
// cost, not its waits.
var benchHostState = hoststate.Config{Limit: ratelimit.Config{PerMinute: 6e7, Burst: 1000}}

// benchClient is a client sized for 64 concurrent requests, with a hook
// counting its round trips.
func benchClient(b *testing.B) (*redis.Client, *counter) {
	b.Helper()
	opt, err := redistest.Options(redistest.Addr(b))
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = 128
	c := redis.NewClient(opt)
	b.Cleanup(func() { c.Close() })
	hook := newCounter()
	c.AddHook(hook)
	return c, hook
}

// redisCPU returns the CPU time the Redis server has used, from INFO cpu.
func redisCPU(b *testing.B, c redis.UniversalClient) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.Lines(info) {
		for _, key := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), key); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// cpuMeter reports the CPU time per op of this process and, when it has a
// client, of the Redis server: on a machine where other work competes for
// the CPUs, these costs are steadier than wall-clock throughput.
type cpuMeter struct {
	admin      redis.UniversalClient
	proc, serv time.Duration
}

func startCPU(b *testing.B, admin redis.UniversalClient) *cpuMeter {
	m := &cpuMeter{admin: admin, proc: processCPU()}
	if admin != nil {
		m.serv = redisCPU(b, admin)
	}
	return m
}

func (m *cpuMeter) report(b *testing.B) {
	if b.N == 0 {
		return
	}
	b.ReportMetric(float64(processCPU()-m.proc)/float64(b.N), "cpu-ns/op")
	if m.admin != nil {
		b.ReportMetric(float64(redisCPU(b, m.admin)-m.serv)/float64(b.N), "redis-cpu-ns/op")
	}
}

// benchState returns a memory or Redis store, and for Redis the hook
// counting its round trips. The Redis store fails closed: a Redis error
// fails the benchmark instead of falling back to local state, which would
// measure memory under Redis's name.
func benchState(b *testing.B, name string) (hoststate.Store, *counter) {
	if name == "memory" {
		return mustMemory(benchHostState), nil
	}
	c, hook := benchClient(b)
	st, err := redisstore.New(c, redisstore.Config{
		Prefix:       redistest.Prefix(b),
		HostState:    benchHostState,
		Timeout:      testTimeout,
		OnRedisError: redisstore.FailClosed,
	})
	if err != nil {
		b.Fatal(err)
	}
	return st, hook
}

// admin returns a client for INFO when name is "redis".
func admin(b *testing.B, name string) redis.UniversalClient {
	if name != "redis" {
		return nil
	}
	return redistest.Client(b)
}

// reportTrips reports the round trips per op counted by hook.
func reportTrips(b *testing.B, hook *counter) {
	if hook != nil && b.N > 0 {
		b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "redis-trips/op")
	}
}

// BenchmarkAdmitRecord is one Admit and one Record, over 1,000 hosts, on
// one goroutine: for Redis, the latency of two round trips on loopback.
func BenchmarkAdmitRecord(b *testing.B) {
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = "h" + strconv.Itoa(i) + ".example"
	}
	for _, name := range []string{"memory", "redis"} {
		b.Run(name, func(b *testing.B) {
			st, hook := benchState(b, name)
			ctx := context.Background()
			ok := classify.Result{Outcome: classify.OK, Status: 200}
			cpu := startCPU(b, admin(b, name))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h := hosts[i%len(hosts)]
				i++
				a, err := st.Admit(ctx, h)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := st.Record(ctx, h, a, ok); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportTrips(b, hook)
			cpu.report(b)
		})
	}
}

// BenchmarkChain sends GETs through the whole egresskit chain to a loopback
// httptest server, 64 at a time, with memory state and with Redis state:
// to one host, and spread over 64 host names (each dialled to the same
// server).
func BenchmarkChain(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	for _, hosts := range []int{1, 64} {
		for _, name := range []string{"memory", "redis"} {
			b.Run(fmt.Sprintf("hosts=%d/%s", hosts, name), func(b *testing.B) {
				st, hook := benchState(b, name)
				cpu := startCPU(b, admin(b, name))
				benchChain(b, srv, hosts, st)
				b.StopTimer()
				reportTrips(b, hook)
				cpu.report(b)
			})
		}
	}
}

func benchChain(b *testing.B, srv *httptest.Server, hosts int, st hoststate.Store) {
	base := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
		MaxIdleConnsPerHost: 128,
	}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: mustChain(egresskit.Config{
		Base:         base,
		Store:        st,
		IgnoreRobots: true,
		Retry:        retry.Policy{MaxRetries: -1},
	})}
	urls := make([]string, hosts)
	for i := range urls {
		urls[i] = "http://h" + strconv.Itoa(i) + ".bench/"
	}
	if hosts == 1 {
		urls[0] = srv.URL + "/"
	}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((64 + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			resp, err := client.Get(urls[i%len(urls)])
			i++
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d, want 200", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
