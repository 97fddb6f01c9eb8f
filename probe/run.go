package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/internal/settle"
	"github.com/egresskit/egresskit/robots"
)

// idleConnTimeout closes a connection no probe has used for that long.
const idleConnTimeout = 250 * time.Millisecond

// ErrCanceled is returned by Run, with the partial report, when ctx was
// cancelled before the run was over.
var ErrCanceled = errors.New("probe: run cancelled")

// Run probes every target, each through its egress (or, with
// Options.Matrix, through every egress), at most Options.Concurrency at a
// time, and diagnoses the results. Probes go through the classifier and
// the egress's own transport, never through retries or breakers: a probe
// measures, it does not heal.
//
// Run returns by the deadline (Options.Deadline from its start, or ctx's
// deadline when earlier) plus the time it takes to unwind the probes in
// flight, a few milliseconds, whatever the endpoints do: each probe's
// context ends at the deadline, and closing the egress pool then ends the
// dials and TLS handshakes that net/http keeps running for a connection
// no request waits for any more. Probes still running then are reported with outcome
// "deadline", probes not yet started likewise with stage "queued": the
// report always holds one result per probe. Every goroutine Run starts has
// ended when it returns.
//
// Run returns an error before sending any request when the input is
// invalid: ErrNoTargets, ErrTooManyProbes, a *TargetError, a *InvalidProxyError,
// or an error wrapping egresskit.ErrInvalidConfig that names the Options
// field, or the endpoint or rule of Options.Proxies or Options.Rules at
// fault. When ctx
// is cancelled (rather than reaching its deadline) Run returns the partial
// report and an error wrapping ErrCanceled and ctx's cause.
func Run(ctx context.Context, targets []Target, opts Options) (*Report, error) {
	begin := time.Now() // the deadline counts from the call, validation included
	s, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	started := s.Now()
	deadline := begin.Add(s.Deadline)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	p, err := newPlan(targets, s)
	if err != nil {
		return nil, err
	}

	r, err := newRunner(ctx, s, p, deadline)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.arm()
	// The caller's cancellation reaches the probes through one callback,
	// not through a context that every probe would share: a thousand
	// children of one context contend for its lock when it ends.
	stop := context.AfterFunc(ctx, r.callerCancel)

	rep := &Report{Started: started, Results: make([]TargetResult, len(p.jobs))}
	var wg sync.WaitGroup
	for range min(s.Concurrency, len(p.jobs)) {
		wg.Go(func() {
			for {
				i, ok := r.sched.take()
				if !ok {
					return
				}
				rep.Results[i] = r.probe(&p.jobs[i])
				r.sched.done(p.jobs[i].host)
				r.progress(rep.Results[i])
			}
		})
	}
	wg.Wait()
	if !stop() {
		<-r.callerDone // callerCancel ran, or is running: wait for it
	}
	// Probes the deadline or the caller came before: reported as queued.
	for _, i := range r.sched.rest() {
		rep.Results[i] = r.probe(&p.jobs[i])
		r.progress(rep.Results[i])
	}
	// Closing the pool and diagnosing overlap; both are done on return.
	wg.Go(r.close)
	rep.Diagnosis = diagnose(rep.Results, s.Thresholds)
	if s.Matrix {
		rep.Rules = coverage(p.jobs, rep.Results)
	}
	rep.Recommendation.MaxConcurrency = rep.Recommendation.Workers(s.Workers)
	wg.Wait()
	rep.Finished = s.Now()
	if r.canceled.Load() && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return rep, fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx))
	}
	return rep, nil
}

// runner holds what every probe of a Run shares.
type runner struct {
	settings
	parent   context.Context // the caller's context
	base     context.Context // the caller's values, without its cancellation
	deadline time.Time
	scrub    *scrubber
	total    int
	pool     *egress.Pool
	clients  map[*exit]*http.Client
	robots   map[*exit]*robotstxt.Checker // nil with IgnoreRobots
	sched    *sched
	closed   sync.Once

	done     atomic.Int64 // probes finished
	canceled atomic.Bool  // the caller cancelled the run
	expired  atomic.Bool  // the deadline has passed

	// timer ends the probes in flight at the deadline: one timer for the
	// run rather than one per probe, so that the deadline starts no
	// goroutine per probe. timerDone is closed when its callback returns.
	timer     *time.Timer
	timerDone chan struct{}
	// callerDone is closed when callerCancel returns.
	callerDone chan struct{}

	mu     sync.Mutex                  // guards active
	active map[*job]context.CancelFunc // contexts of the probes in flight
}

// newRunner builds the Run's egress pool: one endpoint per exit, each
// probe sent through its endpoint's own transport (Pool.Transport), which
// reports proxy failures as *egress.ProxyError. The pool's timeouts are
// the Run's deadline: the probes' contexts bound everything sooner.
func newRunner(ctx context.Context, s settings, p *plan, deadline time.Time) (*runner, error) {
	eps := make([]egress.Endpoint, len(p.exits))
	for i, e := range p.exits {
		eps[i] = egress.Endpoint{ID: e.id, Proxy: e.raw, Labels: e.labels}
	}
	pool, err := egress.New(egress.Config{
		Endpoints: eps,
		// Probes to one host reuse up to Concurrency connections rather
		// than opening one each: polite, and the phases of a fresh
		// connection are still measured by the first probes. A connection
		// left idle is closed soon, during the run, rather than all of
		// them at its end.
		MaxIdleConns:          s.Concurrency,
		MaxIdleConnsPerHost:   s.Concurrency,
		IdleConnTimeout:       idleConnTimeout,
		DialTimeout:           s.Deadline,
		TLSHandshakeTimeout:   s.Deadline,
		ResponseHeaderTimeout: -1,
		TLSClientConfig:       s.TLSClientConfig,
		ProxyTLSConfig:        s.ProxyTLSConfig,
		// Each probe resolves afresh, so that its DNS phase is measured.
		DNS: egress.DNSConfig{Disabled: true},
	})
	if err != nil {
		return nil, err
	}
	r := &runner{
		settings: s,
		parent:   ctx,
		base:     context.WithoutCancel(ctx),
		deadline: deadline,
		scrub:    &p.scrub,
		total:    len(p.jobs),
		pool:     pool,
		clients:  make(map[*exit]*http.Client, len(p.exits)),
		sched:    newSched(p.jobs, s.PerHost),
		active:   map[*job]context.CancelFunc{},

		timerDone:  make(chan struct{}),
		callerDone: make(chan struct{}),
	}
	for _, e := range p.exits {
		rt, ok := pool.Transport(e.id)
		if !ok { // every exit is an endpoint of the pool
			pool.Close()
			return nil, &InvalidProxyError{ID: e.id, Err: egress.ErrUnknownEndpoint}
		}
		if s.transport != nil {
			rt = s.transport
		}
		r.clients[e] = &http.Client{
			Transport:     classifyHooks.NewTransport(rt, s.Classify),
			CheckRedirect: checkRedirect(s.maxRedirects),
		}
		if !s.IgnoreRobots {
			if r.robots == nil {
				r.robots = make(map[*exit]*robotstxt.Checker, len(p.exits))
			}
			// robots.txt leaves through the probe's own egress, under the
			// probe's User-Agent; the probe's context bounds the fetch.
			r.robots[e] = robotstxt.New(robots.Config{UserAgent: s.UserAgent, Transport: rt, FetchTimeout: 2 * s.Deadline})
		}
	}
	return r, nil
}

// arm starts the deadline's timer, which cancels the probes in flight.
// The pool is closed only once they have unwound (close): net/http ends a
// dial or TLS handshake on CloseIdleConnections only when no request waits
// for it any more.
func (r *runner) arm() {
	r.timer = time.AfterFunc(time.Until(r.deadline), func() {
		defer close(r.timerDone)
		r.expired.Store(true)
		r.sched.end()
		r.cancelAll()
	})
}

// close stops the timer (or waits for its callback), cancels what is left
// and closes the pool, which ends the dials and TLS handshakes still in
// flight and closes every connection. It is idempotent.
func (r *runner) close() {
	r.closed.Do(func() {
		if r.timer != nil && !r.timer.Stop() {
			<-r.timerDone
		}
		r.cancelAll()
		r.pool.Close()
	})
}

// callerCancel runs when the caller's context ends: probes in flight end,
// probes not yet started will not start. It closes callerDone when done.
func (r *runner) callerCancel() {
	defer close(r.callerDone)
	r.canceled.Store(true)
	r.sched.end()
	r.cancelAll()
}

// cancelAll cancels every probe in flight.
func (r *runner) cancelAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.active {
		cancel() // a context's cancel: quick, and never calls back into r
	}
}

// start gives job j a context of its own, which the deadline's timer or
// the caller's cancellation ends through cancelAll; ok is false when the
// run is over.
func (r *runner) start(j *job) (ctx context.Context, done func(), ok bool) {
	ctx, cancel := context.WithCancel(r.base)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut() != "" {
		cancel()
		return nil, nil, false
	}
	r.active[j] = cancel
	return ctx, func() {
		r.mu.Lock()
		delete(r.active, j)
		r.mu.Unlock()
		cancel()
	}, true
}

// cut reports why the run ended early: "deadline", "canceled", or "" while
// it runs.
func (r *runner) cut() string {
	switch {
	case r.expired.Load(), !time.Now().Before(r.deadline):
		return "deadline"
	case r.canceled.Load(), r.parent.Err() != nil:
		return "canceled"
	}
	return ""
}

func checkRedirect(limit int) func(*http.Request, []*http.Request) error {
	return func(_ *http.Request, via []*http.Request) error {
		if len(via) > limit {
			return classify.ErrTooManyRedirects
		}
		return nil
	}
}

func (r *runner) progress(res TargetResult) {
	n := r.done.Add(1)
	if r.Progress != nil {
		r.Progress(Progress{Done: int(n), Total: r.total, Result: res})
	}
}

// probe sends one probe and classifies it.
func (r *runner) probe(j *job) TargetResult {
	res := TargetResult{URL: j.shown, Host: j.host, Egress: j.exit.id, Proxy: j.exit.shown, Rule: j.rule}
	ctx, done, ok := r.start(j)
	if !ok {
		cut := r.cut()
		res.Outcome, res.Deadline, res.Err, res.Reason, res.Stage = classify.Canceled, cut == "deadline", cut, cut, stageQueued.String()
		return res
	}
	defer done()
	if r.PerRequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.PerRequestTimeout, classify.ErrAttemptTimeout)
		defer cancel()
	}
	rec := newRecorder(r.Now)
	if chk := r.robots[j.exit]; chk != nil {
		u, err := url.Parse(j.url)
		if err == nil {
			_, err = chk.Check(httptrace.WithClientTrace(ctx, rec.trace()), u)
		}
		var de *robots.DisallowedError
		if errors.As(err, &de) && de.Source == robots.Parsed {
			res.Outcome, res.Disallowed, res.Stage = classify.Permanent, true, stageQueued.String()
			res.Err, res.Reason = "disallowed by robots.txt", "disallowed by robots.txt"
			return res
		}
		// An unreachable robots.txt does not stop the probe (see
		// Options.IgnoreRobots). When the probe's context ended during the
		// fetch, the probe below fails at once and keeps the fetch's
		// stage; otherwise it measures its own phases.
		if ctx.Err() == nil {
			rec = newRecorder(r.Now)
		}
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, rec.trace()), r.Method, j.url, nil)
	if err != nil { // the URL was validated; this is not expected
		res.Stage, res.Outcome, res.Err, res.Reason = stageDNS.String(), classify.Permanent, "invalid request", "invalid request"
		return res
	}
	req.Header.Set("User-Agent", r.UserAgent)

	resp, err := r.clients[j.exit].Do(req)
	res.Latency = r.Now().Sub(rec.start)
	st, phases, reused := rec.freeze()
	res.Stage, res.Phases, res.Reused = st.String(), phases, reused
	if resp != nil {
		defer drainClose(resp)
	}
	cr := classify.Of(resp, err)
	// A response counts even if the deadline passed since; a failure, or
	// a peek at the body that the end of the context interrupted, is the
	// deadline's or the caller's doing.
	interrupted := err != nil || cr.Outcome == classify.Canceled || ctx.Err() != nil && cr.Outcome != classify.OK
	if cut := r.cut(); cut != "" && interrupted {
		res.Outcome, res.Deadline, res.Err, res.Reason = classify.Canceled, cut == "deadline", cut, cut
		return res
	}
	res.Status, res.Outcome, res.Markers, res.RetryAfter, res.Reason =
		cr.Status, cr.Outcome, cr.Markers, cr.RetryAfter, cr.Reason
	switch {
	case interrupted && errors.Is(context.Cause(ctx), classify.ErrAttemptTimeout):
		res.Status, res.Outcome, res.TimedOut, res.Err, res.Reason = 0, classify.Transient, true, "timeout", "timeout"
	case err != nil:
		res.Status, res.Err = 0, r.scrub.scrub(err)
		if pe, ok := errors.AsType[*egress.ProxyError](err); ok && pe.EndpointFault() {
			res.Stage, res.EgressFailure, res.Reason = stageProxy.String(), pe.Kind, egressReason(pe.Kind)
		}
	case !res.success():
		res.Err = "HTTP status " + strconv.Itoa(res.Status)
	}
	return res
}

// maxDrain bounds how much of a body is read before closing it, so that
// its connection can serve the next probe to the host; a longer body
// costs its connection instead.
const maxDrain = 16 << 10

// drainClose reads what is left of a small body and closes it. Reading is
// bound to the probe's context, like the request.
func drainClose(resp *http.Response) {
	if resp.ContentLength <= maxDrain { // -1: unknown, read up to the bound
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	}
	resp.Body.Close()
}

// egressReason is the Reason of a probe that failed on its egress route,
// by the egress.ProxyError's Kind.
func egressReason(kind string) string {
	switch kind {
	case "auth":
		return "proxy authentication failed"
	case "dial":
		return "proxy unreachable"
	case "tls":
		return "proxy TLS handshake failed"
	case "handshake":
		return "proxy handshake failed"
	}
	return "proxy error"
}

// classifyHooks reaches package classify's transport.
var classifyHooks = settle.Get[classify.Result, classify.Config]()
