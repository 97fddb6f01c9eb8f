// Command colly crawls a small local web with Colly v2 through the egresskit
// chain: robots.txt is obeyed by the chain, a host answering 429 is paced,
// a host serving a bot challenge is halted and escalated, and every request
// leaves through a proxy chosen by egresskit's egress pool. It needs no
// network: the hosts and the proxies run on 127.0.0.1.
//
// Two Colly gotchas, both handled below:
//
//   - Collector.SetProxyFunc (and SetProxy, which calls it) replaces the
//     chain. In Colly v2.3.0 it checks whether the client's Transport is an
//     *http.Transport; the chain is not one, so Colly installs a new
//     &http.Transport{Proxy: p, DisableKeepAlives: true} in its place.
//     Every later request then skips robots.txt, retries, pacing, circuit
//     breakers, halts and classification, silently, and runs without the
//     chain's timeouts. (Calling WithTransport after SetProxyFunc drops the
//     proxy function instead.) Choose proxies with egresskit's egress pool
//     (Config.Egress) and never call SetProxy or SetProxyFunc on a
//     collector that uses the chain.
//   - Colly sets its own User-Agent header on every request ("colly -
//     https://github.com/gocolly/colly" unless told otherwise). The chain
//     judges robots.txt, and recognises refusals naming the crawler, for
//     the User-Agent a request is actually sent with, so that is always
//     consistent; but the crawler's identity should be set in one place.
//     Set it in the chain's Config.UserAgent and clear Colly's
//     (colly.UserAgent("")): a request without one gets the chain's.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// userAgent is the crawler's identity, set in one place: the chain's
// Config.UserAgent (see the package doc).
const userAgent = "colly-example/1.0 (+https://example.org/bot)"

// perMinute is the configured pacing rate of every host.
const perMinute = 600

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "colly:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	w := newWeb()
	defer w.close()
	return crawl(ctx, out, w)
}

// attempts counts the chain's attempts per host key, from its events.
type attempts struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (a *attempts) Observe(_ context.Context, e *telemetry.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n[e.Host]++
}

func (a *attempts) of(host string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[host]
}

// newPool returns an egress pool over the web's two forward proxies.
func newPool(w *web) (*egress.Pool, error) {
	return egress.New(egress.Config{Endpoints: []egress.Endpoint{
		{ID: "proxy-a", Proxy: w.proxies["proxy-a"].URL},
		{ID: "proxy-b", Proxy: w.proxies["proxy-b"].URL},
	}})
}

// newChain returns the egresskit chain sending through pool.
func newChain(pool *egress.Pool, obs telemetry.Observer, onEscalate func(egresskit.Escalation)) (*egresskit.Transport, error) {
	store, err := hoststate.NewMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: perMinute, Burst: 5}})
	if err != nil {
		return nil, err
	}
	return egresskit.New(egresskit.Config{
		// robots.txt leaves through the same proxies as the pages.
		Base:      pool,
		Egress:    pool,
		UserAgent: userAgent,
		Retry: retry.Policy{
			MaxRetries: 2,
			BaseDelay:  100 * time.Millisecond,
			MaxDelay:   5 * time.Second,
			Deadline:   8 * time.Second,
		},
		Store:      store,
		Observers:  []telemetry.Observer{obs},
		OnEscalate: onEscalate,
	})
}

// newCollector returns a Colly collector whose every request goes through
// chain.
func newCollector(ctx context.Context, chain http.RoundTripper) *colly.Collector {
	c := colly.NewCollector(
		colly.UserAgent(""), // the chain sets the identity (Config.UserAgent)
		colly.StdlibContext(ctx),
	)
	// The chain fetches and obeys robots.txt (RFC 9309, with Crawl-delay
	// as a pacing ceiling); Colly's own check would fetch it a second
	// time. It is off by default in Colly v2; say so explicitly.
	c.IgnoreRobotsTxt = true
	c.WithTransport(chain)
	// Client.Timeout bounds the whole chain: pacing waits, retries and
	// Retry-After pauses included. Colly's default is 10s.
	c.SetRequestTimeout(15 * time.Second)
	// Do NOT call c.SetProxy or c.SetProxyFunc from here on: it would
	// replace the chain with a bare http.Transport (see the package doc).
	return c
}

func crawl(ctx context.Context, out io.Writer, w *web) error {
	pool, err := newPool(w)
	if err != nil {
		return err
	}
	defer pool.Close()

	tally := &attempts{n: map[string]int{}}
	names := map[string]string{} // host key -> host name
	chain, err := newChain(pool, tally, func(e egresskit.Escalation) {
		// A real crawler hands this to a person (see examples/escalation).
		fmt.Fprintf(out, "escalation: %s halted (status %d, markers %v)\n", names[e.Host], e.Status, e.Markers)
	})
	if err != nil {
		return err
	}
	for name, srv := range map[string]string{"site": w.site.URL, "busy": w.busy.URL, "challenge": w.challenge.URL} {
		key, err := chain.HostKey(srv)
		if err != nil {
			return err
		}
		names[key] = name
	}

	c := newCollector(ctx, chain)
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		// Errors are reported by OnError; an already visited link is not
		// an error worth printing.
		e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(r *colly.Response) {
		fmt.Fprintf(out, "GET %-9s %-15s %d\n", names[r.Request.URL.Host], r.Request.URL.Path, r.StatusCode)
	})
	c.OnError(func(r *colly.Response, err error) {
		host, path := names[r.Request.URL.Host], r.Request.URL.Path
		var what string
		switch {
		case errors.Is(err, egresskit.ErrDisallowed):
			what = "not sent: disallowed by robots.txt"
		case errors.Is(err, egresskit.ErrHalted):
			what = "not sent: host halted"
		case errors.Is(err, egresskit.ErrTryLater):
			// A crawl would requeue it: time.AfterFunc(time.Until(
			// egresskit.RetryAt(err)), func() { r.Request.Retry() }).
			what = "not sent: try the host later"
		case r.StatusCode != 0:
			// Colly hands over no *http.Response, so egresskit.Halted
			// cannot be asked; the chain's state can.
			st, _ := chain.Status(ctx, r.Request.URL.Host)
			what = fmt.Sprintf("%d, host halted: %v", r.StatusCode, st.Halted)
		default:
			what = "failed: " + telemetry.Redactor{}.RedactError(err)
		}
		fmt.Fprintf(out, "GET %-9s %-15s %s\n", host, path, what)
	})

	if err := c.Visit(w.site.URL + "/"); err != nil {
		return err
	}
	c.Wait()

	busyKey, _ := chain.HostKey(w.busy.URL)
	busy, err := chain.Status(ctx, busyKey)
	if err != nil {
		return err
	}
	challengeKey, _ := chain.HostKey(w.challenge.URL)
	challenge, err := chain.Status(ctx, challengeKey)
	if err != nil {
		return err
	}
	w.mu.Lock()
	gap := w.after429.Sub(w.time429)
	direct, proxied := w.direct, w.proxied["proxy-a"]+w.proxied["proxy-b"]
	w.mu.Unlock()

	fmt.Fprintln(out, "---")
	fmt.Fprintf(out, "robots.txt: site served /private/admin %d times\n", w.requests("site", "/private/admin"))
	fmt.Fprintf(out, "busy: %d attempts for 2 pages; after the 429 (Retry-After: 1) the next request came >= 1s later: %v; rate %d/min -> %g/min\n",
		tally.of(busyKey), gap >= time.Second, perMinute, busy.PerMinute)
	fmt.Fprintf(out, "challenge: served %d of the 2 pages visited; halted: %v\n", w.hostRequests("challenge"), challenge.Halted)
	fmt.Fprintf(out, "egress: %d requests through the pool's proxies, %d direct\n", proxied, direct)
	return nil
}
