// Command fleetsim runs a fleet of crawler processes against a real Redis
// Cluster of 3 masters and reports what egresskit's shared state costs
// it: the command starts the cluster and a loopback HTTP target, then
// -procs copies of itself as workers, each an egresskit chain over its own
// redis.ClusterClient and redisstore.Store (FailClosed), sending GETs from
// -goroutines goroutines to -hosts host names for -duration. It prints a
// Markdown table:
//
//   - per master: EVALSHA ops/s, CPU µs per EVALSHA and per request it
//     served, its CPU utilisation, and memory per tracked host (MEMORY
//     USAGE of a sample of state keys);
//   - per worker: requests/s, and the latency of Store.Admit, p50 and
//     p99;
//   - the fleet: EVALSHA per request, Redis CPU per request, and how many
//     requests per second one master core carries, with the masters
//     needed for 10,000 and 100,000 pages/s.
//
// All processes share this machine's cores: absolute figures move with its
// load; the per-request costs are steadier than the rates.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/bench/internal/redisinfo"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/redis/go-redis/v9"
)

// envWorker, when set, makes the process a worker; its value is the
// worker's spec in JSON.
const envWorker = "FLEETSIM_WORKER"

type spec struct {
	Addrs      []string
	Target     string
	Prefix     string
	ID, Procs  int
	Hosts      int
	Goroutines int
	Duration   time.Duration
	Delay      time.Duration // redisstore.Config.RecordDelay
}

type report struct {
	ID       int
	Requests int64
	Failed   int64
	FirstErr string
	Seconds  float64
	P50, P99 float64 // Admit latency, µs
}

func main() {
	if s := os.Getenv(envWorker); s != "" {
		var sp spec
		if err := json.Unmarshal([]byte(s), &sp); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim worker:", err)
			os.Exit(2)
		}
		r := work(sp)
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	procs := flag.Int("procs", 4, "worker processes")
	gor := flag.Int("goroutines", 16, "sending goroutines per worker")
	hosts := flag.Int("hosts", 10000, "distinct host names")
	dur := flag.Duration("duration", 20*time.Second, "how long the workers send")
	delay := flag.Duration("record-delay", 0, "redisstore.Config.RecordDelay of the workers (0: its default)")
	flag.Parse()
	if err := run(*procs, *gor, *hosts, *dur, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}

func run(procs, gor, hosts int, dur, delay time.Duration) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fleetsim")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cl, err := redistest.NewCluster(dir, 3)
	if err != nil {
		return err
	}
	defer cl.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()

	admins := make([]*redis.Client, len(cl.Masters))
	for i, m := range cl.Masters {
		admins[i] = redis.NewClient(&redis.Options{Addr: m.Addr, ContextTimeoutEnabled: true})
		defer admins[i].Close()
	}
	before := make([]map[string]float64, len(admins))
	for i, a := range admins {
		if before[i], err = redisinfo.Read(ctx, a); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("fleetsim-%d", os.Getpid())
	wctx, cancel := context.WithTimeout(ctx, dur+time.Minute)
	defer cancel()
	reports := make([]report, procs)
	errs := make([]error, procs)
	start := time.Now()
	var wg sync.WaitGroup
	for id := range procs {
		sp, _ := json.Marshal(spec{Addrs: cl.Addrs(), Target: srv.Listener.Addr().String(), Prefix: prefix,
			ID: id, Procs: procs, Hosts: hosts, Goroutines: gor, Duration: dur, Delay: delay})
		// A worker that outlives its time by a minute is killed.
		cmd := exec.CommandContext(wctx, self)
		cmd.Env = append(os.Environ(), envWorker+"="+string(sp))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() {
			line, _ := bufio.NewReader(out).ReadBytes('\n')
			if err := json.Unmarshal(line, &reports[id]); err != nil {
				errs[id] = fmt.Errorf("worker %d: %q: %v", id, line, err)
			}
			if err := cmd.Wait(); err != nil && errs[id] == nil {
				errs[id] = fmt.Errorf("worker %d: %v", id, err)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var total, failed int64
	for _, r := range reports {
		total += r.Requests
		failed += r.Failed
	}
	if failed > 0 {
		for _, r := range reports {
			if r.FirstErr != "" {
				return fmt.Errorf("%d requests failed; worker %d: %s", failed, r.ID, r.FirstErr)
			}
		}
		return fmt.Errorf("%d requests failed", failed)
	}

	rd := "default"
	if delay != 0 {
		rd = delay.String()
	}
	fmt.Printf("Fleet: %d worker processes × %d goroutines, %d hosts, %v, RecordDelay %s, 3 masters (redis-server %s), %d requests (%.0f/s).\n\n",
		procs, gor, hosts, dur, rd, redisVersion(ctx, admins[0]), total, float64(total)/wall)
	type master struct {
		calls, cpu, perHost float64
		tracked             int
	}
	ms := make([]master, len(admins))
	var calls, cpu float64
	for i, a := range admins {
		after, err := redisinfo.Read(ctx, a)
		if err != nil {
			return err
		}
		m := &ms[i]
		m.calls = after["evalsha.calls"] - before[i]["evalsha.calls"]
		m.cpu = (after["used_cpu_user"] + after["used_cpu_sys"] - before[i]["used_cpu_user"] - before[i]["used_cpu_sys"]) * 1e6
		m.tracked, m.perHost = memory(ctx, a, prefix)
		calls += m.calls
		cpu += m.cpu
	}
	fmt.Println("| master | EVALSHA/s | CPU µs per EVALSHA | CPU µs per request | CPU use | hosts tracked | bytes per host |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, m := range ms {
		// The requests this master served: its share of the EVALSHAs.
		served := float64(total) * m.calls / max(calls, 1)
		fmt.Printf("| %d | %.0f | %.1f | %.1f | %.0f %% | %d | %.0f |\n",
			i+1, m.calls/wall, m.cpu/max(m.calls, 1), m.cpu/max(served, 1), 100*m.cpu/1e6/wall, m.tracked, m.perHost)
	}
	perReq := cpu / float64(total)
	fmt.Println()
	fmt.Println("| worker | requests/s | Admit p50 | Admit p99 |")
	fmt.Println("|---|---|---|---|")
	for _, r := range reports {
		fmt.Printf("| %d | %.0f | %.0f µs | %.0f µs |\n", r.ID+1, float64(r.Requests)/r.Seconds, r.P50, r.P99)
	}
	core := 1e6 / perReq
	fmt.Printf("\nFleet: %.3f EVALSHA per request; %.1f µs of Redis CPU per request; one master core carries %.0f requests/s at 100 %% CPU.\n",
		calls/float64(total), perReq, core)
	for _, pages := range []float64{10000, 100000} {
		fmt.Printf("Masters for %.0f pages/s: %.0f at 100 %% CPU, %.0f at 50 %% (headroom for bursts and failover).\n",
			pages, math.Ceil(pages/core), math.Ceil(pages/(core/2)))
	}
	return nil
}

// memory returns how many state keys of prefix a master holds and their
// mean MEMORY USAGE over a sample of up to 200.
func memory(ctx context.Context, c *redis.Client, prefix string) (int, float64) {
	var n, sampled int
	var bytes int64
	iter := c.Scan(ctx, 0, prefix+":*:st", 1000).Iterator()
	for iter.Next(ctx) {
		n++
		if sampled < 200 {
			if b, err := c.MemoryUsage(ctx, iter.Val()).Result(); err == nil {
				bytes += b
				sampled++
			}
		}
	}
	if sampled == 0 {
		return n, 0
	}
	return n, float64(bytes) / float64(sampled)
}

func redisVersion(ctx context.Context, c *redis.Client) string {
	s, _ := c.Info(ctx, "server").Result()
	for line := range strings.SplitSeq(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// timed is a hoststate.Store whose Admit is timed.
type timed struct {
	*redisstore.Store
	mu sync.Mutex // guards us
	us []float64
}

func (t *timed) Admit(ctx context.Context, host string) (hoststate.Admission, error) {
	start := time.Now()
	a, err := t.Store.Admit(ctx, host)
	d := float64(time.Since(start).Microseconds())
	t.mu.Lock()
	t.us = append(t.us, d)
	t.mu.Unlock()
	return a, err
}

// work is a worker process: it sends for sp.Duration and reports.
func work(sp spec) report {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sp.Addrs, ContextTimeoutEnabled: true, PoolSize: sp.Goroutines})
	defer c.Close()
	r := report{ID: sp.ID}
	st, err := redisstore.New(c, redisstore.Config{
		Prefix:       sp.Prefix,
		OnRedisError: redisstore.FailClosed,
		Timeout:      5 * time.Second,
		RecordDelay:  sp.Delay,
	})
	if err != nil {
		r.Failed, r.FirstErr = 1, err.Error()
		return r
	}
	ts := &timed{Store: st}
	base := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, sp.Target)
		},
		MaxIdleConns:        sp.Goroutines,
		MaxIdleConnsPerHost: sp.Goroutines,
	}
	defer base.CloseIdleConnections()
	tr, err := egresskit.New(egresskit.Config{
		Base:         base,
		Store:        ts,
		IgnoreRobots: true,
		UserAgent:    "fleetsim/1.0",
		Retry:        retry.Policy{MaxRetries: -1},
	})
	if err != nil {
		r.Failed, r.FirstErr = 1, err.Error()
		return r
	}
	client := &http.Client{Transport: tr}
	_, port, _ := net.SplitHostPort(sp.Target)
	deadline := time.Now().Add(sp.Duration)
	start := time.Now()
	// Each worker walks its own share of the hosts (a frontier sharded by
	// host, when Procs divides Hosts), coming back to a host every
	// Hosts/Procs requests.
	var next atomic.Int64
	var reqs, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range sp.Goroutines {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				i := next.Add(1)
				h := (i*int64(sp.Procs) + int64(sp.ID)*7919) % int64(sp.Hosts)
				resp, err := client.Get("http://h" + strconv.FormatInt(h, 10) + ".fleet.test:" + port + "/")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				reqs.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	if f, ok := any(st).(interface{ Flush(context.Context) error }); ok {
		f.Flush(ctx)
	}
	r.Requests, r.Failed = reqs.Load(), failed.Load()
	if e, ok := firstErr.Load().(string); ok {
		r.FirstErr = e
	}
	ts.mu.Lock()
	slices.Sort(ts.us)
	if n := len(ts.us); n > 0 {
		r.P50, r.P99 = ts.us[n/2], ts.us[min(n*99/100, n-1)]
	}
	ts.mu.Unlock()
	return r
}
