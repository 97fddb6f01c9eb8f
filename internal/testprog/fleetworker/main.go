// Command fleetworker is one worker process of a crawling fleet, for
// tests and benchmarks: an egresskit chain from DefaultConfig (robots.txt
// ignored: the test's own servers) whose per-host state is in Redis — a
// server (-redis) or a Cluster (-cluster) — or, with neither, in memory. It
// reads the URLs to crawl on stdin, one a line, until EOF; then crawls
// them with -goroutines goroutines, each taking the next URL, until they
// are done or -duration has passed (a request that ends in ErrTryLater is
// tried again at RetryAt, as a crawler requeues it); then writes
// what it saw as one JSON object on stdout (testprog.FleetResult), after
// flushing the outcomes its Store held back.
//
// Usage:
//
//	fleetworker -redis 127.0.0.1:6379 -prefix P -per-minute 6000 -goroutines 16 <urls
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// result is testprog.FleetResult, as JSON.
type result struct {
	Pages      int
	Statuses   map[int]int
	Errors     int
	FirstError string
	// TryLater counts the answers ErrTryLater, each followed by a new
	// try at RetryAt.
	TryLater int
	Seconds  float64
	// Latency is each request's time to its answer (through the
	// chain: pacing and in-flight waits included), in seconds.
	Latency []float64
	// Hosts has, per host (host[:port] of the URL), the answers its
	// attempts got, by status (retries included), and its requests'
	// final statuses (0: an error).
	Hosts map[string]*host
}

// host is testprog.FleetHost, as JSON.
type host struct {
	Answers    map[int]int
	Final      map[int]int
	FirstError string `json:",omitempty"`
}

// counter is the chain's base transport: it counts each host's answers.
type counter struct {
	next http.RoundTripper
	mu   sync.Mutex // guards res.Hosts
	res  *result
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		c.res.host(req.URL.Host).Answers[resp.StatusCode]++
		c.mu.Unlock()
	}
	return resp, err
}

// host returns h's counts, added when new.
func (r *result) host(h string) *host {
	x := r.Hosts[h]
	if x == nil {
		x = &host{Answers: map[int]int{}, Final: map[int]int{}}
		r.Hosts[h] = x
	}
	return x
}

func main() {
	addr := flag.String("redis", "", "a Redis server's address (host:port)")
	cluster := flag.String("cluster", "", "a Redis Cluster's addresses, comma-separated")
	prefix := flag.String("prefix", "egresskit", "the Redis key prefix")
	perMinute := flag.Float64("per-minute", 0, "every host's configured rate (0: the default)")
	burst := flag.Int("burst", 0, "every host's burst (0: the default)")
	maxInFlight := flag.Int("max-in-flight", 0, "Config.MaxInFlight (0: the default; negative: no cap)")
	goroutines := flag.Int("goroutines", 16, "requests at once")
	loopback := flag.Bool("loopback", false, "dial 127.0.0.1 at the URL's port, whatever its host")
	duration := flag.Duration("duration", 0, "stop after this long, cancelling the requests in flight (0: when every URL is done)")
	perHost := flag.Int("per-host", 0, "crawl each host with this many goroutines of its own, taking its URLs in order, instead of -goroutines for all")
	flag.Parse()
	if err := run(*addr, *cluster, *prefix, *perMinute, *burst, *maxInFlight, *goroutines, *loopback, *duration, *perHost); err != nil {
		fmt.Fprintln(os.Stderr, "fleetworker:", err)
		os.Exit(1)
	}
}

func run(addr, cluster, prefix string, perMinute float64, burst, maxInFlight, goroutines int, loopback bool, duration time.Duration, perHost int) error {
	var urls []string
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if u := strings.TrimSpace(in.Text()); u != "" {
			urls = append(urls, u)
		}
	}
	if err := in.Err(); err != nil {
		return err
	}
	hs := hoststate.Config{Limit: ratelimit.Config{PerMinute: perMinute, Burst: burst}}
	base := &http.Transport{MaxIdleConnsPerHost: goroutines}
	if loopback {
		base.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
			_, port, err := net.SplitHostPort(a)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		}
	}
	defer base.CloseIdleConnections()
	res := result{Pages: len(urls), Statuses: map[int]int{}, Hosts: map[string]*host{}}
	cnt := &counter{next: base, res: &res}
	cfg := egresskit.DefaultConfig()
	cfg.Base = cnt
	cfg.IgnoreRobots = true
	cfg.UserAgent = "FleetBot/1.0"
	cfg.MaxInFlight = maxInFlight
	var flush func(context.Context) error
	switch {
	case addr != "" || cluster != "":
		var client redis.UniversalClient
		if cluster != "" {
			client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cluster, ","), ContextTimeoutEnabled: true})
		} else {
			client = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		}
		defer client.Close()
		st, err := redisstore.New(client, redisstore.Config{Prefix: prefix, HostState: hs, Timeout: time.Second})
		if err != nil {
			return err
		}
		cfg.Store, flush = st, st.Flush
	default:
		st, err := hoststate.NewMemory(hs)
		if err != nil {
			return err
		}
		cfg.Store = st
	}
	tr, err := egresskit.New(cfg)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if duration > 0 {
		stop := time.AfterFunc(duration, cancel)
		defer stop.Stop()
	}
	var wg sync.WaitGroup
	// crawl crawls the URLs of jobs until it is closed.
	crawl := func(jobs <-chan string) {
		for u := range jobs {
			t0 := time.Now()
			status, err := get(ctx, c, u)
			for errors.Is(err, egresskit.ErrTryLater) && ctx.Err() == nil {
				// The host cannot take it now: requeued for when it can,
				// as a crawler does (this goroutine holds it meanwhile).
				cnt.mu.Lock()
				res.TryLater++
				cnt.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(egresskit.RetryAt(err))):
				}
				status, err = get(ctx, c, u)
			}
			d := time.Since(t0).Seconds()
			if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
				continue // cut by the end of the run
			}
			cnt.mu.Lock()
			res.Latency = append(res.Latency, d)
			if err != nil {
				res.Errors++
				if res.FirstError == "" {
					res.FirstError = err.Error()
				}
			} else {
				res.Statuses[status]++
			}
			if p, perr := url.Parse(u); perr == nil {
				h := res.host(p.Host)
				h.Final[status]++
				if err != nil && h.FirstError == "" {
					h.FirstError = err.Error()
				}
			}
			cnt.mu.Unlock()
		}
	}
	// feed sends urls to jobs until they are done or the run ends.
	feed := func(jobs chan<- string, urls []string) {
		defer close(jobs)
		for _, u := range urls {
			select {
			case jobs <- u:
			case <-ctx.Done():
				return
			}
		}
	}
	start := time.Now()
	if perHost > 0 {
		byHost := map[string][]string{}
		for _, u := range urls {
			if p, err := url.Parse(u); err == nil {
				byHost[p.Host] = append(byHost[p.Host], u)
			}
		}
		for _, hu := range byHost {
			jobs := make(chan string)
			for range perHost {
				wg.Go(func() { crawl(jobs) })
			}
			wg.Go(func() { feed(jobs, hu) })
		}
	} else {
		jobs := make(chan string)
		for range goroutines {
			wg.Go(func() { crawl(jobs) })
		}
		feed(jobs, urls)
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	if flush != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := flush(ctx); err != nil {
			return fmt.Errorf("flushing the Store: %w", err)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// get fetches u through c and reads its body to the end.
func get(ctx context.Context, c *http.Client, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return resp.StatusCode, nil
}
