// Command orchestrator is the decision an orchestrator takes after the
// pre-flight check, as one program: it runs preflight with the given
// arguments, applies the rules of decide to its exit status and JSON, and
// prints the decision as JSON.
//
// Given no target after its flags, it starts a local site and probes that,
// so that it runs without network access: -site ok (the default) serves
// pages (the decision is to crawl), -site blocked serves a WAF challenge
// (the decision is to halt, naming preflight's reasons).
//
// Exit status, as every command of the module: 0 crawl, 1 error (preflight
// failed, was misused or printed no usable report; or preflight could not
// be run), 2 usage of this command, 3 halt.
//
// The same rules drive the Airflow DAG (airflow_dag.py, through
// preflight_decision.py) and the Kubernetes CronJob (cronjob.yaml, through
// decide.sh); see README.md.
//
//	go build -o /tmp/preflight ./cmd/preflight
//	go run ./examples/orchestrator -preflight /tmp/preflight
//	go run ./examples/orchestrator -preflight /tmp/preflight -site blocked
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
)

// Exit statuses of the command.
const (
	exitCrawl = 0
	exitError = 1
	exitUsage = 2
	exitHalt  = 3
)

func main() {
	os.Exit(command(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// command parses args, starts the local site when no target is given, and
// runs; it returns the exit status.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orchestrator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("preflight", "preflight", "the preflight `command` (build it with: go build -o /tmp/preflight ./cmd/preflight)")
	site := fs.String("site", "ok", "with no target given: the local site to probe, `ok` (pages) or blocked (a WAF challenge)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: orchestrator [-preflight COMMAND] [-site ok|blocked] [-- PREFLIGHT-FLAGS URL...]")
		fmt.Fprintln(stderr, "\nRuns preflight and prints the orchestrator's decision as JSON.\n\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nExit status: 0 crawl, 1 error, 2 usage, 3 halt.")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitCrawl
		}
		return exitUsage
	}
	rest := fs.Args()
	if !hasTarget(rest) {
		h, ok := sites[*site]
		if !ok {
			fmt.Fprintf(stderr, "orchestrator: -site %q: want ok or blocked\n", *site)
			return exitUsage
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		rest = append(append([]string{}, rest...), "-timeout", "10s", srv.URL+"/a", srv.URL+"/b", srv.URL+"/c")
		fmt.Fprintf(stderr, "orchestrator: no target given: probing a local %s site at %s\n", *site, srv.URL)
	}
	return run(ctx, stdout, stderr, *bin, rest)
}

// hasTarget reports whether preflight's arguments name a target (an
// argument that is not a flag or a flag's value; -targets counts).
func hasTarget(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-targets" || a == "--targets":
			return true
		case len(a) > 1 && a[0] == '-':
			if !isBoolFlag(a) && !containsEq(a) {
				i++ // the flag's value
			}
		default:
			return true
		}
	}
	return false
}

func containsEq(a string) bool { return bytes.IndexByte([]byte(a), '=') >= 0 }

// isBoolFlag reports whether a is one of preflight's flags that take no
// value.
func isBoolFlag(a string) bool {
	switch a {
	case "-matrix", "--matrix", "-ignore-robots", "--ignore-robots", "-exit-zero", "--exit-zero", "-":
		return true
	}
	return false
}

// sites are the local sites probed when no target is given.
var sites = map[string]http.Handler{
	"ok": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "<html><body>a page</body></html>")
	}),
	"blocked": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><head><title>Attention Required! | Cloudflare</title></head><script>window._cf_chl_opt={};</script></html>")
	}),
}

// run runs preflight and prints the decision; it returns the exit status.
func run(ctx context.Context, out, stderr io.Writer, bin string, args []string) int {
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintln(stderr, "orchestrator:", err)
			return exitError
		}
		code = ee.ExitCode()
	}
	d := decide(code, stdout.Bytes())
	b, _ := json.Marshal(d)
	fmt.Fprintln(out, string(b))
	switch d.Action {
	case "crawl":
		// Here the orchestrator starts the crawl with d.MaxConcurrency
		// workers, retry.Policy{BaseDelay: d.InitialDelaySec s}, and a
		// scope that leaves d.SkipHosts alone.
		return exitCrawl
	case "halt":
		return exitHalt
	}
	return exitError
}
