// Package egresskit composes the resilient, polite HTTP egress chain that a
// crawler wraps around its own http.Client:
//
//	authorise (scope, robots.txt)             once per request
//	└─ retry (go-retryablehttp engine)        loop over attempts
//	   └─ admit (halt, breaker, token)        per host; an open host spends no token
//	      └─ egress selection                 never sees an outcome
//	         └─ classify                      once per attempt
//	            └─ base transport
//
// After each attempt its one classify.Result feeds the host's breaker and
// pacing budget, the retry decision, the halt (Refused) and one
// telemetry.Event.
//
// The zero Config gives a working, polite chain over http.DefaultTransport:
// robots.txt obeyed, one request per second per host, a circuit breaker per
// host, halts on refusal, and three jittered retries of transient failures.
package egresskit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/robots"
	"github.com/egresskit/egresskit/telemetry"
)

// DefaultUserAgent is sent when neither the Config nor the request sets a
// User-Agent.
const DefaultUserAgent = "egresskit/0.1 (+https://github.com/egresskit/egresskit)"

// Config configures the chain. Its zero value is a working, polite chain.
type Config struct {
	// Base sends the requests when Egress is nil. If nil,
	// http.DefaultTransport is used. robots.txt is fetched through Base too
	// when Egress is nil.
	Base http.RoundTripper

	// Egress, when set, chooses the proxy (or direct route) of every
	// attempt and sends it. robots.txt is then fetched through Egress too,
	// from the host's own subset of endpoints, so that a site sees the
	// same addresses ask for its robots.txt as for its pages; set
	// Robots.Transport to fetch it some other way. Base is then unused.
	Egress *egress.Pool

	// UserAgent is set on requests that carry none. Its product token
	// ("MyBot" of "MyBot/1.0 (+url)") is the agent token used for
	// robots.txt groups and to recognise refusals that name the crawler.
	// If empty, DefaultUserAgent is used.
	UserAgent string

	// Classify configures the classifier. An empty AgentToken is filled
	// from UserAgent.
	Classify classify.Config

	// Retry is the retry policy. The zero Policy is retry.DefaultPolicy().
	Retry retry.Policy

	// State is the per-host state (halts, breakers, pacing). If nil, an
	// in-memory store configured by HostState is used; pass a
	// redisstore.State to share it across a fleet.
	State hoststate.Store

	// HostState configures the in-memory State; ignored when State is set.
	HostState hoststate.Config

	// HostKey decides what "one host" is for all per-host state. The zero
	// value keys by host[:port]; hostkey.ByDomain keys by registrable domain.
	HostKey hostkey.Mode

	// Robots configures the robots.txt checker. Its UserAgent defaults to
	// the chain's UserAgent, its Transport to Egress when set (an egress
	// failure is tried again on up to three endpoints), else Base.
	Robots robots.Config

	// IgnoreRobots switches the robots.txt check off. It exists for sites
	// that the operator owns or has permission to crawl; it is never the
	// default.
	IgnoreRobots bool

	// Scope decides which hosts may be visited at all. The zero Scope
	// allows every host.
	Scope Scope

	// Observers receive one telemetry.Event per attempt. None costs nothing.
	Observers []telemetry.Observer

	// Redactor redacts URLs and errors in events and escalations. The zero
	// value redacts userinfo and secret-looking query values.
	Redactor telemetry.Redactor

	// Audit, when set, receives the compliance record: every attempt (it
	// is added to Observers), every robots.txt decision, every halt,
	// escalation and resume, and every forced egress. The chain does not
	// close it.
	Audit *telemetry.Audit

	// OnEscalate is called once when a host is halted because it refused
	// us, so that a human can look at it. It is called outside any lock, on
	// the request's goroutine; it should hand the escalation off quickly.
	// Resume the host with Transport.Resume.
	OnEscalate func(Escalation)

	// BlockWatch configures the host-level block detector: a host whose
	// answers become a run of 401/403 refusals across distinct URLs (or
	// mostly refusals) is halted as a suspected block and escalated with
	// the evidence, though no page carried a challenge marker. The zero
	// value is on with the defaults of package blockwatch; set
	// BlockWatch.Disabled to switch it off. Detection is per Transport
	// (per worker); the halt is shared through State like any other.
	BlockWatch blockwatch.Config
}

// Escalation is the evidence handed to Config.OnEscalate when a host is
// halted.
type Escalation struct {
	Host    string    // the host key
	URL     string    // the redacted URL of the refused request
	Status  int       // the HTTP status of the refusal
	Markers []string  // the challenge markers that matched, if any
	Reason  string    // the classifier's short reason
	Time    time.Time // when the refusal was received
	// BodyHead is the first KiB of the refusal's body.
	BodyHead []byte
	// Suspected is set when the host was halted by the block detector
	// (Reason "suspected block") rather than by a page: what it saw.
	Suspected *blockwatch.Evidence
}

// Transport is the composed chain. It is an http.RoundTripper and safe for
// concurrent use.
type Transport struct {
	cfg       Config
	ua        string
	state     hoststate.Store
	robots    *robots.Checker
	retry     *retry.Transport
	observers telemetry.Observers
	ceilings  ceilingCache
	watch     *blockwatch.Watch // nil when Config.BlockWatch.Disabled
	send      http.RoundTripper // Egress or Base: what finally sends
	base      http.RoundTripper // Base, or http.DefaultTransport
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns the chain configured by cfg.
func New(cfg Config) *Transport {
	t := &Transport{cfg: cfg, observers: telemetry.Observers(cfg.Observers)}
	if cfg.Audit != nil {
		t.observers = append(t.observers[:len(t.observers):len(t.observers)], cfg.Audit)
	}
	t.ua = cfg.UserAgent
	if t.ua == "" {
		t.ua = DefaultUserAgent
	}
	base := cfg.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.cfg.Classify.AgentToken == "" {
		t.cfg.Classify.AgentToken = productToken(t.ua)
	}
	t.watch = blockwatch.New(cfg.BlockWatch)
	t.state = cfg.State
	if t.state == nil {
		t.state = hoststate.NewMemory(cfg.HostState)
	}
	if !cfg.IgnoreRobots {
		rc := cfg.Robots
		if rc.UserAgent == "" {
			rc.UserAgent = t.ua
		}
		if rc.Transport == nil {
			rc.Transport = base
			if cfg.Egress != nil {
				rc.Transport = robotsThroughEgress{cfg.Egress}
			}
		}
		t.robots = robots.New(rc)
	}
	var send http.RoundTripper = base
	if cfg.Egress != nil {
		send = cfg.Egress
	}
	t.send, t.base = send, base
	inner := classify.NewTransport(send, classify.New(t.cfg.Classify))
	t.retry = retry.New(&gatedSender{t: t, next: inner}, cfg.Retry)
	return t
}

// RoundTrip sends req through the chain. Errors it returns, besides those of
// the base transport, can be matched with errors.Is: ErrOutOfScope,
// robots.ErrDisallowed, breaker.ErrHalted, breaker.ErrOpen, and
// context.DeadlineExceeded when a pacing wait would pass the deadline. A
// request refused by the host returns the host's real response; the host is
// then halted (see Halted).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := validate(req); err != nil {
		return nil, unsent(req, err)
	}
	key, err := hostkey.Of(req.URL, t.cfg.HostKey)
	if err != nil {
		return nil, unsent(req, err)
	}
	if err := t.cfg.Scope.check(key); err != nil {
		return nil, unsent(req, err)
	}
	ctx := req.Context()
	if t.robots != nil {
		d, err := t.robots.Check(ctx, req.URL)
		if t.cfg.Audit != nil && (err == nil || errors.Is(err, robots.ErrDisallowed)) {
			t.cfg.Audit.Robots(key, req.URL.EscapedPath(), err == nil)
		}
		if err != nil {
			return nil, unsent(req, err)
		}
		if err := t.ceilings.apply(ctx, t.state, key, d.CrawlDelay); err != nil {
			return nil, unsent(req, err)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req = req.Clone(ctx)
		req.Header.Set("User-Agent", t.ua)
	}
	var p *pending
	if len(t.observers) > 0 {
		p = &pending{}
		req = req.WithContext(context.WithValue(ctx, pendingKey{}, p))
	}
	resp, err := t.retry.RoundTrip(req)
	if p != nil {
		p.flush(ctx, t.observers)
	}
	return resp, err
}

// CloseIdleConnections closes the idle connections of the transports that
// send (Base, and the egress pool's endpoints when it has such a method),
// as http.Client.CloseIdleConnections expects of its Transport.
func (t *Transport) CloseIdleConnections() {
	for _, rt := range []http.RoundTripper{t.base, t.send} {
		if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	}
}

// Resume lifts the halt on host (a host key, as in Escalation.Host), after
// an operator has looked at the escalation.
func (t *Transport) Resume(ctx context.Context, host string) error {
	if err := t.state.Resume(ctx, host); err != nil {
		return err
	}
	t.watch.Forget(host)
	if t.cfg.Audit != nil {
		return t.cfg.Audit.Resume(host, "operator")
	}
	return nil
}

// State returns the per-host state of host (a host key).
func (t *Transport) State(ctx context.Context, host string) (hoststate.HostState, error) {
	return t.state.State(ctx, host)
}

// HostKey returns the key under which the chain keeps the state of the host
// of rawURL.
func (t *Transport) HostKey(rawURL string) (string, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return "", err
	}
	return hostkey.Of(u, t.cfg.HostKey)
}

// Halted reports whether resp is a refusal that halted (or found halted)
// its host: its classification (classify.Of) is classify.Refused. It reads
// the Result the chain attached to resp, so it holds whatever wraps
// resp.Body (http.Client does when it has a Timeout).
func Halted(resp *http.Response) bool {
	return resp != nil && classify.Of(resp, nil).Outcome == classify.Refused
}

// unsent closes the body of a request the chain does not send, as the
// http.RoundTripper contract requires on every path, and returns err.
func unsent(req *http.Request, err error) error {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
	return err
}

// ErrInvalidRequest is returned for a request the chain cannot send: nil,
// without a URL or host, or with a scheme other than http and https.
var ErrInvalidRequest = errors.New("egresskit: invalid request")

func validate(req *http.Request) error {
	switch {
	case req == nil:
		return fmt.Errorf("%w: nil request", ErrInvalidRequest)
	case req.URL == nil:
		return fmt.Errorf("%w: no URL", ErrInvalidRequest)
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, req.URL.Scheme)
	case req.URL.Host == "":
		return fmt.Errorf("%w: no host", ErrInvalidRequest)
	}
	return nil
}

// productToken returns the product token of a User-Agent: the text before
// the first '/', space or '('.
func productToken(ua string) string {
	if i := strings.IndexAny(ua, "/ ("); i >= 0 {
		ua = ua[:i]
	}
	return strings.TrimSpace(ua)
}
