// Command distributed shows two crawler processes sharing one per-host
// state in Redis: one circuit breaker, one pacing budget and one halt per
// host, whichever worker sends the request.
//
// Run without -worker, it is the coordinator: it starts four hosts on
// 127.0.0.1 (one failing with 502, one answering 429 once, one healthy, one
// refusing the crawler by name), starts two worker processes — this same
// binary with -worker 1 and -worker 2 — that crawl all four through their
// own egresskit chain over their own redisstore.Store, reads their JSON
// lines, and prints what each host received next to what each worker saw.
//
// It needs a Redis server: -redis ADDR ("host:port" or a redis:// URL), else
// the address in EGRESSKIT_REDIS_ADDR, else 127.0.0.1:6379. Its keys live
// under a prefix of their own and are deleted at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
)

// The crawl settings every worker shares: one fleet, one configuration.
const (
	userAgent = "DistributedBot/1.0 (+https://example.org/bot)"
	perMinute = 600 // pacing per host across the fleet: one request per 100ms
	failures  = 8   // consecutive failures that open a host's breaker
)

// hostStateConfig is the per-host state configuration of every worker.
func hostStateConfig() hoststate.Config {
	return hoststate.Config{
		Breaker: breaker.Config{FailureThreshold: failures},
		Limit:   ratelimit.Config{PerMinute: perMinute, Burst: 1},
	}
}

// envRedis names the Redis server when -redis is not given.
const envRedis = "EGRESSKIT_REDIS_ADDR"

// defaultRedis is tried when neither -redis nor envRedis says otherwise.
const defaultRedis = "127.0.0.1:6379"

func main() {
	// go-redis logs every failed dial to stderr; errors are reported here.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietLogger discards go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// realMain runs the coordinator, or a worker when args hold -worker, and
// returns the exit status.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("distributed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("redis", "", "Redis address, host:port or redis:// URL (default: $"+envRedis+", else "+defaultRedis+")")
	pages := fs.Int("pages", 3, "pages each worker requests from each host")
	id := fs.Int("worker", 0, "run as worker `N` (started by the coordinator)")
	prefix := fs.String("prefix", "", "Redis key prefix (worker only)")
	targets := fs.String("targets", "", "comma-separated target URLs (worker only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *pages < 1 {
		fmt.Fprintln(stderr, "distributed: -pages must be at least 1")
		return 2
	}
	redisAddr := resolveRedis(*addr, os.Getenv(envRedis))
	if *id != 0 {
		w := workerConfig{id: *id, redis: redisAddr, prefix: *prefix, pages: *pages, targets: strings.Split(*targets, ",")}
		if err := runWorker(ctx, w, stdout); err != nil {
			fmt.Fprintf(stderr, "distributed: worker %d: %v\n", *id, err)
			return 1
		}
		return 0
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "distributed:", err)
		return 1
	}
	if _, err := run(ctx, stdout, config{redis: redisAddr, exe: exe, pages: *pages}); err != nil {
		fmt.Fprintln(stderr, "distributed:", err)
		return 1
	}
	return 0
}

// resolveRedis picks the Redis address: the flag, else the environment,
// else the default.
func resolveRedis(flagValue, env string) string {
	switch {
	case flagValue != "":
		return flagValue
	case env != "":
		return env
	}
	return defaultRedis
}

// errNoRedis is returned when no Redis server answers at the address.
var errNoRedis = errors.New("no Redis server")

// dialRedis returns a client of addr ("host:port" or a redis:// URL) that
// bounds its socket I/O by context deadlines, as redisstore requires, after
// checking that the server answers.
func dialRedis(ctx context.Context, addr string) (*redis.Client, error) {
	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("redis address: %w", err)
		}
	}
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = time.Second
	opt.DialerRetries = 1
	c := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w at %s (start one, or give its address with -redis or %s): %v",
			errNoRedis, opt.Addr, envRedis, err)
	}
	return c, nil
}
