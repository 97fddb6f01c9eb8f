// Package probe is the pre-flight check of a crawl: before a fleet is
// dispatched, Run probes the targets (and the proxies they leave through)
// within a strict time budget and turns what it saw into a verdict
// — HEALTHY, DEGRADED or CRITICAL — and into settings: a retry backoff, a
// concurrency factor and per-host pacing.
//
// # Probing
//
// Each probe is one request (GET or HEAD, redirects followed) through one
// egress endpoint's own transport (package egress, Pool.Transport: no
// selection, proxy failures reported as *egress.ProxyError), classified
// once by package classify. Probes never go through retries or circuit
// breakers: a probe measures, it does not heal. Options.Matrix sends every
// target through every egress, which tells a dead or blacklisted proxy
// (Diagnosis.FailingEgresses) from a host that refuses us whatever the
// address (Diagnosis.BlockingHosts). Under egress rules (Options.Rules, the
// same rules a crawl's egress.Pool enforces) a probe never leaves from an
// egress its host's rule excludes, and a matrix run reports per rule and
// host whether an eligible egress got through (Report.Rules).
//
// Probes are polite, unless told otherwise: at most Options.PerHost (2) are
// in flight to one host, while probes to other hosts go; each URL is first
// checked against its host's robots.txt, fetched through the probe's own
// egress with the probe's User-Agent, and a disallowed URL is reported
// (TargetResult.Disallowed) rather than probed; and the User-Agent defaults to
// the chain's, so that robots.txt and refusals judge the probe under the
// crawl's agent token.
//
// Timeouts have two tiers. Options.PerRequestTimeout bounds each probe; one
// that runs out is a Transient "timeout", a failure of the target.
// Options.Deadline bounds the whole Run: when it passes, every probe still
// running is cancelled and reported with the outcome "deadline", every
// probe not yet started likewise with the stage "queued", and Run returns
// within milliseconds, whatever the endpoints do — a TCP handshake that
// never completes, a TLS handshake that never completes, a server that
// never answers. The report always holds one result per probe; nothing
// gathered before the deadline is thrown away.
//
// Each result records where the probe got to (TargetResult.Stage) and how long each step
// took (Phases: DNS, connect, TLS, time to first byte, measured with
// net/http/httptrace as blackbox_exporter measures them). URLs, proxy URLs
// and error texts are redacted by package telemetry's rules, and the
// credentials of every proxy and target of the run are removed verbatim
// from error texts: no password, token or user name reaches a report.
//
// # Diagnosis
//
// The diagnosis (Report.Diagnosis) is a pure function of the results and
// Options.Thresholds. A probe succeeds when its
// outcome is classify.OK. It is rate-limited when its status is 429 or its
// outcome Throttled; blocked when, not rate-limited, it was Refused (a
// challenge page, a refusal naming the agent), had status 403 or 503, or got
// no response because its connection failed (refused, reset); a hang (its
// timeout, or the deadline) is not a block but a timeout (Timeouts). The
// success rate is over the measured probes: those robots.txt disallowed or
// the caller canceled are not measured (Measured, Disallowed). Latency statistics cover the probes that received a response;
// percentiles use the nearest-rank definition. The default thresholds:
// CRITICAL on a success rate below 0.5 (or no probe measured); DEGRADED on
// any rate-limited probe, a success rate below 0.9 or a mean latency above
// 2 s; comparisons are strict. CRITICAL means halt: the status is CRITICAL
// exactly when Recommendation.Halt() is true. Rate limiting alone degrades
// (slower fleet, paced hosts) rather than halting. BlockingHosts lists only
// hosts with blocked probes, so it is empty whenever Blocked is 0; the
// converse does not hold: a host is named only when some egress worked for
// another host (else the fault may be the route's), so a refused
// connection with no success anywhere counts in Blocked and names no host.
//
// The recommended Backoff starts from the status's tier (1 s/10 s/2 retries,
// 2 s/30 s/3, 5 s/60 s/5) and is raised to what was observed: the initial
// delay is at least the longest Retry-After seen. Backoff.Policy and
// Recommendation.RateLimit turn the diagnosis into the settings of the
// chain:
//
//	rep, err := probe.Run(ctx, targets, probe.Options{Proxies: endpoints})
//	// check err and rep.Status, then:
//	store, err := hoststate.NewMemory(hoststate.Config{Limit: rep.Recommendation.RateLimit()})
//	// check err, then:
//	t, err := egresskit.New(egresskit.Config{Retry: rep.Backoff.Policy(), Store: store})
//
// # JSON
//
// A Report marshals to JSON with stable field names: timestamp,
// total_probed, results[] (url, proxy, status_code, latency_ms, success,
// error_message) and diagnosis (status, success_rate, average_latency_ms,
// rate_limited_count, blocked_count, recommended_backoff{initial_delay_sec,
// max_delay_sec, max_retries}), plus schema_version and the fields
// documented on Report. Fields are only ever added, never renamed. The command preflight
// prints it.
package probe
