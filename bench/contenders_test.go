package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/redis/go-redis/v9"
)

// userAgent is set on every request of every contender, as a crawler sets
// its own; the chain then has no header to add and no request to clone.
const userAgent = "BenchBot/1.0 (+https://example.test/bot)"

// The retry settings every retrying contender gets: egresskit's defaults.
const (
	maxRetries = 3
	baseDelay  = 500 * time.Millisecond
	maxDelay   = 30 * time.Second
)

// The breaker settings the failsafe-go contender gets: egresskit's
// defaults (8 consecutive failures, open for 300s).
const (
	failureThreshold = 8
	openTimeout      = 300 * time.Second
)

// concurrency is the number of requests in flight in BenchmarkLoopback,
// and the keep-alive connections every contender may keep to the server.
const concurrency = 64

// cannedBody is the body of the canned response: 128 bytes of text/plain.
var cannedBody = []byte(strings.Repeat("egresskit bench\n", 8))

// memTransport answers every request with the same 200, in memory: the
// page Page, or the canned 128-byte text/plain body when Page is nil.
// Each response is new, as a real transport's would be.
type memTransport struct{ Page *page }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	p := m.Page
	if p == nil {
		p = &textPage
	}
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {p.contentType}},
		ContentLength: int64(len(p.body)),
		Body:          io.NopCloser(bytes.NewReader(p.body)),
		Request:       req,
	}, nil
}

// serveCanned is the loopback server's handler: the same response as
// memTransport's, the page named by the path (/html-32KiB) or the canned
// body for any other path.
func serveCanned(w http.ResponseWriter, r *http.Request) {
	p := &textPage
	if q := pageNamed(strings.TrimPrefix(r.URL.Path, "/")); q != nil {
		p = q
	}
	w.Header().Set("Content-Type", p.contentType)
	w.Write(p.body)
}

// loopbackTransport is the base transport over loopback: the stdlib
// defaults with enough idle connections for every request in flight.
func loopbackTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = concurrency
	t.MaxIdleConnsPerHost = concurrency
	return t
}

// route is what a contender sends through.
type route struct {
	// base is the base transport: memTransport, or a loopbackTransport.
	base http.RoundTripper
	// loopback is true over loopback, where the chain sends through a
	// one-endpoint direct egress.Pool (configured like loopbackTransport,
	// see chainConfig) instead of base. The pool has no way to take a
	// custom transport, so in memory the chain sends through base and
	// egress is left out.
	loopback bool
}

// contender is one way of sending the same request.
type contender struct {
	name string
	// build returns the RoundTripper of the contender over r, registering
	// its cleanup with tb. It calls tb.Skip when the contender cannot run.
	build func(tb testing.TB, r route) http.RoundTripper
}

// contenders in the order of the columns of the results tables; the first
// is the baseline.
var contenders = []contender{
	{"bare", func(_ testing.TB, r route) http.RoundTripper { return r.base }},
	{"chain", func(tb testing.TB, r route) http.RoundTripper { return mustChain(chainConfig(tb, r)) }},
	{"redis", func(tb testing.TB, r route) http.RoundTripper {
		cfg := chainConfig(tb, r)
		cfg.Store = redisState(tb, neverBinds())
		return mustChain(cfg)
	}},
	{"retryablehttp", newRetryableHTTP},
	{"failsafe", newFailsafe},
}

// neverBinds is host state whose pacing never delays a request.
func neverBinds() hoststate.Config {
	return hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e9, Burst: 1 << 20}}
}

// chainConfig is the full chain with in-memory state: classify, retry,
// breaker and a limiter that never binds, no observer, robots.txt off (the
// benchmark measures the per-request cost, not a robots.txt fetch).
//
// Over loopback its egress pool keeps as many idle connections as
// loopbackTransport and, like it, has no response-header timeout
// (ResponseHeaderTimeout -1; the pool's default is 30s). The bare client
// has none, and net/http arms a timer per request for one: four
// allocations and about 1 µs of CPU per request on the benchmark machine,
// which would be charged to the chain though a bare client configured
// alike pays them too.
func chainConfig(tb testing.TB, r route) egresskit.Config {
	cfg := egresskit.Config{
		Base:         r.base,
		UserAgent:    userAgent,
		IgnoreRobots: true,
		Retry:        retry.Policy{MaxRetries: maxRetries, BaseDelay: baseDelay, MaxDelay: maxDelay},
		Store:        mustMemory(neverBinds()),
	}
	if r.loopback {
		pool, err := egress.New(egress.Config{
			Endpoints:             []egress.Endpoint{{ID: "direct", Proxy: "direct"}},
			MaxIdleConns:          concurrency,
			MaxIdleConnsPerHost:   concurrency,
			ResponseHeaderTimeout: -1, // as loopbackTransport: none
		})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(pool.Close)
		cfg.Egress = pool
	}
	return cfg
}

// redisAddr is the Redis server of the redis contender.
func redisAddr() string {
	if a := os.Getenv("EGRESSKIT_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisState returns host state in Redis under a prefix of its own, whose
// keys are deleted when tb ends. It skips tb when Redis does not answer,
// or fails it when EGRESSKIT_REQUIRE_REDIS is 1. The state fails closed,
// so that a slow Redis shows up as an error instead of a silent fallback
// to memory.
func redisState(tb testing.TB, hc hoststate.Config) *redisstore.Store {
	client, prefix, err := benchRedis(tb, concurrency, "bench")
	if err != nil {
		tb.Skip(err)
	}
	st, err := redisstore.New(client, redisstore.Config{
		Prefix:       prefix,
		HostState:    hc,
		OnRedisError: redisstore.FailClosed,
		Timeout:      time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// benchRedis returns a client of the Redis server at redisAddr (with
// poolSize connections at most; 0: go-redis's default), closed when tb
// ends, and a key prefix of its own naming kind, whose keys are deleted
// then; or the error when no server answers (a failure of tb when
// EGRESSKIT_REQUIRE_REDIS is 1).
func benchRedis(tb testing.TB, poolSize int, kind string) (*redis.Client, string, error) {
	addr := redisAddr()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: poolSize})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		if os.Getenv("EGRESSKIT_REQUIRE_REDIS") == "1" {
			tb.Fatalf("no Redis at %s (EGRESSKIT_REQUIRE_REDIS=1): %v", addr, err)
		}
		return nil, "", fmt.Errorf("no Redis at %s (set EGRESSKIT_REDIS_ADDR): %w", addr, err)
	}
	prefix := fmt.Sprintf("egresskit-%s-%d-%d", kind, os.Getpid(), time.Now().UnixNano())
	dropOnCleanup(tb, client, prefix)
	return client, prefix, nil
}

// newRetryableHTTP is go-retryablehttp's RoundTripper alone, with the
// same retry settings and no logger.
func newRetryableHTTP(_ testing.TB, r route) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: r.base}
	c.Logger = nil
	c.RetryMax = maxRetries
	c.RetryWaitMin = baseDelay
	c.RetryWaitMax = maxDelay
	return &retryablehttp.RoundTripper{Client: c}
}

// hostFailure is what the failsafe-go breaker counts, as egresskit's
// counts Transient, Throttled and Refused: errors, 5xx, 429, 401, 403.
func hostFailure(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	switch s := resp.StatusCode; {
	case s >= 500, s == http.StatusTooManyRequests, s == http.StatusUnauthorized, s == http.StatusForbidden:
		return true
	}
	return false
}

// newFailsafe is failsafe-go's failsafehttp RoundTripper with, outermost
// first, a retry policy, a circuit breaker and a rate limiter, configured
// as egresskit's layers are. Unlike egresskit's, its breaker and limiter
// are one for all hosts, not one per host.
func newFailsafe(_ testing.TB, r route) http.RoundTripper {
	rp := failsafehttp.NewRetryPolicyBuilder().
		WithMaxRetries(maxRetries).
		WithBackoff(baseDelay, maxDelay).
		Build()
	cb := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(hostFailure).
		WithFailureThreshold(failureThreshold).
		WithDelay(openTimeout).
		Build()
	// 10^9 per minute, like the chain's limiter; waiting up to a second
	// for a permit rather than failing, as the chain's limiter waits.
	rl := ratelimiter.NewSmoothBuilder[*http.Response](1e9, time.Minute).
		WithMaxWaitTime(time.Second).
		Build()
	return failsafehttp.NewRoundTripper(r.base, rp, cb, rl)
}

// newRequest returns a GET of url carrying userAgent. A goroutine reuses
// its request for every iteration, as http.RoundTripper allows once the
// previous response's body is closed.
func newRequest(tb testing.TB, url string) *http.Request {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("User-Agent", userAgent)
	return req
}

// fetch is the work of one iteration: send req, read the body to the end,
// close it, and check the status.
func fetch(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d, want 200", resp.StatusCode)
	}
	return err
}

// dropOnCleanup deletes the keys under prefix and closes client when tb
// ends.
func dropOnCleanup(tb testing.TB, client *redis.Client, prefix string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		client.Close()
	})
}
