// Command preflight-then-crawl probes its targets before it crawls them, as
// a crawler should before it dispatches a fleet: probe.Run measures the
// target set, the diagnosis sets the chain's retry policy, pacing,
// concurrency and the hosts to leave alone, and a CRITICAL verdict halts the
// crawl before a single page is fetched.
//
// It needs no network: the -scenario flag (healthy, degraded or critical)
// chooses how five hosts on 127.0.0.1 behave. Exit status, as every
// command of the module: 0 crawled, 1 failure, 2 usage, 3 halted on a
// CRITICAL verdict.
//
//	go run ./examples/preflight-then-crawl -scenario healthy
//	go run ./examples/preflight-then-crawl -scenario degraded
//	go run ./examples/preflight-then-crawl -scenario critical  # exit 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/probe"
)

const userAgent = "PreflightBot/1.0 (+https://example.org/bot)"

// requestDeadline bounds each crawl request: its attempts, pacing waits and
// retries.
const requestDeadline = 30 * time.Second

// errCritical is returned by run when the diagnosis halts the crawl.
var errCritical = errors.New("halting: CRITICAL")

// options are the settings of one run.
type options struct {
	workers int // the planned number of crawl workers
	pages   int // pages crawled per host
}

func main() {
	scenario := flag.String("scenario", scenarioHealthy, "how the local hosts behave: "+strings.Join(scenarios, ", "))
	workers := flag.Int("workers", 4, "planned number of crawl workers, scaled by the diagnosis")
	pages := flag.Int("pages", 3, "pages to crawl per host")
	flag.Parse()
	if *workers < 1 || *pages < 1 {
		fmt.Fprintln(os.Stderr, "preflight-then-crawl: -workers and -pages must be at least 1")
		os.Exit(2)
	}
	ts, err := startTargets(*scenario)
	if err != nil { // an unknown -scenario
		fmt.Fprintln(os.Stderr, "preflight-then-crawl:", err)
		os.Exit(2)
	}
	err = run(context.Background(), os.Stdout, ts, options{workers: *workers, pages: *pages})
	ts.Close()
	switch {
	case errors.Is(err, errCritical):
		os.Exit(3)
	case err != nil:
		fmt.Fprintln(os.Stderr, "preflight-then-crawl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, ts *targetSet, opt options) error {
	// 1. Probe every host's start page, within a strict budget. The probe
	// classifies as the chain will, recognising refusals that name us.
	targets := make([]probe.Target, len(ts.sites))
	for i, s := range ts.sites {
		targets[i] = probe.Target{URL: s.srv.URL + "/"}
	}
	rep, err := probe.Run(ctx, targets, probe.Options{
		UserAgent:         userAgent,
		Classify:          classify.Config{AgentToken: "PreflightBot"},
		Deadline:          5 * time.Second,
		PerRequestTimeout: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	names := map[string]string{} // host key → site name
	for i, r := range rep.Results {
		names[r.Host] = ts.sites[i].name
	}
	printDiagnosis(out, rep, ts, names)

	// 2. CRITICAL: dispatch nothing. (rep.Recommendation.Halt() is the
	// laxer rule: it would still crawl at a fraction of the concurrency
	// when throttling alone made the set CRITICAL.)
	if rep.Status == probe.Critical {
		fmt.Fprintln(out, "halting: CRITICAL, nothing crawled")
		return errCritical
	}

	// 3. Configure the chain from the diagnosis: the retry policy and the
	// pacing, the hosts to leave alone, and the number of workers.
	policy := rep.Backoff.Policy()
	// The chain starts an attempt's timeout before the attempt's pacing
	// wait, so a request that queued for its turn at a host can time out
	// before it is sent, and be sent again. Until the timeout starts after
	// the wait, bound each whole request instead.
	policy.AttemptTimeout, policy.Deadline = 0, requestDeadline
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	store, err := hoststate.NewMemory(hoststate.Config{Limit: rep.Recommendation.RateLimit()})
	if err != nil {
		return err
	}
	chain, err := egresskit.New(egresskit.Config{
		Base:      base,
		UserAgent: userAgent,
		Retry:     policy,
		Store:     store,
		Scope:     egresskit.Scope{Deny: rep.Recommendation.HaltHosts},
	})
	if err != nil {
		return err
	}
	workers := rep.Recommendation.Workers(opt.workers)
	fmt.Fprintf(out, "chain: %d retries, backoff %v..%v, %v per request; %d of %d workers; leave alone: %s\n",
		policy.MaxRetries, policy.BaseDelay, policy.MaxDelay, policy.Deadline, workers, opt.workers,
		list(hostList(rep.Recommendation.HaltHosts, names)))

	// 4. Crawl, page by page across the hosts, so that the workers do not
	// queue behind one host's pacing.
	var jobs []job
	for page := range opt.pages {
		for _, s := range ts.sites {
			jobs = append(jobs, job{site: s.name, url: fmt.Sprintf("%s/page/%d", s.srv.URL, page)})
		}
	}
	results := crawl(ctx, &http.Client{Transport: chain}, jobs, workers)
	return printCrawl(out, ts, results)
}

// job is one page to crawl.
type job struct {
	site, url string
}

// result is what became of one job.
type result struct {
	site    string
	outcome string // "ok", "skipped" (host denied by the diagnosis), or the failure
}

// crawl fetches every job with n workers and returns the results.
func crawl(ctx context.Context, c *http.Client, jobs []job, n int) []result {
	queue := make(chan job)
	var (
		mu      sync.Mutex // guards results
		results []result
		wg      sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			for j := range queue {
				r := result{site: j.site, outcome: fetch(ctx, c, j.url)}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
	return results
}

// fetch GETs url and says what became of it.
func fetch(ctx context.Context, c *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := c.Do(req)
	switch {
	case errors.Is(err, egresskit.ErrOutOfScope):
		return "skipped"
	case err != nil:
		return classify.Of(nil, err).Outcome.String()
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "transient"
	}
	return classify.Of(resp, nil).Outcome.String()
}

// printDiagnosis prints the verdict, its reasons, each host's probe and the
// recommendations.
func printDiagnosis(out io.Writer, rep *probe.Report, ts *targetSet, names map[string]string) {
	fmt.Fprintf(out, "scenario %s: probed %d hosts: %s (success rate %.2f, rate-limited %d, blocked %d)\n",
		ts.scenario, rep.Total, rep.Status, rep.SuccessRate, rep.RateLimited, rep.Blocked)
	for _, why := range rep.Reasons {
		fmt.Fprintln(out, "  reason:", why)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", names[r.Host], r.Status, r.OutcomeName(), r.Reason)
	}
	tw.Flush()
	rec := rep.Recommendation
	fmt.Fprintf(out, "  recommended: concurrency %.2f, backoff %v..%v with %d retries, halt hosts: %s\n",
		rec.Concurrency, rep.Backoff.BaseDelay, rep.Backoff.MaxDelay, rep.Backoff.MaxRetries, list(hostList(rec.HaltHosts, names)))
	if len(rec.HostPerMinute) > 0 {
		hosts := make([]string, 0, len(rec.HostPerMinute))
		for h := range rec.HostPerMinute {
			hosts = append(hosts, h)
		}
		sort.Slice(hosts, func(i, j int) bool { return names[hosts[i]] < names[hosts[j]] })
		for _, h := range hosts {
			fmt.Fprintf(out, "  recommended: pace %s at %g/min\n", names[h], rec.HostPerMinute[h])
		}
	}
}

// printCrawl prints, per host, what became of its pages, and what each host
// received in all.
func printCrawl(out io.Writer, ts *targetSet, results []result) error {
	by := map[string]map[string]int{}
	crawled := 0
	for _, r := range results {
		if by[r.site] == nil {
			by[r.site] = map[string]int{}
		}
		by[r.site][r.outcome]++
		if r.outcome == classify.OK.String() {
			crawled++
		}
	}
	fmt.Fprintf(out, "crawled %d of %d pages\n", crawled, len(results))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  host\tpages\tresults\treceived (probe + crawl)\trobots.txt")
	for _, s := range ts.sites {
		outcomes := make([]string, 0, len(by[s.name]))
		n := 0
		for o, k := range by[s.name] {
			outcomes = append(outcomes, fmt.Sprintf("%s %d", o, k))
			n += k
		}
		sort.Strings(outcomes)
		pages, robots := s.counts()
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\n", s.name, n, strings.Join(outcomes, ", "), pages, robots)
	}
	return tw.Flush()
}

// hostList maps host keys to site names.
func hostList(hosts []string, names map[string]string) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = names[h]
	}
	sort.Strings(out)
	return out
}

// list joins names with commas, or says "none".
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
