// Package redistest finds or starts a Redis server for tests, in the
// spirit of net/http/httptest.
//
// Addr finds a server as the project's tests must: the address in
// EGRESSKIT_REDIS_ADDR when set ("host:port" or a redis:// URL); else a
// redis-server started on a free port of 127.0.0.1, when the binary is in
// PATH; else the test is skipped — or failed, when EGRESSKIT_REQUIRE_REDIS
// is 1, so that CI can never skip Redis tests silently.
//
// One server is shared by the tests of a package when its TestMain uses
// Main, which stops the server when the tests end (and composes with
// goleak):
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(redistest.Main(m))
//	}
//
// Without Main, each Addr starts a server for its test alone. Tests that
// share a server keep apart with a Prefix of their own. Start gives a test
// a dedicated server it may kill, pause and restart; StartCluster a
// one-node Redis Cluster; StartClusterOf a cluster of several masters
// (redis-cli --cluster create) whose masters it may kill and restart;
// StartTLS a server that speaks only TLS, with certificates of a test
// authority made in Go.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The environment variables.
const (
	// EnvAddr names a Redis server to use instead of starting one.
	EnvAddr = "EGRESSKIT_REDIS_ADDR"
	// EnvRequire, set to 1, turns a missing server into a test failure.
	EnvRequire = "EGRESSKIT_REQUIRE_REDIS"
)

// shared is the server of the test binary, when Main is in use.
var shared struct {
	mu      sync.Mutex // guards the fields below
	enabled bool
	srv     *Server
	err     error
}

// Runner runs a package's tests and then stops the shared server. It
// satisfies goleak.TestingM.
type Runner struct{ m *testing.M }

// Main returns a Runner for m: Run runs the tests, then stops the server
// that Addr started for them.
func Main(m *testing.M) *Runner {
	shared.mu.Lock()
	shared.enabled = true
	shared.mu.Unlock()
	return &Runner{m: m}
}

// Run runs the tests and stops the shared server; it returns the tests'
// exit code.
func (r *Runner) Run() int {
	code := r.m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.srv, shared.err, shared.enabled = nil, nil, false
	shared.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	return code
}

// missing skips t, or fails it when EnvRequire is 1.
func missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("redistest: no Redis server and %s=1: %v", EnvRequire, err)
	}
	t.Skipf("redistest: no Redis server (set %s or install redis-server): %v", EnvAddr, err)
}

// Addr returns the address of a Redis server for t: EGRESSKIT_REDIS_ADDR,
// the shared server (under Main), or a server of t's own.
func Addr(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv(EnvAddr); addr != "" {
		return addr
	}
	shared.mu.Lock()
	if !shared.enabled {
		shared.mu.Unlock()
		return Start(t).Addr
	}
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = NewServer()
	}
	srv, err := shared.srv, shared.err
	shared.mu.Unlock()
	if err != nil {
		missing(t, err)
	}
	return srv.Addr
}

// Start starts a redis-server for t alone, stopped when t ends. It skips
// (or fails, see EnvRequire) t when there is no redis-server binary.
func Start(t testing.TB) *Server {
	t.Helper()
	srv, err := NewServer()
	if errors.Is(err, ErrNoServer) {
		missing(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// StartWith starts a redis-server for t alone with more command-line
// arguments (see NewServerWith), stopped when t ends. It skips (or fails)
// t like Start.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	srv, err := NewServerWith(args...)
	if errors.Is(err, ErrNoServer) {
		missing(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// StartCluster starts a one-node Redis Cluster for t alone (see
// NewClusterServer), stopped when t ends. It skips (or fails) t like Start.
// EGRESSKIT_REDIS_ADDR does not apply: the server must be a cluster.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	srv, err := NewClusterServer(t.TempDir())
	if errors.Is(err, ErrNoServer) {
		missing(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// Options returns client options for addr ("host:port" or a redis:// URL)
// suited to tests and to redisstore: context deadlines bound socket I/O,
// and a failed dial is not retried in the background.
func Options(addr string) (*redis.Options, error) {
	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			return nil, err
		}
	}
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	opt.DialTimeout = time.Second
	return opt, nil
}

// Client returns a client of Addr(t), closed when t ends. It fails t when
// the server does not answer PING.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	return Dial(t, Addr(t))
}

// Dial returns a client of addr, closed when t ends. It fails t when the
// server does not answer PING.
func Dial(t testing.TB, addr string) *redis.Client {
	t.Helper()
	opt, err := Options(addr)
	if err != nil {
		t.Fatalf("redistest: %s: %v", EnvAddr, err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: PING %s: %v", addr, err)
	}
	return c
}

// Prefix returns a key prefix of t's own ("egt-" and 16 hex digits). When
// the server outlives t (EGRESSKIT_REDIS_ADDR, or the shared server of
// Main), every key under the prefix is deleted when t ends.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	prefix := "egt-" + hex.EncodeToString(b[:])
	shared.mu.Lock()
	enabled := shared.enabled
	shared.mu.Unlock()
	if os.Getenv(EnvAddr) != "" || enabled {
		addr := Addr(t)
		t.Cleanup(func() { deleteKeys(addr, prefix) })
	}
	return prefix
}

// deleteKeys deletes every key under prefix on addr, as far as it can.
func deleteKeys(addr, prefix string) {
	opt, err := Options(addr)
	if err != nil {
		return
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}
