// Command prometheus is a crawler that exports egresskit's metrics. It
// crawls five local targets — healthy, flaky, throttling, behind a bot
// challenge, and down — through the egresskit chain with the
// telemetry/prometheus collector as its observer, and serves /metrics:
// requests and attempts by outcome and egress reason, retries, attempt
// latency and pacing-token waits as histograms, hosts per breaker state
// (from the in-memory host state), the state of two watched hosts, and the
// score and quarantine of the egress pool's one direct endpoint.
// grafana-dashboard.json in this directory charts them.
//
// By default it listens on 127.0.0.1:0 (a free port; -listen to choose)
// and crawls every -interval until interrupted. With -once it crawls once,
// checks its own /metrics, prints the address and exits. It needs no
// network: the targets run on 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2) // as every command of the module: 1 failure, 2 usage
		}
		os.Exit(1)
	}
}

// errUsage wraps a bad command line.
var errUsage = errors.New("usage")

func run(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("prometheus", flag.ContinueOnError)
	fs.SetOutput(out)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve /metrics on")
	once := fs.Bool("once", false, "crawl once, check /metrics, print its address and exit")
	interval := fs.Duration("interval", 15*time.Second, "pause between crawl rounds")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage is printed
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := start(*listen)
	if err != nil {
		return err
	}
	defer c.close()
	fmt.Fprintln(out, "metrics:", c.metricsURL())

	for round := 1; ; round++ {
		results := c.crawl(ctx)
		fmt.Fprintf(out, "round %d: %s\n", round, summary(results))
		if *once {
			n, err := countSeries(ctx, c.metricsURL())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "/metrics serves %d egresskit samples\n", n)
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

// countSeries scrapes url and counts its egresskit samples.
func countSeries(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "egresskit_") {
			n++
		}
	}
	return n, nil
}
