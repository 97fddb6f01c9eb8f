package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/telemetry"
	"github.com/redis/go-redis/v9"
)

// Exit statuses; see the package documentation.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
)

// The environment variables read.
const (
	envRedis = "EGRESSCTL_REDIS"
	envToken = "EGRESSCTL_TOKEN"
)

const usage = `Usage:
  egressctl [flags] halts [-json]                          list the halted hosts, newest first
  egressctl [flags] show [-json] HOST                      a host's state, halts and notes
  egressctl [flags] resume HOST -reason TEXT -by NAME      lift a halt, fleet-wide, audited
  egressctl [flags] serve [-addr ADDR] [-read-only]        the review console ($EGRESSCTL_TOKEN)

Flags:
  -redis ADDR  -cluster  -tls-ca FILE  -tls-cert FILE  -tls-key FILE
  -prefix P  -audit FILE  -domain

Exit status: 0 done, 1 error, 2 usage, 3 host not halted or unknown.
`

func main() {
	redis.SetLogger(quiet{}) // its errors reach the user through ours
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// quiet drops go-redis's own log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// usageError is an error the user can fix by changing the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// notFound is a host that is not halted or has no record.
type notFound struct{ msg string }

func (e notFound) Error() string { return e.msg }

// env is what every command works with.
type env struct {
	store  *redisstore.Store
	client redis.UniversalClient
	audit  string
	mode   hostkey.Mode
	stdout io.Writer
	stderr io.Writer
}

// global are the flags before the command.
type global struct {
	redis, prefix, audit string
	ca, cert, key        string
	cluster, domain      bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g global
	fs := flag.NewFlagSet("egressctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.redis, "redis", "", "")
	fs.StringVar(&g.prefix, "prefix", "", "")
	fs.StringVar(&g.audit, "audit", "", "")
	fs.StringVar(&g.ca, "tls-ca", "", "")
	fs.StringVar(&g.cert, "tls-cert", "", "")
	fs.StringVar(&g.key, "tls-key", "", "")
	fs.BoolVar(&g.cluster, "cluster", false, "")
	fs.BoolVar(&g.domain, "domain", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "egressctl: %v\n%s", err, usage)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	var err error
	switch cmd {
	case "halts", "show", "resume", "serve":
		err = dispatch(ctx, g, cmd, rest, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = usagef("unknown command %q", cmd)
	}
	var ue usageError
	var nf notFound
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "egressctl: %v\n%s", err, usage)
		return exitUsage
	case errors.As(err, &nf):
		fmt.Fprintf(stderr, "egressctl: %v\n", err)
		return exitNotFound
	}
	fmt.Fprintf(stderr, "egressctl: %v\n", err)
	return exitError
}

// dispatch parses the command's own flags (before or after its one
// argument), connects to Redis and runs it.
func dispatch(ctx context.Context, g global, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	reason := fs.String("reason", "", "why the host may be contacted again (required)")
	by := fs.String("by", "", "who resumes it (required)")
	addr := fs.String("addr", "127.0.0.1:8080", "the address to serve the console on")
	readOnly := fs.Bool("read-only", false, "serve the console without forms")
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	want := map[string]int{"halts": 0, "show": 1, "resume": 1, "serve": 0}[cmd]
	if len(pos) != want {
		return usagef("%s takes %d argument(s), got %d", cmd, want, len(pos))
	}
	if cmd == "resume" && (strings.TrimSpace(*reason) == "" || strings.TrimSpace(*by) == "") {
		return usagef("resume needs -reason and -by")
	}
	var host string
	mode := hostkey.ByHost
	if g.domain {
		mode = hostkey.ByDomain
	}
	if want == 1 {
		var err error
		if host, err = hostkey.Parse(pos[0], mode); err != nil {
			return usagef("%q is not a host, host:port or URL", pos[0])
		}
	}
	e, err := connect(ctx, g)
	if err != nil {
		return err
	}
	defer e.client.Close()
	e.mode, e.stdout, e.stderr = mode, stdout, stderr
	switch cmd {
	case "halts":
		return e.halts(ctx, *asJSON)
	case "show":
		return e.show(ctx, host, *asJSON)
	case "resume":
		return e.resume(ctx, host, strings.TrimSpace(*by), strings.TrimSpace(*reason))
	}
	return e.serve(ctx, *addr, os.Getenv(envToken), *readOnly)
}

// connect makes the Redis client and the Store.
func connect(ctx context.Context, g global) (*env, error) {
	addr := g.redis
	if addr == "" {
		addr = os.Getenv(envRedis)
	}
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	tlsConf, err := tlsConfig(g)
	if err != nil {
		return nil, err
	}
	var client redis.UniversalClient
	var shown string // the address, without credentials, for messages
	if g.cluster {
		var opt *redis.ClusterOptions
		if strings.Contains(addr, "://") {
			if opt, err = redis.ParseClusterURL(addr); err != nil {
				return nil, usagef("-redis: not a Redis Cluster URL")
			}
		} else {
			opt = &redis.ClusterOptions{Addrs: strings.Split(addr, ",")}
		}
		if tlsConf != nil {
			opt.TLSConfig = tlsConf
		}
		opt.ContextTimeoutEnabled, opt.DialTimeout = true, 2*time.Second
		shown = strings.Join(opt.Addrs, ",")
		client = redis.NewClusterClient(opt)
	} else {
		opt := &redis.Options{Addr: addr}
		if strings.Contains(addr, "://") {
			if opt, err = redis.ParseURL(addr); err != nil {
				return nil, usagef("-redis: not a redis:// or rediss:// URL")
			}
		}
		if tlsConf != nil {
			if opt.TLSConfig != nil {
				tlsConf.ServerName = opt.TLSConfig.ServerName
			}
			opt.TLSConfig = tlsConf
		}
		opt.ContextTimeoutEnabled, opt.DialTimeout, opt.MaxRetries = true, 2*time.Second, 1
		shown = opt.Addr
		client = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("no Redis answers at %s: %s", shown, telemetry.Redactor{}.RedactError(err))
	}
	st, err := redisstore.New(client, redisstore.Config{
		Prefix:       g.prefix,
		OnRedisError: redisstore.FailClosed,
		Timeout:      2 * time.Second,
		OnWarning:    func(redisstore.Warning) {}, // a reader: the crawl's workers report these
	})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &env{store: st, client: client, audit: g.audit}, nil
}

// tlsConfig builds the TLS configuration of -tls-ca, -tls-cert and
// -tls-key, or nil when none is given.
func tlsConfig(g global) (*tls.Config, error) {
	if g.ca == "" && g.cert == "" && g.key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.ca != "" {
		pem, err := os.ReadFile(g.ca)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no certificate in %s", g.ca)
		}
	}
	if (g.cert == "") != (g.key == "") {
		return nil, usagef("-tls-cert and -tls-key go together")
	}
	if g.cert != "" {
		kp, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

// openAudit opens the audit log given with -audit, or returns nil.
func (e *env) openAudit() (*telemetry.Audit, error) {
	if e.audit == "" {
		return nil, nil
	}
	return telemetry.NewAudit(telemetry.AuditConfig{Path: e.audit, SyncEachLine: true})
}

var _ hoststate.HaltLog = (*redisstore.Store)(nil)
