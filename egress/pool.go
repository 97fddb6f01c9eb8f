package egress

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Pool is a pool of egress endpoints and an http.RoundTripper that sends
// each request through one of them. It is safe for concurrent use. A Pool
// starts no goroutine of its own; the transports' connection goroutines
// end with Close. The methods of a nil *Pool do not panic: it has no
// endpoint, and is closed.
type Pool struct {
	set settings
	dns *dnsCache // nil when off

	// mu guards the fields below and the mutable fields of every
	// endpoint (see endpoint). It is never held across I/O, a wait or
	// a call to Config.Now.
	mu       sync.Mutex
	closed   bool
	order    []*endpoint          // present endpoints, in the order added
	byID     map[string]*endpoint // present endpoints, draining ones included
	members  []*endpoint          // endpoints open to selection: present, not draining
	cache    genCache[*route]     // host → route
	uniform  bool                 // every member has the same weight
	rules    *RuleSet             // nil: none
	eligible map[*Rule]eligible   // rule → its eligible members
	freed    chan struct{}        // closed when capacity may have appeared; nil if nobody waits

	// onWait, when set (by tests only, before any request), is called
	// each time a request starts waiting for a slot, after it holds the
	// channel that will wake it.
	onWait func()

	// blemished counts the present endpoints whose health depends on the
	// time (quarantined, or a score below 1). While it is zero, selection
	// needs no clock reading, which costs more than the rest of Select on
	// some platforms. Written with mu held; read without it as a hint.
	blemished atomic.Int64
	// rated is set once an endpoint with a Rate was added: selection
	// then reads the clock for the endpoints' limiters.
	rated atomic.Bool
}

var _ http.RoundTripper = (*Pool)(nil)

// eligible are the members a rule allows.
type eligible struct {
	members []*endpoint
	uniform bool // every one has the same weight
}

// endpoint is an Endpoint in a Pool.
type endpoint struct {
	ep     Endpoint // labels cloned
	proxy  parsedProxy
	seed   uint64
	weight float64 // Endpoint.Weight, 1 when unset
	rt     *http.Transport
	lim    *rate.Limiter // Endpoint.Rate; nil without one. Used with Pool.mu held.

	// Guarded by Pool.mu.
	lastErr   *ProxyError // the last egress failure, for ErrNoEndpoint's cause
	lastErrAt time.Time
	h         health
	inFlight  int
	draining  bool
	removed   bool
	blemished bool // counted in Pool.blemished
}

// noteHealthLocked keeps Pool.blemished up to date after e's health
// changed.
func (p *Pool) noteHealthLocked(e *endpoint) {
	b := !e.removed && (e.h.quarantined || e.h.score < 1)
	if b == e.blemished {
		return
	}
	e.blemished = b
	if b {
		p.blemished.Add(1)
	} else {
		p.blemished.Add(-1)
	}
}

// lockWithTime takes mu and returns the time selection needs: the clock
// is read, before the lock as Config.Now must be, only when some endpoint
// is blemished; otherwise time plays no part and the zero time is returned.
func (p *Pool) lockWithTime() time.Time {
	var now time.Time
	timed := p.blemished.Load() > 0 || p.rated.Load()
	if timed {
		now = p.now()
	}
	p.mu.Lock()
	if !timed && p.blemished.Load() > 0 {
		// Health changed since the hint: read the clock after all.
		p.mu.Unlock()
		now = p.now()
		p.mu.Lock()
	}
	return now
}

// New validates cfg and builds a Pool. For a configuration it cannot
// honour it returns an error wrapping egresskit.ErrInvalidConfig, for the
// operator who wrote the configuration to read, naming the endpoint (never its credentials) and the field: an unknown
// scheme, a missing host, a port out of range, a malformed proxy URL, an
// empty or duplicate ID, a negative capacity, rate or weight, no endpoint
// at all, a malformed rule, or a pool-level setting out of range.
func New(cfg Config) (*Pool, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, &configError{Field: "Endpoints", Err: errEmptyPool}
	}
	p := &Pool{
		set:  s,
		byID: make(map[string]*endpoint, len(cfg.Endpoints)),
	}
	p.cache.init(s.cacheSize)
	if p.dns, err = newDNSCache(cfg.DNS, s.now, s.resolver); err != nil {
		return nil, err
	}
	if len(cfg.Rules) > 0 {
		if p.rules, err = NewRuleSet(cfg.Rules, cfg.Endpoints); err != nil {
			return nil, err
		}
	}
	for i, e := range cfg.Endpoints {
		ep, err := p.newEndpoint(e, i)
		if err != nil {
			p.closeTransports(p.order)
			return nil, err
		}
		if p.byID[e.ID] != nil {
			p.closeTransports(p.order)
			return nil, &configError{EndpointID: e.ID, Field: "ID", Err: errDuplicateID}
		}
		p.byID[e.ID] = ep
		p.order = append(p.order, ep)
	}
	p.rebuildLocked()
	return p, nil
}

func (p *Pool) newEndpoint(e Endpoint, i int) (*endpoint, error) {
	pp, err := validateEndpoint(e, i)
	if err != nil {
		return nil, err
	}
	e.Labels = cloneLabels(e.Labels)
	ep := &endpoint{ep: e, proxy: pp, seed: endpointSeed(e.ID), weight: e.Weight, h: newHealth()}
	if ep.weight == 0 {
		ep.weight = 1
	}
	if e.Rate > 0 {
		ep.lim = rate.NewLimiter(rate.Limit(e.Rate), 1)
		p.rated.Store(true)
	}
	ep.rt = p.newTransport(ep)
	return ep, nil
}

// now returns the current time; it must not be called with mu held.
func (p *Pool) now() time.Time { return p.set.now() }

// rebuildLocked recomputes the selection members after a membership
// change and drops every cached subset.
func (p *Pool) rebuildLocked() {
	p.members = p.members[:0:0]
	for _, e := range p.order {
		if !e.draining {
			p.members = append(p.members, e)
		}
	}
	p.uniform = uniformWeight(p.members)
	if p.rules != nil {
		p.eligible = make(map[*Rule]eligible, len(p.rules.list))
		for _, r := range p.rules.list {
			var el []*endpoint
			for _, e := range p.members {
				if r.eligible(e.ep) {
					el = append(el, e)
				}
			}
			p.eligible[r] = eligible{members: el, uniform: uniformWeight(el)}
		}
	}
	p.cache.reset()
}

// wakeLocked wakes the requests waiting for a slot.
func (p *Pool) wakeLocked() {
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
}

func (p *Pool) closeTransports(eps []*endpoint) {
	for _, e := range eps {
		e.rt.CloseIdleConnections()
	}
}

// Add adds an endpoint. Only the hosts whose subset it enters move to it.
// It returns the errors New returns for a bad endpoint, an error wrapping
// egresskit.ErrInvalidConfig when the ID is present (draining included), and
// ErrClosed after Close.
func (p *Pool) Add(e Endpoint) error {
	if p == nil {
		return ErrClosed
	}
	ep, err := p.newEndpoint(e, -1)
	if err != nil {
		return err
	}
	p.mu.Lock()
	switch {
	case p.closed:
		err = ErrClosed
	case p.byID[e.ID] != nil:
		err = &configError{EndpointID: e.ID, Field: "ID", Err: errDuplicateID}
	default:
		p.byID[e.ID] = ep
		p.order = append(p.order, ep)
		p.rebuildLocked()
		p.wakeLocked()
	}
	p.mu.Unlock()
	if err != nil {
		ep.rt.CloseIdleConnections()
	}
	return err
}

// Drain stops selecting the endpoint for new requests; requests in flight
// finish normally. Its hosts move to their next endpoints, requests bound
// to it fail with ErrBindingUnavailable, and only WithForced still reaches
// it. It stays listed by Endpoints until Remove. Drain returns an error
// wrapping ErrUnknownEndpoint if no endpoint has the ID.
func (p *Pool) Drain(id string) error {
	if p == nil {
		return fmt.Errorf("%w %q", ErrUnknownEndpoint, id)
	}
	p.mu.Lock()
	e := p.byID[id]
	if e == nil {
		p.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownEndpoint, id)
	}
	if !e.draining {
		e.draining = true
		p.rebuildLocked()
		p.wakeLocked() // requests bound to it stop waiting
	}
	p.mu.Unlock()
	return nil
}

// Remove removes the endpoint. Requests in flight through it finish
// normally, their response bodies included; its idle connections are
// closed once the last one ends. Remove returns an error wrapping
// ErrUnknownEndpoint if no endpoint has the ID.
func (p *Pool) Remove(id string) error {
	if p == nil {
		return fmt.Errorf("%w %q", ErrUnknownEndpoint, id)
	}
	p.mu.Lock()
	e := p.byID[id]
	if e == nil {
		p.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownEndpoint, id)
	}
	delete(p.byID, id)
	for i, o := range p.order {
		if o == e {
			p.order = append(p.order[:i:i], p.order[i+1:]...)
			break
		}
	}
	e.removed = true
	p.noteHealthLocked(e)
	p.rebuildLocked()
	p.wakeLocked() // requests bound to it stop waiting
	idle := e.inFlight == 0
	p.mu.Unlock()
	if idle {
		e.rt.CloseIdleConnections()
	}
	return nil
}

// Close closes the pool: later requests fail with ErrClosed, waiting ones
// return ErrClosed, and idle connections are closed. Requests in flight
// finish normally; each endpoint's connections are closed when its last
// response body is closed. Close starts and leaves nothing running; it
// may be called more than once.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.wakeLocked()
	eps := append([]*endpoint(nil), p.order...)
	p.mu.Unlock()
	p.closeTransports(eps)
	p.dns.close()
}

// CloseIdleConnections closes the idle keep-alive connections of every
// endpoint's transport — to the proxies, and to the targets of direct
// endpoints — as http.Client.CloseIdleConnections expects of its
// Transport. Connections in use are left alone. The pool stays open.
func (p *Pool) CloseIdleConnections() {
	if p == nil {
		return
	}
	p.mu.Lock()
	eps := make([]*endpoint, 0, len(p.byID))
	for _, e := range p.byID {
		eps = append(eps, e)
	}
	p.mu.Unlock()
	p.closeTransports(eps)
}

// EndpointStatus is a snapshot of one endpoint. It carries no credentials.
type EndpointStatus struct {
	// ID is the endpoint's ID.
	ID string
	// Proxy is the proxy URL without credentials, or "direct".
	Proxy string
	// Labels is a copy of the endpoint's labels.
	Labels map[string]string
	// Capacity is the endpoint's capacity; 0 means no limit.
	Capacity int
	// InFlight is the number of requests holding a slot, from selection
	// until their response body is closed.
	InFlight int
	// Score is the health score in [0, 1], past penalties faded to now.
	Score float64
	// Degraded is true when the score is below HealthConfig.DegradedBelow.
	Degraded bool
	// Quarantined is true from the quarantine's start until a probe
	// readmits the endpoint.
	Quarantined bool
	// QuarantinedUntil is the end of the current quarantine, after which
	// one probe is let through; zero when not quarantined.
	QuarantinedUntil time.Time
	// Draining is true after Drain.
	Draining bool
}

// Endpoints returns a snapshot of every present endpoint, in the order
// they were added.
func (p *Pool) Endpoints() []EndpointStatus {
	if p == nil {
		return nil
	}
	now := p.now()
	c := &p.set.health
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]EndpointStatus, 0, len(p.order))
	for _, e := range p.order {
		st := EndpointStatus{
			ID:          e.ep.ID,
			Proxy:       e.proxy.redacted,
			Labels:      cloneLabels(e.ep.Labels),
			Capacity:    e.ep.Capacity,
			InFlight:    e.inFlight,
			Score:       e.h.effective(now, c),
			Degraded:    e.h.degraded(now, c),
			Quarantined: e.h.quarantined,
			Draining:    e.draining,
		}
		if e.h.quarantined {
			st.QuarantinedUntil = e.h.until
		}
		out = append(out, st)
	}
	return out
}

// Transport returns a RoundTripper that sends through the endpoint alone:
// no selection, no capacity slot. Proxy failures come back as *ProxyError
// as from RoundTrip, and feed the endpoint's health, except that results
// during a quarantine are ignored. It is for an operator's tool that tests
// each proxy on its own, as the preflight checks of package probe do. It
// reports false if no endpoint has the ID.
func (p *Pool) Transport(id string) (http.RoundTripper, bool) {
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	e := p.byID[id]
	p.mu.Unlock()
	if e == nil {
		return nil, false
	}
	return &endpointTransport{p: p, e: e}, true
}

// endpointTransport is the RoundTripper returned by Pool.Transport.
type endpointTransport struct {
	p *Pool
	e *endpoint
}

func (t *endpointTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.p.send(t.e, req, plainAttempt)
}

// sampleSetup feeds a connection setup time into the endpoint's health.
func (p *Pool) sampleSetup(e *endpoint, d time.Duration) {
	p.mu.Lock()
	e.h.sampleSetup(d, &p.set.health)
	p.mu.Unlock()
}
