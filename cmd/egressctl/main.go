package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/haltrec"
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
	envRedis  = "EGRESSCTL_REDIS"
	envPrefix = "EGRESSCTL_PREFIX"
	envToken  = "EGRESSCTL_TOKEN"
)

// Defaults of the flags.
const (
	defaultRedis  = "127.0.0.1:6379"
	defaultPrefix = "egresskit" // redisstore's
	defaultAddr   = "127.0.0.1:8080"
)

const usageHead = `Usage:
  egressctl [flags] halts [-json]                          list the halted hosts, newest first
  egressctl [flags] show [-json] HOST                      a host's state, halts, notes and audit trail
  egressctl [flags] resume HOST -reason TEXT -by NAME      lift a halt, fleet-wide, audited
  egressctl [flags] serve [-addr ADDR] [serve flags]       the review console (token: $` + envToken + `)

HOST is a host, host:port or URL; command flags may come before or after it.
`

const usageTail = `
Environment:
  ` + envRedis + `   the Redis server when -redis is not given; put a password here,
                    not on the command line
  ` + envPrefix + `  the key prefix when -prefix is not given
  ` + envToken + `   serve: the console's access token, at least 128 bits (openssl rand
                    -hex 16 prints one); required unless -no-token

Exit status: 0 done; 1 failure (Redis unreachable, a file missing or unreadable,
an I/O error); 2 usage; 3 the host is not halted (resume) or has no record (show).
`

// globalFlags and commandFlags define the flags, for parsing and for -h.
func globalFlags(g *global) *flag.FlagSet {
	fs := flag.NewFlagSet("egressctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.redis, "redis", "", "the Redis server `ADDR`: host:port, or a redis:// or rediss:// (TLS) URL\n(default $"+envRedis+", else "+defaultRedis+")")
	fs.StringVar(&g.prefix, "prefix", "", "the stores' key `PREFIX`, redisstore.Config.Prefix\n(default $"+envPrefix+", else "+defaultPrefix+")")
	fs.BoolVar(&g.cluster, "cluster", false, "ADDR is a Redis Cluster: comma-separated seeds, or a URL with addr=\nparameters (default off)")
	fs.StringVar(&g.ca, "tls-ca", "", "trust the CA in `FILE` for the server's certificate; implies TLS (default none)")
	fs.StringVar(&g.cert, "tls-cert", "", "a client certificate `FILE`, with -tls-key (default none)")
	fs.StringVar(&g.key, "tls-key", "", "the client certificate's key `FILE` (default none)")
	fs.StringVar(&g.audit, "audit", "", "the audit log `FILE`: resume and the console append to it, show and the\nconsole read a host's trail from it; processes may share it (default none)")
	fs.BoolVar(&g.domain, "domain", false, "hosts are keyed by registrable domain (default off: by host)")
	return fs
}

// cmdFlags are a command's flags.
type cmdFlags struct {
	asJSON, readOnly, behindTLS, noToken bool
	reason, by, addr, names              string
	sessionTTL                           time.Duration
}

func commandFlags(c *cmdFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("command", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.asJSON, "json", false, "halts, show: print one JSON object (default off)")
	fs.StringVar(&c.reason, "reason", "", "resume: why the host may be contacted again, one line of `TEXT` (required)")
	fs.StringVar(&c.by, "by", "", "resume: the `NAME` of who resumes it (required)")
	fs.StringVar(&c.addr, "addr", defaultAddr, "serve: the `ADDR` to listen on, host:port (default "+defaultAddr+")")
	fs.StringVar(&c.names, "name", "", "serve: comma-separated host `NAMES` the console is reached by, besides IP\naddresses and localhost: a request for any other Host is refused (default none)")
	fs.BoolVar(&c.readOnly, "read-only", false, "serve: pages without forms; every change refused (default off)")
	fs.BoolVar(&c.behindTLS, "behind-tls", false, "serve: a TLS proxy fronts the console, so its cookies are Secure (default off)")
	fs.DurationVar(&c.sessionTTL, "session-ttl", 0, "serve: how long a sign-in lasts, a `DURATION` (default 8h)")
	fs.BoolVar(&c.noToken, "no-token", false, "serve: run without $"+envToken+", trusting whoever reaches the console;\nallowed only on a loopback address (default off)")
	return fs
}

// usage is the help text: the commands, every flag with its description
// and default, the environment and the exit statuses.
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	b.WriteString("\nFlags (before the command):\n")
	printFlags(&b, globalFlags(new(global)))
	b.WriteString("\nCommand flags:\n")
	printFlags(&b, commandFlags(new(cmdFlags), io.Discard))
	b.WriteString(usageTail)
	return b.String()
}

func printFlags(b *strings.Builder, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		head := "  -" + f.Name
		if name != "" {
			head += " " + name
		}
		lines := strings.Split(text, "\n")
		fmt.Fprintf(b, "%-20s %s\n", head, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(b, "%-20s %s\n", "", l)
		}
	})
}

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
	where  string // "redis ADDR, prefix P": said with every answer
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
	fs := globalFlags(&g)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return exitOK
		}
		fmt.Fprintf(stderr, "egressctl: %v\nRun egressctl -h for the flags.\n", err)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	var err error
	switch cmd {
	case "halts", "show", "resume", "serve":
		err = dispatch(ctx, g, cmd, rest, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage())
		return exitOK
	default:
		err = usagef("unknown command %s", argText(cmd))
	}
	var ue usageError
	var nf notFound
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage())
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "egressctl: %v\nRun egressctl -h for the commands and flags.\n", err)
		return exitUsage
	case errors.As(err, &nf):
		fmt.Fprintf(stderr, "egressctl: %v\n", err)
		return exitNotFound
	}
	fmt.Fprintf(stderr, "egressctl: %s\n", haltrec.Line(telemetry.Redactor{}.RedactError(err), 2000))
	return exitError
}

// argText is a command-line argument for an error message: redacted
// (userinfo, secret-looking values), one line, bounded, quoted.
func argText(s string) string {
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		scheme := ""
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			scheme = s[:i+3]
		}
		s = scheme + telemetry.Redacted + s[at:]
	}
	s = telemetry.Redactor{}.RedactString(haltrec.Line(s, 120))
	return strconv.QuoteToGraphic(s)
}

// dispatch parses the command's own flags (before or after its one
// argument), connects to Redis and runs it.
func dispatch(ctx context.Context, g global, cmd string, args []string, stdout, stderr io.Writer) error {
	var c cmdFlags
	fs := commandFlags(&c, stderr)
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
	if err := onlyFor(fs, cmd); err != nil {
		return err
	}
	var by, reason string
	if cmd == "resume" {
		if strings.TrimSpace(c.reason) == "" || strings.TrimSpace(c.by) == "" {
			return usagef("resume needs -reason and -by")
		}
		var err error
		if reason, err = haltrec.Reason(c.reason, haltrec.MaxText); err != nil {
			return usagef("-reason: %v: one line of printable text, at most %d bytes", err, haltrec.MaxText)
		}
		if by, err = haltrec.Reason(c.by, haltrec.MaxBy); err != nil {
			return usagef("-by: %v: one line of printable text, at most %d bytes", err, haltrec.MaxBy)
		}
	}
	var host string
	mode := hostkey.ByHost
	if g.domain {
		mode = hostkey.ByDomain
	}
	if want == 1 {
		var err error
		if host, err = hostkey.Parse(pos[0], mode); err != nil {
			return usagef("%s is not a host, host:port or URL", argText(pos[0]))
		}
	}
	var sc *serveConfig
	if cmd == "serve" {
		var err error
		if sc, err = checkServe(c); err != nil {
			return err
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
		return e.halts(ctx, c.asJSON)
	case "show":
		return e.show(ctx, host, c.asJSON)
	case "resume":
		return e.resume(ctx, host, by, reason)
	}
	return e.serve(ctx, sc)
}

// onlyFor refuses a command flag given to a command it does not belong
// to.
func onlyFor(fs *flag.FlagSet, cmd string) error {
	belongs := map[string]string{"json": "halts show", "reason": "resume", "by": "resume",
		"addr": "serve", "name": "serve", "read-only": "serve", "behind-tls": "serve",
		"session-ttl": "serve", "no-token": "serve"}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && !strings.Contains(belongs[f.Name], cmd) {
			err = usagef("-%s is not a flag of %s", f.Name, cmd)
		}
	})
	return err
}

// redisAddr returns the Redis address to use and checks its form: a bad
// address is a usage error, not an unreachable server.
func redisAddr(g global) (string, error) {
	addr := g.redis
	if addr == "" {
		addr = os.Getenv(envRedis)
	}
	if addr == "" {
		addr = defaultRedis
	}
	if strings.Contains(addr, "://") {
		return addr, nil // the URL parsers check it
	}
	for _, a := range strings.Split(addr, ",") {
		if err := checkHostPort(a); err != nil {
			return "", usagef("-redis %s: %v: want host:port, or a redis:// or rediss:// URL", argText(a), err)
		}
		if !g.cluster && strings.Contains(addr, ",") {
			return "", usagef("-redis: several addresses are for -cluster")
		}
	}
	return addr, nil
}

func checkHostPort(a string) error {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("not host:port")
	}
	if h == "" {
		return errors.New("no host")
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return errors.New("the port is not a number from 1 to 65535")
	}
	return nil
}

// connect makes the Redis client and the Store.
func connect(ctx context.Context, g global) (*env, error) {
	addr, err := redisAddr(g)
	if err != nil {
		return nil, err
	}
	prefix := g.prefix
	if prefix == "" {
		prefix = os.Getenv(envPrefix)
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
	shownPrefix := prefix
	if shownPrefix == "" {
		shownPrefix = defaultPrefix
	}
	where := "redis " + haltrec.Line(shown, 200) + ", prefix " + haltrec.Line(shownPrefix, 100)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("no Redis answers at %s: %s", haltrec.Line(shown, 200), telemetry.Redactor{}.RedactError(err))
	}
	st, err := redisstore.New(client, redisstore.Config{
		Prefix:       prefix,
		OnRedisError: redisstore.FailClosed,
		Timeout:      2 * time.Second,
		OnWarning:    func(redisstore.Warning) {}, // a reader: the crawl's workers report these
	})
	if err != nil {
		client.Close()
		return nil, usagef("-prefix: %v", err)
	}
	return &env{store: st, client: client, audit: g.audit, where: where}, nil
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
