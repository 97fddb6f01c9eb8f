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
// telemetry.Event. The Result lives with the response the caller holds:
// read it with classify.Of(resp, err), or Halted(resp). The attempts that
// fail together with their connection (the streams of one HTTP/2
// connection) are one failure for the host's breaker: the first counts,
// the others count as neither success nor failure, and their retries go
// out on a new connection. A refusal the store cannot record (Redis down)
// still halts the host: the store, or else the chain, keeps the halt,
// escalates it once and writes it back when the store answers.
//
// # Defaults
//
// The zero Config is the recommended configuration: a polite chain over
// http.DefaultTransport that retries, paces, obeys robots.txt and halts a
// host that refuses us. Throughout this module a zero setting means its
// documented default, and a negative number means "none" or "off" (no
// retries, no limit, no timeout); a setting that cannot be off is refused
// by New when negative. A feature is switched off by a field named
// Disabled (or, for robots.txt, IgnoreRobots). DefaultConfig returns the
// defaults filled in, for printing. What surprises people first:
//
//	pacing           1 request per second per host, burst 1 (ratelimit.Config)
//	robots.txt       obeyed; fetched before a host's first request; a 5xx, 429 or an
//	                 unreachable robots.txt blocks the host for 1 minute, doubling up to 1 hour
//	identity         the User-Agent sent: Config.UserAgent, or the request's own (see UserAgent)
//	retries          3, jittered, idempotent methods only; Retry.MaxRetries: -1 for none
//	in flight        per host, what its pace needs at its latency with headroom, at most
//	                 16 (MaxInFlight)
//	breaker          opens after 8 consecutive host failures, for 300s, then 1 probe
//	timeouts         none of the chain's own; a deadline that expires while waiting on the host
//	                 counts against it, a cancellation does not
//	refusal          a challenge page, or a 401/403 naming the agent, halts the host until Resume;
//	                 so do 401/403 answers to 10 distinct URLs with no success between
//	                 (Config.BlockWatch)
//	body peek        a refusal status: at most 4 KiB and 1s after the headers, then the
//	                 response is returned; a 2xx answer: returned at once, its first KiB
//	                 judged on the caller's first Read of the body
//
// # Errors
//
// RoundTrip returns the base transport's errors, classified
// (classify.Of), and these, matched with errors.Is, when it sends nothing:
//
//	ErrDisallowed     robots.txt disallows the URL for the agent sent
//	ErrHalted         the host refused us earlier and is halted (Resume lifts it)
//	ErrOpen           the host's circuit breaker is open
//	ErrOutOfScope     Config.Scope does not allow the host
//	context.DeadlineExceeded  the pacing wait would pass the request's deadline
//	ErrInvalidRequest, ErrTooManyAgents
//
// New returns ErrInvalidConfig, naming the field, for a Config it cannot
// honour; no configuration error is first seen at RoundTrip.
//
// A request refused by the host returns the host's real response, for
// which Halted reports true. RoundTrip closes the request body on every
// path, sent or not, and never modifies the caller's request.
//
// # When a page is judged
//
// A refusal status (401, 403, 429, 5xx...) is judged before RoundTrip
// returns, on at most PeekSize bytes of its body read within PeekTimeout.
// A 2xx answer is returned as soon as its headers are in, with its Result
// pending: its page is judged when the caller first reads the body (the
// first OKPeekSize bytes, read inside that Read; see classify.Classify).
// So a challenge served with 200 halts its host, reaches OnEscalate and
// yields its attempt's final telemetry.Event when the caller reads the
// page's head — microseconds after RoundTrip returned, for a crawler that
// reads its bodies — on the goroutine that reads it. Halted and
// classify.Of asked before reading judge it at once, reading the head
// within PeekTimeout. A body closed unread is never judged by its
// content: its attempt counts as the status says (OK), and the host is
// not halted by it. Until a 2xx body is read or closed, its attempt is
// not yet recorded in the host's state: close every body, as net/http
// asks (a half-open probe whose body is never closed holds the host's
// probe slot for the breaker's OpenTimeout, in every store, and is then
// counted as neither success nor failure). A 2xx body first read after the request's context ended is judged
// on its status and headers alone (the host answered in time; the late
// reader is not its failure), so a challenge served with 200 to such a
// reader is not caught by its content.
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
	// every host: the bandwidth and cost of a crawl. It is per Transport,
	// so per process with one Transport per process: each worker of a
	// fleet has its own cap. An attempt takes its token after the host
	// layers admitted it (an open or halted host spends none) and before
	// egress, from a golang.org/x/time/rate Limiter whose burst is a tenth
	// of a second's worth (at least 1); the wait honours the request's
	// context. 0 (the default) or a negative value: no cap. NaN or
	// infinite: refused (ErrInvalidConfig).
	CrawlRate float64

	// MaxInFlight caps the attempts in flight to one host (a host key),
	// so that a slow host is not handed a queue: an attempt is in flight
	// from when it is sent until the host's answer (its response's
	// headers) or its error; reading the body is the caller's time, and
	// costs the host little once it has answered. The cap in force is
	// Little's law with headroom, min(MaxInFlight, ceil(rate × latency ×
	// 1.5)) and at least 1, with rate the host's current pacing rate and
	// latency its time to headers as this Transport saw it: the lower of
	// a fast moving average and a slow one that follows the host up over
	// minutes, so that the queue our own attempts build at a slow host
	// does not raise the cap, while a host that is simply far away is not
	// penalised. When the host's latency rises under our load all the same
	// (the fast average a quarter above the slow one, with more than one
	// attempt in flight), the cap counts a fifth less of the pace each
	// round trip, and a tenth of it back each round trip once the latency
	// is back: a slow host's queue of our attempts drains before it
	// refuses. Until a host's first answer, MaxInFlight. An attempt
	// that finds its host at the cap waits after its pacing wait, first
	// come first served, honouring its context; the wait spends no retry.
	// The host's pacing rate is read from the Store at most once a second
	// per host. The cap is per Transport, also with a shared (Redis)
	// Store: each worker of a fleet has its own. A crawler author sets it
	// lower for hosts that must see fewer requests at once, or negative
	// for a test of its own that needs many. 0 (the default): at most 16;
	// a negative value: no cap; every value is valid.
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
	// its judgement read); the caller's response still holds the whole
	// body. Empty when peeking is off.
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
// the base transport, can be matched with errors.Is: ErrOutOfScope,
// ErrDisallowed, ErrHalted, ErrOpen, context.DeadlineExceeded when a pacing
// wait would pass the deadline, ErrInvalidRequest, ErrInvalidConfig and
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
