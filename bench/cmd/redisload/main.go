// Command redisload measures what egresskit's Redis state costs Redis per
// request: it sends -requests GETs to a loopback server, spread over
// -hosts host names, through -chains chains that share one Redis server
// (each with its own client and redisstore.Store, FailClosed), from
// -workers goroutines, and reads INFO commandstats and INFO cpu of that
// server before and after. It prints one line of key=value pairs:
//
//	evalsha_per_req  EVALSHA calls per request
//	us_per_call      server time per EVALSHA (commandstats usec/calls)
//	cpu_us_per_req   Redis CPU (user+sys) per request, in microseconds
//	req_per_s        requests per second of wall time
//	call_p50_us, call_p99_us  client-side latency of the script calls
//	                 (EVALSHA), through a go-redis hook
//
// The Redis server must serve nobody else during the run: every command
// it counts is charged to the requests. run-redisload.sh builds this
// command against two versions of the module and interleaves their runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/bench/internal/redisinfo"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the Redis server (used by nobody else during the run)")
	requests := flag.Int("requests", 20000, "requests in all")
	workers := flag.Int("workers", 32, "goroutines sending, spread over the chains")
	hosts := flag.Int("hosts", 200, "distinct host names")
	chains := flag.Int("chains", 2, "chains, each with its own Redis client and Store")
	flag.Parse()
	if err := run(*addr, *requests, *workers, *hosts, *chains); err != nil {
		fmt.Fprintln(os.Stderr, "redisload:", err)
		os.Exit(1)
	}
}

// flusher is a Store that holds outcomes back (newer versions).
type flusher interface{ Flush(context.Context) error }

func run(addr string, requests, workers, hosts, chains int) error {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	target := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(target)

	admin := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer admin.Close()
	prefix := fmt.Sprintf("redisload-%d-%d", os.Getpid(), time.Now().UnixNano())

	lat := &latencies{}
	var clients []*egresskit.Transport
	var stores []*redisstore.Store
	for range chains {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: workers})
		defer c.Close()
		c.AddHook(lat)
		st, err := redisstore.New(c, redisstore.Config{
			Prefix: prefix,
			HostState: hoststate.Config{Limit: ratelimit.Config{
				PerMinute: 1e9, Burst: 1 << 20, // pacing never binds
			}},
			OnRedisError:  redisstore.FailClosed,
			Timeout:       5 * time.Second,
			CheckInterval: -1, // no periodic INFO among the counted commands
		})
		if err != nil {
			return err
		}
		base := &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, target)
			},
			MaxIdleConns:        workers,
			MaxIdleConnsPerHost: workers,
		}
		defer base.CloseIdleConnections()
		tr, err := egresskit.New(egresskit.Config{
			Base:         base,
			Store:        st,
			IgnoreRobots: true,
			UserAgent:    "redisload/1.0",
			Retry:        retry.Policy{MaxRetries: -1},
		})
		if err != nil {
			return err
		}
		clients = append(clients, tr)
		stores = append(stores, st)
	}
	urls := make([]string, hosts)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://h%d.redisload.test:%s/", i, port)
	}
	send := func(c *http.Client, url string) error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
	// Warm up: every host once through every chain (scripts loaded,
	// connections open), then nothing held back.
	for _, tr := range clients {
		c := &http.Client{Transport: tr}
		for _, u := range urls {
			if err := send(c, u); err != nil {
				return err
			}
		}
	}
	if err := flush(ctx, stores); err != nil {
		return err
	}
	lat.reset()

	before, err := redisinfo.Read(ctx, admin)
	if err != nil {
		return err
	}
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		c := &http.Client{Transport: clients[w%len(clients)]}
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= requests {
					return
				}
				if err := send(c, urls[i%hosts]); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	if err := flush(ctx, stores); err != nil {
		return err
	}
	wall := time.Since(start)
	after, err := redisinfo.Read(ctx, admin)
	if err != nil {
		return err
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d requests failed, the first: %v", n, firstErr.Load())
	}
	n := float64(requests)
	calls := after["evalsha.calls"] - before["evalsha.calls"]
	usec := after["evalsha.usec"] - before["evalsha.usec"]
	cpu := (after["used_cpu_user"] + after["used_cpu_sys"] - before["used_cpu_user"] - before["used_cpu_sys"]) * 1e6
	p50, p99 := lat.quantiles()
	fmt.Printf("evalsha_per_req=%.4f us_per_call=%.2f cpu_us_per_req=%.2f req_per_s=%.0f call_p50_us=%.0f call_p99_us=%.0f\n",
		calls/n, usec/max(calls, 1), cpu/n, n/wall.Seconds(), p50, p99)
	// Leave nothing behind on the server.
	iter := admin.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		admin.Del(ctx, iter.Val())
	}
	return nil
}

func flush(ctx context.Context, stores []*redisstore.Store) error {
	for _, st := range stores {
		if f, ok := any(st).(flusher); ok {
			if err := f.Flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// latencies is a go-redis hook that records the duration of every
// EVALSHA/EVAL (the admissions and records of the chain).
type latencies struct {
	mu sync.Mutex // guards us
	us []float64
}

func (l *latencies) reset() { l.mu.Lock(); l.us = l.us[:0]; l.mu.Unlock() }

func (l *latencies) quantiles() (p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.us) == 0 {
		return 0, 0
	}
	slices.Sort(l.us)
	q := func(p float64) float64 { return l.us[min(int(p*float64(len(l.us))), len(l.us)-1)] }
	return q(0.50), q(0.99)
}

func (l *latencies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *latencies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			d := float64(time.Since(start).Microseconds())
			l.mu.Lock()
			l.us = append(l.us, d)
			l.mu.Unlock()
		}
		return err
	}
}

func (l *latencies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
