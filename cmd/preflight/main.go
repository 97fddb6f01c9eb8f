package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/probeinput"
	"github.com/egresskit/egresskit/probe"
)

// Exit statuses; see the package documentation. They follow the
// convention of every command of the module (README, "Exit status"): 0
// ok, 1 failure, 2 usage, 3 and up the command's verdicts.
const (
	exitHealthy     = 0
	exitFailure     = 1
	exitUsage       = 2
	exitDegraded    = 3
	exitCritical    = 4
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, isTerminal(os.Stderr))
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a character device, such as a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// proxyFlags collects repeated -proxy flags.
type proxyFlags []string

func (p *proxyFlags) String() string { return fmt.Sprintf("%d proxies", len(*p)) }

func (p *proxyFlags) Set(v string) error {
	*p = append(*p, v)
	return nil
}

// config is the parsed command line.
type config struct {
	targetsFile string
	proxies     proxyFlags
	proxiesFile string
	rulesFile   string
	timeout     time.Duration
	perRequest  time.Duration
	concurrency int
	perHost     int
	workers     int
	noRobots    bool
	matrix      bool
	method      string
	format      string
	exitZero    bool
	userAgent   string
	args        []string
}

// usageError is an error the user can fix; it exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func newFlagSet(cfg *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.targetsFile, "targets", "", "read targets from `FILE` (- for standard input)")
	fs.Var(&cfg.proxies, "proxy", "probe through the proxy `URL` (http, https, socks5, socks5h or direct; repeatable)")
	fs.StringVar(&cfg.proxiesFile, "proxies", "", "read proxies from `FILE`, one \"[ID] URL\" per line")
	fs.DurationVar(&cfg.timeout, "timeout", probeinput.DefaultDeadline, "global deadline of the whole run")
	fs.DurationVar(&cfg.perRequest, "per-request-timeout", 0, "deadline of each probe (default: the global deadline)")
	fs.IntVar(&cfg.concurrency, "concurrency", probeinput.DefaultConcurrency, "probes in flight at once")
	fs.IntVar(&cfg.perHost, "per-host", probeinput.DefaultPerHost, "probes in flight to one host (-1: no cap)")
	fs.IntVar(&cfg.workers, "workers", probeinput.DefaultWorkers, "the crawl's planned concurrency, scaled into recommendation.max_concurrency")
	fs.BoolVar(&cfg.noRobots, "ignore-robots", false, "probe URLs that robots.txt disallows")
	fs.BoolVar(&cfg.matrix, "matrix", false, "probe every target through every proxy")
	fs.StringVar(&cfg.rulesFile, "rules", "", "egress rules `FILE` (JSON, package egress): probe hosts only through the proxies their rule allows; with -matrix, report per rule and host whether an eligible proxy got through")
	fs.StringVar(&cfg.method, "method", "GET", "request method, GET or HEAD")
	fs.StringVar(&cfg.format, "format", "json", "output format on standard output, json or text")
	fs.BoolVar(&cfg.exitZero, "exit-zero", false, "exit 0 whatever the status (usage errors still exit 2, failures 1)")
	fs.StringVar(&cfg.userAgent, "user-agent", egresskit.DefaultUserAgent, "User-Agent of the probes and their robots.txt fetches: the crawler's own")
	fs.Usage = func() {} // run prints the usage itself, on standard output
	return fs
}

// printUsage writes the help text of fs to w.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: preflight [flags] [URL ...]

Probe targets (and proxies) within a time budget and print a JSON diagnosis
on standard output: status HEALTHY, DEGRADED or CRITICAL, success rate,
latencies, rate-limited and blocked counts, and a recommended backoff.

Targets: URL arguments, -targets FILE, or - for standard input; one per line,
"URL" or "URL EGRESS", '#' comments allowed.

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Exit status: 0 HEALTHY (and any status with -exit-zero), 1 failure (the probe
could not run or the report could not be written), 2 usage error (nothing was
sent), 3 DEGRADED, 4 CRITICAL, 130 interrupted (the partial report is written).

Environment: none is read; proxy credentials go in -proxy or -proxies URLs
and never appear in the output.

Example:
  preflight -timeout 10s -proxy http://user:pass@10.0.0.5:3128 -matrix \
      https://example.com/ https://example.org/robots.txt
  preflight -targets fleet.txt -format text
  preflight -proxies regions.txt -rules rules.json -matrix -targets fleet.txt
`)
}

// run is the command; it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) int {
	var cfg config
	fs := newFlagSet(&cfg, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stdout)
			return exitHealthy
		}
		// The flag package has printed the error.
		fmt.Fprintln(stderr, "Run 'preflight -help' for usage.")
		return exitUsage
	}
	cfg.args = fs.Args()
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	start := time.Now() // -timeout bounds the whole run, reading the input included
	targets, opts, err := prepare(&cfg, set, stdin, start)
	if err != nil {
		fmt.Fprintf(stderr, "preflight: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "Run 'preflight -help' for usage.")
			return exitUsage
		}
		return exitFailure
	}

	var prog *progress
	if tty {
		prog = startProgress(stderr)
		opts.Progress = prog.update
	}
	rep, err := probe.Run(ctx, targets, opts)
	if prog != nil {
		prog.stop()
	}
	interrupted := errors.Is(err, probe.ErrCanceled)
	if err != nil && !interrupted {
		fmt.Fprintf(stderr, "preflight: %v\n", err)
		if isInputError(err) {
			return exitUsage
		}
		return exitFailure
	}

	if err := write(stdout, rep, cfg.format); err != nil {
		fmt.Fprintf(stderr, "preflight: writing the report: %v\n", err)
		return exitFailure
	}
	if tty {
		writeSummary(stderr, rep)
	}
	switch {
	case interrupted:
		fmt.Fprintln(stderr, "preflight: interrupted; the report is partial")
		return exitInterrupted
	case cfg.exitZero:
		return exitHealthy
	}
	switch rep.Status {
	case probe.Healthy:
		return exitHealthy
	case probe.Degraded:
		return exitDegraded
	default:
		return exitCritical
	}
}

// isInputError reports whether Run rejected its input (it checks all
// input before sending anything).
func isInputError(err error) bool {
	var te *probe.TargetError
	var pe *probe.InvalidProxyError
	return errors.As(err, &te) || errors.As(err, &pe) ||
		errors.Is(err, probe.ErrNoTargets) || errors.Is(err, probe.ErrTooManyProbes) ||
		errors.Is(err, egresskit.ErrInvalidConfig)
}

// prepare validates the flags and reads the targets and proxies within
// the -timeout counted from start; every error it returns is a usage
// error: nothing has been sent.
func prepare(cfg *config, set map[string]bool, stdin io.Reader, start time.Time) ([]probe.Target, probe.Options, error) {
	var opts probe.Options
	if cfg.timeout <= 0 {
		return nil, opts, usagef("-timeout %v: must be positive", cfg.timeout)
	}
	if set["per-request-timeout"] && cfg.perRequest <= 0 {
		return nil, opts, usagef("-per-request-timeout %v: must be positive", cfg.perRequest)
	}
	if cfg.concurrency <= 0 {
		return nil, opts, usagef("-concurrency %d: must be positive", cfg.concurrency)
	}
	method := strings.ToUpper(cfg.method)
	if method != "GET" && method != "HEAD" {
		return nil, opts, usagef("-method %q: want GET or HEAD", cfg.method)
	}
	if cfg.format != "json" && cfg.format != "text" {
		return nil, opts, usagef("-format %q: want json or text", cfg.format)
	}
	if cfg.perHost == 0 || cfg.perHost < -1 {
		return nil, opts, usagef("-per-host %d: want a positive number, or -1 for no cap", cfg.perHost)
	}
	if cfg.workers <= 0 {
		return nil, opts, usagef("-workers %d: must be positive", cfg.workers)
	}
	if err := probeinput.ValidHeaderValue(cfg.userAgent); err != nil {
		return nil, opts, usagef("-user-agent: %v", err)
	}
	targets, proxies, err := readInputs(cfg, stdin, start.Add(cfg.timeout))
	if err != nil {
		return nil, opts, err
	}
	left := time.Until(start.Add(cfg.timeout))
	if left <= 0 {
		return nil, opts, usagef("reading the input took the whole -timeout %v", cfg.timeout)
	}
	var rules []egress.Rule
	if cfg.rulesFile != "" {
		f, err := os.Open(cfg.rulesFile)
		if err != nil {
			return nil, opts, usagef("-rules: %v", err)
		}
		rules, err = egress.ReadRules(f)
		f.Close()
		if err != nil {
			return nil, opts, usagef("-rules %s: %v", cfg.rulesFile, err)
		}
	}
	opts = probe.Options{
		Matrix:            cfg.matrix,
		Proxies:           proxies,
		Rules:             rules,
		Deadline:          left,
		PerRequestTimeout: cfg.perRequest,
		Concurrency:       cfg.concurrency,
		PerHost:           cfg.perHost,
		IgnoreRobots:      cfg.noRobots,
		Workers:           cfg.workers,
		Method:            method,
		UserAgent:         cfg.userAgent,
	}
	return targets, opts, nil
}

// write prints the report on w as JSON (indented, one document) or text.
func write(w io.Writer, rep *probe.Report, format string) error {
	if format == "text" {
		return writeText(w, rep)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
