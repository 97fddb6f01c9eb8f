// Command orchestrator is the decision an orchestrator takes after the
// pre-flight check, as one program: it runs preflight with the given
// arguments, applies the rules of decide to its exit status and JSON, and
// prints the decision as JSON. Exit status: 0 crawl, 3 halt, 4 error.
//
// The same rules drive the Airflow DAG (airflow_dag.py, through
// preflight_decision.py) and the Kubernetes CronJob (cronjob.yaml, through
// decide.sh); see README.md.
//
//	go build -o /tmp/preflight ./cmd/preflight
//	go run ./examples/orchestrator -preflight /tmp/preflight -- -timeout 10s https://example.org/
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// Exit statuses of the command.
const (
	exitCrawl = 0
	exitHalt  = 3
	exitError = 4
)

func main() {
	fs := flag.NewFlagSet("orchestrator", flag.ContinueOnError)
	bin := fs.String("preflight", "preflight", "the preflight `command`")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	os.Exit(run(context.Background(), os.Stdout, *bin, fs.Args()))
}

// run runs preflight and prints the decision; it returns the exit status.
func run(ctx context.Context, out io.Writer, bin string, args []string) int {
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintln(os.Stderr, "orchestrator:", err)
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
