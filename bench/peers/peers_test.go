// Package peers measures what the chain costs a caller beside its peers:
// a bare http.Client, go-retryablehttp's RoundTripper and failsafe-go's
// RoundTripper with a retry policy and a circuit breaker.
//
// It depends only on the chain's public configuration, so that run-peers.sh
// can build the same benchmarks against an older commit of the tree (the
// commit a piece of work started from) and measure both in one run.
package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/cputime"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/redis/go-redis/v9"
)

// userAgent is set on every request of every contender, as a crawler sets
// its own.
const userAgent = "BenchBot/1.0 (+https://example.test/bot)"

// The retry and breaker settings every contender that has them gets:
// egresskit's defaults.
const (
	maxRetries       = 3
	baseDelay        = 500 * time.Millisecond
	maxDelay         = 30 * time.Second
	failureThreshold = 8
	openTimeout      = 300 * time.Second
)

// loopbackWorkers is the number of goroutines of BenchmarkPeersLoopback,
// and the keep-alive connections each contender may keep.
const loopbackWorkers = 32

// A page is a response body with its Content-Type.
type page struct {
	name        string // body=NAME in the benchmark's name
	contentType string
	body        []byte
}

var (
	pagesOnce sync.Once
	pageList  []*page
	pagesErr  error
)

// TestMain stops the redis-server the Redis contender started, if any,
// once the benchmarks end.
func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m).Run())
}

// root is the egresskit tree whose files the pages come from: the parent of
// the bench module ($EGRESSKIT_ROOT overrides it).
func root() string {
	if r := os.Getenv("EGRESSKIT_ROOT"); r != "" {
		return r
	}
	return filepath.Join("..", "..")
}

// pages returns the bodies, read once: a 128-byte text/plain body, and the
// real HTML pages the bench module's other benchmarks send, 32 KiB of the
// Wikipedia article "Go (programming language)" from the classifier's
// benign corpus and 256 KiB of the Go specification of the toolchain.
func pages(tb testing.TB) []*page {
	pagesOnce.Do(func() {
		text := &page{name: "text-128B", contentType: "text/plain; charset=utf-8", body: bytes.Repeat([]byte("egresskit bench\n"), 8)}
		html32, err1 := readHTML("html-32KiB", filepath.Join(root(), "classify", "testdata", "corpus", "benign", "goquery", "gowiki.html"), 32<<10)
		html256, err2 := readHTML("html-256KiB", filepath.Join(goroot(), "doc", "go_spec.html"), 256<<10)
		pageList, pagesErr = []*page{text, html32, html256}, errors.Join(err1, err2)
	})
	if pagesErr != nil {
		tb.Fatal(pagesErr)
	}
	return pageList
}

// goroot returns the Go root of the toolchain: $GOROOT, else what
// `go env GOROOT` says.
func goroot() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// readHTML returns the first n bytes of the HTML file at path as a page.
func readHTML(name, path string, n int) (*page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < n {
		return nil, fmt.Errorf("%s has %d bytes, fewer than %d", path, len(b), n)
	}
	return &page{name: name, contentType: "text/html; charset=utf-8", body: b[:n]}, nil
}

// pageNamed returns the page called name, or nil.
func pageNamed(tb testing.TB, name string) *page {
	for _, p := range pages(tb) {
		if p.name == name {
			return p
		}
	}
	return nil
}

// memTransport answers every request with a new 200 carrying page, in
// memory.
type memTransport struct{ page *page }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {m.page.contentType}},
		ContentLength: int64(len(m.page.body)),
		Body:          io.NopCloser(bytes.NewReader(m.page.body)),
		Request:       req,
	}, nil
}

// A contender builds its RoundTripper over base; loopback is set when base
// is a loopback *http.Transport (the chain then sends through a direct
// egress pool configured like it). It calls tb.Skip when it cannot run.
type contender struct {
	name  string
	build func(tb testing.TB, base http.RoundTripper, loopback bool) http.RoundTripper
}

var (
	bare          = contender{"bare", func(_ testing.TB, base http.RoundTripper, _ bool) http.RoundTripper { return base }}
	chain         = contender{"chain", newChain}
	chainRedis    = contender{"chain-redis", newChainRedis}
	retryableHTTP = contender{"retryablehttp", newRetryableHTTP}
	failsafe      = contender{"failsafe", newFailsafe}
)

// neverBinds is pacing that never delays a request.
func neverBinds() hoststate.Config {
	return hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e9, Burst: 1 << 20}}
}

// chainConfig is the chain with robots.txt off, no in-flight cap
// (MaxInFlight -1), pacing that never binds and 3 retries, its state in
// store. Over loopback it sends through a one-endpoint direct egress pool
// with the base transport's idle connections and, like it, no
// response-header timeout.
func chainConfig(tb testing.TB, base http.RoundTripper, loopback bool, store hoststate.Store) egresskit.Config {
	cfg := egresskit.Config{
		Base:         base,
		UserAgent:    userAgent,
		IgnoreRobots: true,
		MaxInFlight:  -1,
		Retry:        retry.Policy{MaxRetries: maxRetries, BaseDelay: baseDelay, MaxDelay: maxDelay},
		Store:        store,
	}
	if loopback {
		pool, err := egress.New(egress.Config{
			Endpoints:             []egress.Endpoint{{ID: "direct", Proxy: "direct"}},
			MaxIdleConns:          loopbackWorkers,
			MaxIdleConnsPerHost:   loopbackWorkers,
			ResponseHeaderTimeout: -1,
		})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(pool.Close)
		cfg.Egress = pool
	}
	return cfg
}

func newChain(tb testing.TB, base http.RoundTripper, loopback bool) http.RoundTripper {
	st, err := hoststate.NewMemory(neverBinds())
	if err != nil {
		tb.Fatal(err)
	}
	t, err := egresskit.New(chainConfig(tb, base, loopback, st))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// newChainRedis is the chain with its state in Redis (token leases on, the
// store's default), failing closed: the server at $EGRESSKIT_REDIS_ADDR, else
// a redis-server of the test binary's own (redistest); without one it skips
// tb, or fails it when EGRESSKIT_REQUIRE_REDIS is 1.
func newChainRedis(tb testing.TB, base http.RoundTripper, loopback bool) http.RoundTripper {
	opt, err := redistest.Options(redistest.Addr(tb))
	if err != nil {
		tb.Fatal(err)
	}
	opt.PoolSize = loopbackWorkers
	client := redis.NewClient(opt)
	tb.Cleanup(func() { client.Close() })
	st, err := redisstore.New(client, redisstore.Config{
		Prefix:       redistest.Prefix(tb),
		HostState:    neverBinds(),
		OnRedisError: redisstore.FailClosed,
		Timeout:      time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}
	t, err := egresskit.New(chainConfig(tb, base, loopback, st))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// newRetryableHTTP is go-retryablehttp's RoundTripper alone, with the same
// retry settings and no logger.
func newRetryableHTTP(_ testing.TB, base http.RoundTripper, _ bool) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	c.RetryMax = maxRetries
	c.RetryWaitMin = baseDelay
	c.RetryWaitMax = maxDelay
	return &retryablehttp.RoundTripper{Client: c}
}

// hostFailure is what the failsafe-go breaker counts, as the chain's
// breaker counts transient failures, throttling and refusals.
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

// newFailsafe is failsafe-go's RoundTripper with a retry policy (outer)
// and a circuit breaker, configured as the chain's.
func newFailsafe(_ testing.TB, base http.RoundTripper, _ bool) http.RoundTripper {
	rp := failsafehttp.NewRetryPolicyBuilder().
		WithMaxRetries(maxRetries).
		WithBackoff(baseDelay, maxDelay).
		Build()
	cb := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(hostFailure).
		WithFailureThreshold(failureThreshold).
		WithDelay(openTimeout).
		Build()
	return failsafehttp.NewRoundTripper(base, rp, cb)
}

// newRequest returns a GET of url carrying userAgent; a goroutine sends it
// again once the previous response's body is closed.
func newRequest(tb testing.TB, url string) *http.Request {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("User-Agent", userAgent)
	return req
}

// fetch sends req, reads the body to the end, closes it and checks for a
// 200.
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

// BenchmarkPeers sends a GET through each contender over an in-memory base
// transport, one request at a time from one goroutine, the body read to
// the end and closed: a 128-byte text body and real HTML pages of 32 KiB
// and 256 KiB. It reports the wall time (ns/op), the process's CPU time
// (cpu-ns/op), and the bytes and allocations per request.
func BenchmarkPeers(b *testing.B) {
	for _, p := range pages(b) {
		b.Run("body="+p.name, func(b *testing.B) {
			for _, c := range []contender{bare, retryableHTTP, failsafe, chain} {
				b.Run("impl="+c.name, func(b *testing.B) {
					client := &http.Client{Transport: c.build(b, memTransport{p}, false)}
					req := newRequest(b, "http://bench.test/page")
					if err := fetch(client, req); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					cpu := cputime.Process()
					for b.Loop() {
						if err := fetch(client, req); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}

// BenchmarkPeersLoopback sends a GET of the 32 KiB page through each
// contender to a keep-alive HTTP/1.1 server on loopback from 32 goroutines
// (rounded up to a multiple of GOMAXPROCS), connections warmed up, and
// reports the throughput (req/s) and the process's CPU time per request
// (client and server share the cores).
func BenchmarkPeersLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pageNamed(b, "html-32KiB")
		w.Header().Set("Content-Type", p.contentType)
		w.Write(p.body)
	}))
	defer srv.Close()
	url := srv.URL + "/page"
	for _, c := range []contender{bare, retryableHTTP, failsafe, chain, chainRedis} {
		b.Run("impl="+c.name, func(b *testing.B) {
			base := http.DefaultTransport.(*http.Transport).Clone()
			base.MaxIdleConns = loopbackWorkers
			base.MaxIdleConnsPerHost = loopbackWorkers
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: c.build(b, base, true)}
			warmUp(b, client, url)
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((loopbackWorkers + procs - 1) / procs)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Process()
			b.RunParallel(func(pb *testing.PB) {
				req := newRequest(b, url)
				for pb.Next() {
					if err := fetch(client, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// warmUp sends loopbackWorkers requests at once through client, so that
// the timed requests find their keep-alive connections open.
func warmUp(b *testing.B, client *http.Client, url string) {
	b.Helper()
	errs := make([]error, loopbackWorkers)
	var wg sync.WaitGroup
	for i := range errs {
		req := newRequest(b, url)
		wg.Go(func() { errs[i] = fetch(client, req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}
