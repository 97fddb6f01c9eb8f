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
// free slot (Choice.Reason "affinity"); within a health tier (healthy, or degraded)
// to the least loaded — requests in flight over Capacity, an endpoint
// without a limit counting as unloaded — and between equals in the host's
// rendezvous order, so a host keeps its first endpoint while load allows.
// A saturated member therefore never makes a request wait while another
// member has room. When every subset endpoint is quarantined, the request
// goes outside the subset (Choice.Reason "affinity_unhealthy"); when a subset
// endpoint is usable but full, it goes outside the subset too
// (Choice.Reason "capacity"). Outside the subset the best tier wins and, within a
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
// Config.FailWhenFull to get ErrAtCapacity instead. An endpoint's Rate (a
// proxy plan's requests per second, paced by a golang.org/x/time/rate
// Limiter of this process) is held the same way: an endpoint out of tokens
// is full until its next token is due.
//
// Context values override selection: WithForced names an endpoint chosen by
// an operator (Choice.Reason "forced"), WithBinding a session's sticky endpoint
// (Choice.Reason "sticky"), which is used exactly, or the request fails with
// ErrBindingUnavailable; it never silently moves a session to another
// address. WithRecorder lets outer layers read the Choice made.
//
// # Health
//
// Health is learned from egress-level signals only: failing to dial the
// proxy, failing TLS to an https:// proxy, the proxy refusing our
// credentials, SOCKS handshake failures, a proxy's own error, and the time
// it takes to set up a connection through the proxy. Any response from a
// target, whatever its status — 401, 403 and 429 included — is a success
// for the endpoint, and so is a proxy's report that it could not reach the
// target. The API accepts no status code, no outcome and no target error,
// and the package imports no other package of its module: egress
// structurally cannot learn to route around a block. For the same reason
// latency is measured on connection setup through the proxy, not on the
// target's response: a target that answers slowly on purpose cannot push
// its traffic to another address.
//
// A proxy's own answers are told from the target's as follows (see
// ProxyError.Kind). Every answer to CONNECT other than 200 is the proxy's. On
// an absolute-form request (an http:// target through an HTTP proxy) an
// answer is the proxy's only when marked so: by RFC 9209 Proxy-Status, by
// squid's X-Squid-Error, or as tinyproxy's own page (Server: tinyproxy/...
// and no Via). The mark also says whom the proxy blames: squid's
// ERR_CONNECT_FAIL or ERR_DNS_FAIL, tinyproxy's "500 Unable to connect",
// Proxy-Status connection_refused and SOCKS replies 4, 5 and 6 blame the
// target (Kind "destination": no count against the endpoint; on absolute-form
// the proxy's page is returned as the target's answer); squid's
// ERR_ACCESS_DENIED, Proxy-Status dns_timeout or proxy_internal_error, and
// SOCKS reply 1 (general failure) blame the proxy — except when a socks5h
// proxy was handed a name to resolve: microsocks answers a name that does
// not resolve with reply 1, so there it blames the target.
//
// Every refusal of credentials is an egress fault (Kind "auth"): a 407; a 401
// to CONNECT; a 401 to an absolute-form request carrying only
// Proxy-Authenticate or marked as the proxy's own — tinyproxy answers a
// wrong password with 401 and WWW-Authenticate, and 407 only when no
// credentials are sent; a SOCKS authentication failure. Its Err tells
// ErrProxyAuthRequired (none configured) from ErrProxyAuthRejected. The
// caller never receives the proxy's 401 or 407: RoundTrip returns the
// *ProxyError, which the chain retries on another endpoint.
//
// These rules were checked against squid 5.7 (Debian's GnuTLS build, http
// and TLS ports), tinyproxy 1.11.1 and microsocks 1.0.3 (socks5 and
// socks5h), by the tests named TestReal* of this package and of package
// egresskit; the in-process fakes of the unit tests say which of those
// answers each imitates.
//
// The score is in [0, 1]. Each attempt moves it towards 1 (success, scaled
// down when connection setup is slower than HealthConfig.SlowSetup) or 0
// (failure) by HealthConfig.Smoothing, and past penalties fade with
// HealthConfig.HalfLife. One failure makes an endpoint degraded, so the
// host's next request — a retry, typically — goes to a healthy peer.
// Readmission does not wait for the score to fade: ProbeAfter (2s) after
// its last failure, the next request of a host whose subset holds the
// endpoint goes to it as a trial, whatever its score, and the trial's
// success puts it back in the healthy tier; a failed trial waits another
// ProbeAfter.
//
// A refusal of credentials or an untrusted proxy certificate quarantines
// the endpoint at once; other failures do below QuarantineBelow or after
// QuarantineAfter (3) failures in a row. A quarantine lasts QuarantineBaseDelay,
// doubled for every quarantine that follows without a full recovery in
// between, capped at QuarantineMaxDelay: 5s, 10s, 20s, ... 10m by default. When
// it ends, exactly one request of a host whose subset holds the endpoint is
// let through as a probe (Choice.Reason "probe"): success readmits it at the lower
// edge of the healthy tier, failure quarantines it again for longer.
// Results of requests sent before a quarantine are ignored. Direct
// endpoints have no proxy to judge and stay healthy.
//
// When no endpoint is usable, RoundTrip's ErrNoEndpoint carries the last
// failure of the quarantined endpoints: errors.As finds the *ProxyError,
// and errors.Is its cause (ErrProxyAuthRejected, ErrProxyAuthRequired,
// syscall.ECONNREFUSED, an x509 error, ...).
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
// Pool.CloseIdleConnections closes every endpoint's idle connections, as
// http.Client.CloseIdleConnections expects of its transport.
//
// Proxy URLs are checked strictly: a path other than "/", a query, a
// fragment, surrounding spaces or credentials whose unencoded '/', '?' or
// '#' cut them short are rejected with an egresskit.ErrInvalidConfig
// error rather than guessed at. Proxy credentials never appear in an error, a Choice, an
// EndpointStatus or the String form of an Endpoint.
//
// # Connection tuning
//
// Every setting below is per endpoint (each has its own transport). The
// defaults are for a crawler: many hosts, a few requests to each at a time
// (the pacing layer's job), through proxies that close idle connections
// after a minute or two.
//
//	setting                default  why
//	Endpoint.Capacity      none     requests in flight through the endpoint
//	                                (≈ its connections): set it to the
//	                                proxy's concurrency allowance; a full
//	                                endpoint makes requests wait, or go to a
//	                                less loaded member of the subset.
//	Endpoint.Rate          none     requests per second through the endpoint,
//	                                per process; over it the endpoint is
//	                                full, as over its Capacity.
//	MaxConnsPerHost        none     per target host; per-host concurrency is
//	                                the pacer's decision, not a hidden queue
//	                                inside net/http.
//	MaxIdleConns           64       idle keep-alive connections in all.
//	MaxIdleConnsPerHost    4        covers the few requests a paced host
//	                                gets at once. Reuse is worth keeping:
//	                                BenchmarkConnReuse measured 30-45 µs per
//	                                loopback TLS request on a kept-alive
//	                                connection against 1.4-3.4 ms on a new
//	                                one (and 26× the bytes allocated), before
//	                                any network round trip is added.
//	IdleConnTimeout        30s      closes before the proxy does (squid's
//	                                client_idle_pconn_timeout is 2 minutes),
//	                                so a request never races a proxy closing
//	                                its idle connection.
//	KeepAlive              30s      TCP keep-alive period: a dead path to a
//	                                proxy is noticed on a held connection.
//	DialTimeout            10s      dialling the proxy (or the target, when
//	                                direct): Linux resends a SYN after 1s and
//	                                3s more, so 10s allows three tries.
//	TLSHandshakeTimeout    10s      with the target or an https:// proxy, as
//	                                net/http's DefaultTransport.
//	ResponseHeaderTimeout  30s      from the request written to the headers;
//	                                a longer silence is treated as a hang and
//	                                left to the retry policy.
//	ExpectContinueTimeout  1s       fixed, as net/http's DefaultTransport.
//	DNS.MaxTTL             1h       an answer is kept for its TTL, at most
//	                                this (see DNSConfig).
//	DNS.NegativeTTL        30s      at most, for a name that does not exist.
//	DNS.ServeStale         1h       an expired answer served while every DNS
//	                                server fails, up to this past its TTL
//	                                (RFC 8767); servers are asked again
//	                                every 30s meanwhile.
//	DNS.MaxEntries         4096     names cached.
//	DNS.Timeout            2s       per query and server.
//
// Only the connection-reuse figure is measured here; the timeouts are
// protocol-derived or net/http's own, and tests assert none of them.
package egress
