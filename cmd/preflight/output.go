package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/egresskit/egresskit/probe"
)

// progress shows "probed N/M" on a terminal, redrawn every 200 ms by a
// goroutine that stop ends and waits for.
type progress struct {
	w     io.Writer
	done  atomic.Int64
	total atomic.Int64
	quit  chan struct{}
	wg    sync.WaitGroup
}

func startProgress(w io.Writer) *progress {
	p := &progress{w: w, quit: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				p.draw()
				fmt.Fprintln(p.w)
				return
			case <-t.C:
				p.draw()
			}
		}
	})
	return p
}

// update is the probe.Options.Progress callback: two atomic stores.
func (p *progress) update(pr probe.Progress) {
	p.total.Store(int64(pr.Total))
	p.done.Store(max(p.done.Load(), int64(pr.Done)))
}

func (p *progress) draw() {
	fmt.Fprintf(p.w, "\rpreflight: probed %d/%d", p.done.Load(), p.total.Load())
}

func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
}

// latency prints a percentile to three significant digits ("412µs",
// "1.23ms", "2.5s"), or "n/a" when no probe got a response.
func latency(d time.Duration, samples int) string {
	if samples == 0 {
		return "n/a"
	}
	for unit := time.Nanosecond; unit < time.Hour; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit).String()
		}
	}
	return d.Round(time.Second).String()
}

// writeSummary prints the diagnosis for a human.
func writeSummary(w io.Writer, rep *probe.Report) {
	d := rep.Diagnosis
	// The success rate is over the measured probes; say which were not.
	var unmeasured string
	if n := d.Total - d.Measured; n > 0 {
		unmeasured = fmt.Sprintf(" (%d of %d not measured: %d disallowed by robots.txt, %d canceled)",
			n, d.Total, d.Disallowed, n-d.Disallowed)
	}
	fmt.Fprintf(w, "preflight: %s: %d of %d measured probes succeeded (%.1f%%)%s, %d rate-limited, %d blocked, %d hung, p50 %s, p95 %s\n",
		d.Status, d.Succeeded, d.Measured, 100*d.SuccessRate, unmeasured, d.RateLimited, d.Blocked, d.Timeouts,
		latency(d.Latency.P50, d.Latency.Samples), latency(d.Latency.P95, d.Latency.Samples))
	for _, why := range d.Reasons {
		fmt.Fprintf(w, "  - %s\n", why)
	}
	if len(d.FailingEgresses) > 0 {
		fmt.Fprintf(w, "  failing egresses: %s\n", strings.Join(d.FailingEgresses, ", "))
	}
	if len(d.BlockingHosts) > 0 {
		fmt.Fprintf(w, "  hosts blocking every egress: %s\n", strings.Join(d.BlockingHosts, ", "))
	}
	b := d.Backoff
	fmt.Fprintf(w, "  backoff: initial %v, max %v, %d retries; concurrency x%.2f\n",
		b.BaseDelay, b.MaxDelay, b.MaxRetries, d.Recommendation.Concurrency)
}

// writeText prints the report as a table of results and the summary.
func writeText(w io.Writer, rep *probe.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tEGRESS\tSTATUS\tOUTCOME\tSTAGE\tLATENCY\tERROR")
	for _, r := range rep.Results {
		status := "-"
		if r.Status != 0 {
			status = fmt.Sprint(r.Status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", r.URL, r.Egress, status, r.OutcomeName(),
			r.Stage, r.Latency.Round(time.Millisecond), r.Err)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	sw := &errWriter{w: w}
	for _, c := range rep.Rules {
		verdict := "ok through " + strings.Join(c.Healthy, ", ")
		if !c.OK {
			verdict = "NO healthy eligible egress (eligible: " + strings.Join(c.Eligible, ", ") + ")"
		}
		fmt.Fprintf(sw, "rule %s, host %s: %s\n", c.Rule, c.Host, verdict)
	}
	if len(rep.Rules) > 0 {
		fmt.Fprintln(sw)
	}
	writeSummary(sw, rep)
	return sw.err
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
