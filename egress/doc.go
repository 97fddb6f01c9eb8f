// Package egress answers one question for every attempt the chain sends:
// from where does it leave. A Pool holds the egress endpoints — proxies
// (http://, https://, socks5://, socks5h://) or a direct route — and picks
// one per request. It never decides whether a request is sent, and it never
// learns from what a target answered.
//
// # Selection
//
// Each target host maps to a small, stable subset of endpoints (SubsetSize,
// default 2) by weighted rendezvous hashing: every endpoint gets a score
// per host, -Weight/ln(u) with u a pseudo-random number in (0, 1) drawn
// from the host and the endpoint, and the host's subset is the endpoints
// with the highest scores. An endpoint of weight 2 heads the subset of
// about twice as many hosts as one of weight 1. When an endpoint joins or
// leaves, only the hosts whose subset contained it move — its share of the
// total weight, about 1/N of hosts — so a target sees few addresses and
// the mapping barely changes as the pool changes. Scores use fixed hash
// functions, so every process of a fleet maps a host to the same subset. A
// bounded per-host cache, reset whenever membership changes, keeps
// selection at a map lookup in steady state.
//
// # Rules
//
// Rules (Config.Rules) restrict by labels the endpoints a host's requests
// may leave from: "*.de" and "site:example.fr" only from region=eu, say.
// The rule governing a host is found by its most specific pattern (see
// Rule); the subset is drawn from the endpoints the rule makes eligible,
// and so is every fallback below. A rule is a hard constraint: when no
// eligible endpoint is usable the request fails with a *RuleError naming
// the rule, and it never leaves from an excluded endpoint, whatever the
// health of the others and even when forced or bound. The rule's name is
// in the Choice. Rules are validated by New (unknown label keys, patterns,
// overlaps) and can be read from JSON with ReadRules.
//
// # Choice inside the subset
//
// Inside the subset the request goes to the healthiest endpoint with a
// free slot (ReasonAffinity); within a health tier (healthy, or degraded)
// to the least loaded — requests in flight over Capacity, an endpoint
// without a limit counting as unloaded — and between equals in the host's
// rendezvous order, so a host keeps its first endpoint while load allows.
// A saturated member therefore never makes a request wait while another
// member has room. When every subset endpoint is quarantined, the request
// goes outside the subset (ReasonAffinityUnhealthy); when a subset
// endpoint is usable but full, it goes outside the subset too
// (ReasonCapacity). Outside the subset the best tier wins and, within a
// tier, the host's rendezvous order decides: displaced hosts spread over the
// pool instead of piling onto the one endpoint with the best score.
// Selection is blind to outcomes: nothing a target answers changes a rule,
// a weight or a load.
//
// When every usable endpoint is at capacity, RoundTrip waits for a slot
// while the request's context allows. Capacity is a concurrency limit of
// the proxies, like a semaphore: by the time a request reaches egress it has
// already been admitted and paced by the host layers, so waiting is the
// honest back-pressure, and failing would only turn a full pool into errors
// that the retry layer would mistake for a failing host. Set
// Config.FailWhenFull to get ErrAtCapacity instead.
//
// Context values override selection: WithForced names an endpoint chosen by
// an operator (ReasonForced), WithBinding a session's sticky endpoint
// (ReasonSticky), which is used exactly, or the request fails with
// ErrBindingUnavailable; it never silently moves a session to another
// address. WithRecorder lets outer layers read the Choice made.
//
// # Health
//
// Health is learned from egress-level signals only: failing to dial the
// proxy, failing TLS to an https:// proxy, proxy authentication (407, or a
// 401 carrying Proxy-Authenticate as tinyproxy sends), SOCKS handshake and
// authentication failures, a CONNECT refused by the proxy, a proxy's own
// error told apart by its RFC 9209 Proxy-Status header, and the time it
// takes to set up a connection through the proxy. Any response from a
// target, whatever its status — 403 and 429 included — is a success for the
// endpoint, and a proxy reporting that the target could not be reached
// (Proxy-Status error=connection_refused, SOCKS "host unreachable") is not
// held against the endpoint. The API accepts no status code, no outcome and
// no target error, and the package imports no other package of its module:
// egress structurally cannot learn to route around a block. For the same
// reason latency is measured on connection setup through the proxy, not on
// the target's response: a target that answers slowly on purpose cannot
// push its traffic to another address.
//
// The score is in [0, 1]. Each attempt moves it towards 1 (success, scaled
// down when connection setup is slower than HealthConfig.SlowSetup) or 0
// (failure) by HealthConfig.Smoothing, and past penalties fade with
// HealthConfig.HalfLife so that an endpoint that saw a bad minute is not
// shunned forever. One failure makes an endpoint degraded (below
// DegradedBelow), so the host's next request — a retry, typically — goes
// to a healthy peer. Below QuarantineBelow, or after QuarantineAfter
// failures in a row, the endpoint is quarantined for QuarantineBase,
// doubled for every quarantine that follows without a full recovery in
// between, capped at QuarantineMax (15s, 30s, 1m, ... 10m by default).
// When the quarantine ends, exactly one request of a host whose subset
// holds the endpoint is let through as a probe (ReasonProbe): success
// readmits it on probation (degraded until the penalty fades or successes
// lift it), failure quarantines it again for longer. Results of requests
// sent before a quarantine are ignored. Direct endpoints have no proxy to
// judge and stay healthy.
//
// # Transports
//
// Every endpoint has its own http.Transport. A shared transport would
// consult its Proxy function only when it dials a new connection; keep-alive
// and HTTP/2 then reuse that connection, whatever proxy a later request was
// meant to use, so per-request selection would silently not happen. One
// transport per endpoint makes the choice real and gives each proxy its own
// connection limits and timeouts. SOCKS endpoints dial through
// golang.org/x/net/proxy: socks5 resolves the target name locally, socks5h
// lets the proxy resolve it.
//
// Proxy credentials never appear in an error, a Choice, an EndpointState or
// the String form of an Endpoint.
package egress
