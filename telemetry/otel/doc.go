// Package otel exports egresskit's telemetry to OpenTelemetry: a span per
// request with a child span per attempt, and metrics equal to those of the
// telemetry/prometheus module.
//
// A Telemetry is a telemetry.Observer (add it to the chain's Observers) and
// wraps the chain with Transport, which opens the request span:
//
//	ot, err := otel.New(otel.Config{TracerProvider: tp, MeterProvider: mp})
//	chain, err := egresskit.New(egresskit.Config{Observers: []telemetry.Observer{ot}})
//	client := &http.Client{Transport: ot.Transport(chain)}
//
// # Spans
//
// "egresskit.request" (client kind) covers one RoundTrip of the chain, from
// the call until the response headers are in (or the error); for a 2xx
// page, which the chain judges as the caller reads its body, until that
// judgement (the first read of the body, or its Close). It carries
// the method, the redacted URL, the host key, the final status, outcome and
// number of attempts sent. Each attempt becomes an "egresskit.attempt"
// child span, from the start of its pacing wait to the end of its round
// trip (an attempt the chain did not send: an instant when the chain
// refused it), with these attributes:
//
//	egresskit.attempt         attempt number, from 1
//	egresskit.retry           attempts before this one (0 for the first)
//	egresskit.outcome         ok, transient, throttled, refused, permanent, canceled
//	egresskit.host            host key (pacing, breaker and halt key)
//	egresskit.egress.endpoint egress endpoint ID ("" when none was used)
//	egresskit.egress.reason   why that endpoint was chosen
//	egresskit.breaker         breaker state after the attempt (closed, half-open, open, halted)
//	egresskit.unsent          why the chain did not send it ("" when sent; telemetry.Event.Unsent)
//	egresskit.wait_seconds    pacing wait before sending
//	egresskit.final           whether this attempt's result is the request's
//	egresskit.markers         challenge markers that matched
//	http.request.method, url.full (redacted), http.response.status_code
//
// An attempt that failed records its (redacted) error as a span event and
// sets the span status to Error; so does one whose outcome is not ok. No
// attribute ever holds a credential: URLs and errors arrive redacted from
// the chain (telemetry.Redactor), and the request span redacts its URL
// with Config.Redactor.
//
// Without Transport, attempt spans are children of whatever span the
// request's context carries (otelhttp's, for one), or roots.
//
// # Metrics
//
// The same as the Prometheus collector's, under OpenTelemetry names:
//
//	egresskit.attempts          counter {outcome, egress_reason}: attempts sent
//	egresskit.unsent            counter {reason}: requests refused before
//	                            sending (telemetry.Event.Unsent: halted, open,
//	                            disallowed, out_of_scope, deadline, canceled,
//	                            error)
//	egresskit.requests          counter {outcome, egress_reason} (final attempts sent)
//	egresskit.retries           counter, attempts sent
//	egresskit.attempt.duration  histogram, s {outcome}; attempts sent
//	egresskit.token.wait        histogram, s; attempts sent
//	egresskit.halts             counter: attempts whose result halted their host
//	egresskit.breaker.hosts     gauge {state}, from Config.BreakerCounts
//	egresskit.host.breaker_state gauge {host, state}, watched hosts, from Config.Status
//	egresskit.host.pacing_rate  gauge, requests/min {host}, watched hosts, from Config.Status
//	egresskit.egress.endpoint.score       gauge {endpoint}, from Config.Endpoints
//	egresskit.egress.endpoint.quarantined gauge {endpoint}, from Config.Endpoints
//	egresskit.dns.lookups       counter {result: hit, miss, stale}, from Config.DNS
//	egresskit.dns.queries, egresskit.dns.failures  counters, from Config.DNS
//
// Histograms use explicit buckets (Config.Buckets, by default those of the
// Prometheus collector), from which p50, p95 and p99 are derived the usual
// way. Cardinality is bounded: no metric has a label per crawled host
// except for the hosts on the operator's watch list, and egress_reason
// keeps at most MaxReasons values.
//
// The package lives in its own module so that importing egresskit does not
// import OpenTelemetry.
package otel
