// Package egresskit is the polite, resilient HTTP egress of a crawler: put
// its Transport in your own http.Client, and each request is checked
// against robots.txt, paced per host, retried, guarded by a circuit
// breaker, classified, and halted when the host refuses you.
//
//	chain, err := egresskit.New(egresskit.Config{UserAgent: "MyBot/1.0 (+https://example.org/bot)"})
//	client := &http.Client{Transport: chain}
//
// The concepts, in the order a crawler meets them:
//
//   - Config: its zero value is the recommended configuration; a zero
//     field means its default, a negative one "none" (DefaultConfig).
//   - UserAgent: the crawler's one identity, for robots.txt and refusals.
//   - robots.txt: obeyed; ErrDisallowed means skip the URL.
//   - Pacing: 1 request a second per host, slowed by 429s and Retry-After;
//     a wait past MaxWait (30s) returns ErrTryLater with RetryAt.
//   - Retries: 3, jittered, idempotent requests only (Config.Retry).
//   - Breaker: a failing host's circuit opens (ErrOpen, an ErrTryLater).
//   - classify.Result: each attempt's outcome, read with classify.Of.
//   - Halt: a host that refuses us (a challenge page, a 403 naming the
//     bot) is halted (Halted, ErrHalted) until an operator calls Resume;
//     OnEscalate hands the evidence to a person.
//   - Events: one telemetry.Event per attempt to Config.Observers.
//   - Store: the per-host state, in memory or shared through redisstore.
//   - Escalation and the audit log (Config.Audit): what a human reviews.
//
// New returns every configuration error (ErrInvalidConfig, naming the
// field). The README's tables list the defaults and the errors; the long
// form of the chain's behaviour (when a page is judged, timeouts,
// connections) is in docs/reference.md.
package egresskit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/internal/blocks"
	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/inflight"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/robots"
	"github.com/egresskit/egresskit/telemetry"
	"golang.org/x/time/rate"
)

// DefaultUserAgent is sent when neither the Config nor the request sets a
// User-Agent.
const DefaultUserAgent = "egresskit/0.1 (+https://github.com/egresskit/egresskit)"

// DefaultConfig returns what the zero Config means, with the defaults of
// its parts filled in, for printing and reading: New(Config{}) and
// New(DefaultConfig()) behave the same. The Store stays nil (an in-memory
// store with its defaults, hoststate.NewMemory(hoststate.Config{})).
func DefaultConfig() Config {
	rc := robotstxt.DefaultConfig()
	// The chain sets these itself: the identity from UserAgent, the
	// transport from Egress or Base.
	rc.UserAgent, rc.AgentToken, rc.Transport, rc.Now = "", "", nil, nil
	return Config{
		UserAgent:   DefaultUserAgent,
		Retry:       retrier.DefaultPolicy(),
		Robots:      rc,
		BlockWatch:  blocks.DefaultConfig(),
		MaxInFlight: defaultMaxInFlight,
		MaxWait:     defaultMaxWait,
	}
}

// Config configures the chain. Its zero value is the recommended
// configuration; every field documents what its zero value means (see the
// package's Defaults).
type Config struct {
	// Base sends the requests when Egress is nil. If nil,
	// http.DefaultTransport is used. robots.txt is fetched through Base too
	// when Egress is nil. A request's first attempt reaches Base (or
	// Egress) as the caller made it, unless Retry.AttemptTimeout gives it
	// a deadline; retries reach it as copies of the request.
	Base http.RoundTripper

	// Egress, when set, chooses the proxy (or direct route) of every
	// attempt and sends it. robots.txt is then fetched through Egress too,
	// from the host's own subset of endpoints, so that a site sees the
	// same addresses ask for its robots.txt as for its pages; set
	// Robots.Transport to fetch it some other way. Base is then unused.
	Egress *egress.Pool

	// UserAgent is the crawler's identity, and the one place to set it:
	// it is set on every request that carries no User-Agent. The chain
	// judges robots.txt for, fetches robots.txt with, and recognises
	// refusals naming (by product token, "MyBot" of "MyBot/1.0 (+url)")
	// the User-Agent each request is actually sent with: this one, or the
	// request's own when a client library sets one (Colly does; clear
	// Colly's so that this one is sent). If empty, DefaultUserAgent.
	UserAgent string

	// Classify configures the classifier. Its AgentToken must be empty:
	// it comes from the User-Agent sent (see UserAgent).
	Classify classify.Config

	// Retry is the retry policy. Its zero value retries transient failures
	// of idempotent requests 3 times with jittered backoff; set
	// Retry.MaxRetries to -1 for none.
	Retry retry.Policy

	// Store keeps the per-host state (halts, breakers, pacing). If nil, an
	// in-memory store with the defaults of hoststate.Config; pass
	// hoststate.NewMemory(cfg) to tune it, or a redisstore store to share
	// the state across a fleet.
	Store hoststate.Store

	// HostKey decides what "one host" is for all per-host state. The zero
	// value keys by host[:port]; hostkey.ByDomain keys by registrable domain.
	HostKey hostkey.Mode

	// Robots configures the robots.txt checker. Its UserAgent and
	// AgentToken must be empty: they come from the User-Agent sent (see
	// UserAgent). Its Transport defaults to Egress when set (an egress
	// failure is tried again on up to three endpoints), else Base.
	Robots robots.Config

	// IgnoreRobots switches the robots.txt check off. It exists for sites
	// that the operator owns or has permission to crawl; it is never the
	// default.
	IgnoreRobots bool

	// Scope decides which hosts may be visited at all. The zero Scope
	// allows every host.
	Scope Scope

	// Observers receive one telemetry.Event per attempt, and one for a
	// request refused before any attempt (scope, robots.txt); Event.Unsent
	// tells attempts sent from those refused. None costs nothing.
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
	// the request's goroutine, or, for a 2xx page judged as it is read
	// (see the package documentation), on the goroutine that reads its
	// body (or calls Halted, classify.Of or Close first); it should hand
	// the escalation off quickly. Resume the host with Transport.Resume.
	OnEscalate func(Escalation)

	// BlockWatch configures the host-level block detector: a host whose
	// answers become a run of 401/403 refusals across distinct URLs (or
	// mostly refusals) is halted as a suspected block and escalated with
	// the evidence, though no page carried a challenge marker. The zero
	// value is on with the defaults of package blockwatch; set
	// BlockWatch.Disabled to switch it off. Detection is per Transport
	// (per worker); the halt is shared through the Store like any other.
	BlockWatch blockwatch.Config

	// CrawlRate caps the requests per second this Transport sends, over
	// every host: the bandwidth and cost of a crawl, per Transport (each
	// worker of a fleet has its own). An attempt takes its token after the
	// host layers admitted it; the burst is a tenth of a second's worth.
	// 0 (the default) or a negative value: no cap. NaN or infinite:
	// refused (ErrInvalidConfig).
	CrawlRate float64

	// MaxInFlight caps the attempts in flight to one host (from sending
	// until its headers or error), so that a slow host is not handed a
	// queue: the cap in force follows what the host serves, 2 at first
	// contact, growing each round trip while its latency stays near its
	// base, down to Little's law on its served rate when the latency rises
	// under our load; at most MaxInFlight, per Transport. 0 (the default):
	// at most 16; negative: no cap. How: docs/reference.md,
	// "egresskit.Config.MaxInFlight".
	MaxInFlight int

	// MaxWait bounds how long a request waits for its host's pacing (a
	// pause for the host's Retry-After, or its next slot): a request that
	// would wait longer is not sent and returns at once an error matching
	// ErrTryLater (*ratelimit.WaitError, with when to retry), spending no
	// token. 0 (the default): 30s. Negative: no bound (the wait is then
	// bounded by the pause's cap, ratelimit.Config.MaxPause, and the
	// request's context).
	MaxWait time.Duration
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
	// BodyHead is the first KiB of the refusal's body, or as much of it
	// as the classifier's peek read (at most Classify.PeekSize bytes,
	// waited for at most Classify.PeekTimeout; of a 2xx page, the bytes
	// its judgement read), redacted by Config.Redactor as the halt
	// record's copy is; the caller's response still holds the whole body.
	// Empty when peeking is off.
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
	ids       *identities // robots.txt and refusal matching per User-Agent sent
	retry     *retrier.Transport
	observers observers
	ceilings  ceilingCache
	holds     holds             // halts the store could not take
	connFails connFails         // connections whose failure was counted
	spacing   spacing           // paced sends kept apart per host
	watch     *blocks.Watch     // nil when Config.BlockWatch.Disabled
	send      http.RoundTripper // Egress or Base: what finally sends
	base      http.RoundTripper // Base, or http.DefaultTransport
	crawl     *rate.Limiter     // Config.CrawlRate; nil without a cap
	inflight  *inflight.Limits  // Config.MaxInFlight; nil without a cap
	maxWait   time.Duration     // Config.MaxWait with its default; negative: no bound
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns the chain configured by cfg, or an error matching
// ErrInvalidConfig that names the field when cfg cannot be honoured.
func New(cfg Config) (*Transport, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	t := &Transport{cfg: cfg, observers: observers(cfg.Observers)}
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
	t.watch = blocks.New(cfg.BlockWatch)
	t.state = cfg.Store
	if t.state == nil {
		t.state, _ = hoststate.NewMemory(hoststate.Config{}) // the zero Config is valid
	}
	var send http.RoundTripper = base
	if cfg.Egress != nil {
		send = cfg.Egress
	}
	t.send, t.base = send, base
	t.ids = &identities{defUA: t.ua, def: t.newIdentity(t.ua), build: t.newIdentity}
	rt, err := retrier.New(&gatedSender{t: t}, cfg.Retry)
	if err != nil {
		return nil, configerr.In("Retry", err)
	}
	t.retry = rt
	t.crawl = crawlLimiter(cfg.CrawlRate)
	t.inflight = newInflight(cfg.MaxInFlight)
	t.maxWait = cfg.MaxWait
	if t.maxWait == 0 {
		t.maxWait = defaultMaxWait
	}
	return t, nil
}

// RoundTrip sends req through the chain. Errors it returns, besides those of
// the base transport, can be matched with errors.Is: ErrDisallowed,
// ErrTryLater (a pacing wait past Config.MaxWait or the deadline, an open
// breaker, an unreachable robots.txt; see RetryAt), ErrHalted,
// ErrOutOfScope, ErrInvalidRequest, ErrInvalidConfig and
// ErrTooManyAgents. A request refused by the host returns the host's real
// response; the host is then halted (see Halted). The request body is
// closed on every path.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := validate(req); err != nil {
		return nil, unsent(req, err)
	}
	key, err := hostkey.Of(req.URL, t.cfg.HostKey)
	if err != nil {
		return nil, unsent(req, err)
	}
	if err := t.cfg.Scope.check(key); err != nil {
		return nil, t.refuse(req, key, err)
	}
	ctx := req.Context()
	if err := t.holds.check(ctx, t.state, key); err != nil {
		return nil, unsent(req, notSent(err))
	}
	own := userAgent(req.Header)
	ua := own
	if ua == "" {
		ua = t.ua
	}
	id, err := t.ids.of(ua)
	if err != nil {
		return nil, t.refuse(req, key, err)
	}
	if id.robots != nil {
		d, err := id.robots.Check(ctx, req.URL)
		if t.cfg.Audit != nil && (err == nil || isRobots(err)) {
			auditrec.Robots(t.cfg.Audit, key, req.URL.EscapedPath(), err == nil)
		}
		if err != nil {
			return nil, t.refuse(req, key, err)
		}
		if err := t.ceilings.apply(ctx, t.state, key, d.CrawlDelay); err != nil {
			return nil, t.refuse(req, key, err)
		}
	}
	if ua != own {
		req = req.Clone(ctx)
		req.Header.Set("User-Agent", ua)
	}
	var p *pending
	if len(t.observers) > 0 {
		p = &pending{}
		req = req.WithContext(context.WithValue(ctx, pendingKey{}, p))
	}
	resp, err := firstsend.RoundTripKey(t.retry, req, key) // gatedSender reads key back
	if p != nil {
		p.flush(ctx, t.observers)
	}
	return resp, err
}

// CloseIdleConnections closes the idle connections of the transports that
// send (Base, and the egress pool's endpoints when it has such a method),
// as http.Client.CloseIdleConnections expects of its Transport.
func (t *Transport) CloseIdleConnections() {
	if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
	if t.cfg.Egress != nil { // else Base is what sends, closed once above
		t.cfg.Egress.CloseIdleConnections()
	}
}

// Resume lifts the halt on host, after an operator has looked at the
// escalation: host is what a person types (a host, host:port or URL) or
// a host key (Escalation.Host), keyed as the chain keys its requests (see
// hostkey.Parse). The host is sendable at once, at the pace it had: its
// refusals halted it but did not count against its breaker. Resume
// returns an error wrapping hoststate.ErrNotHalted, and records nothing,
// when the host is not halted; hostkey's errors for what is not a host;
// and the Store's errors.
func (t *Transport) Resume(ctx context.Context, host string) error {
	key, err := hostkey.Parse(host, t.cfg.HostKey)
	if err != nil {
		return err
	}
	err = t.state.Resume(ctx, key)
	if held := t.holds.release(key); held && errors.Is(err, hoststate.ErrNotHalted) {
		err = nil // halted by this Transport alone: the store never took it
	}
	if err != nil {
		return err
	}
	t.watch.Forget(key)
	t.state.AddNote(ctx, hoststate.Note{Host: key, Time: time.Now(), By: "operator", Resumed: true})
	if t.cfg.Audit != nil {
		return auditrec.Resume(t.cfg.Audit, key, "operator")
	}
	return nil
}

// Status returns the per-host state of host: a host, host:port or URL,
// keyed as the chain keys its requests (see hostkey.Parse).
func (t *Transport) Status(ctx context.Context, host string) (hoststate.Status, error) {
	key, err := hostkey.Parse(host, t.cfg.HostKey)
	if err != nil {
		return hoststate.Status{}, err
	}
	return t.state.Status(ctx, key)
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
// resp.Body (http.Client does when it has a Timeout). Asked about a 2xx
// answer whose body was not read yet, it judges the page first, reading
// its head within Classify.PeekTimeout (see the package documentation).
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

// isRobots reports whether err is a robots.txt decision: a rule, or an
// unreachable robots.txt.
func isRobots(err error) bool {
	_, ok := errors.AsType[*robots.DisallowedError](err)
	return ok
}

// ErrInvalidRequest is returned for a request the chain cannot send: nil,
// without a URL or host, or with a scheme other than http and https.
var ErrInvalidRequest = errors.New("egresskit: invalid request")

// userAgent is h.Get("User-Agent") without canonicalising the key, which
// is canonical already: it runs twice for every request.
func userAgent(h http.Header) string {
	if vs := h["User-Agent"]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

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
