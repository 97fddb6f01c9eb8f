// Package telemetry reports what the egresskit chain does, one Event per
// attempt, and keeps credentials out of every report.
//
// It has four parts:
//
//   - Event and Observer: the chain builds one Event after each attempt and
//     hands it to its observers synchronously. Fanout combines observers;
//     Async moves a slow observer off the request path behind a bounded,
//     non-blocking buffer, and recovers an untrusted observer's panics.
//   - Redactor: the one place where URLs, headers and error text are
//     stripped of userinfo, secret-looking query values and credential
//     headers. Every package of the module redacts through it.
//   - NewSlog: an Observer writing one log/slog record per attempt with stable
//     attribute names and a level chosen by outcome.
//   - Audit: a tamper-evident, append-only JSON Lines log whose lines are
//     chained by SHA-256, and a Verifier to check it.
//
// Metrics for Prometheus live in the telemetry/prometheus module, and
// OpenTelemetry spans and metrics in the telemetry/otel module, so that
// importing this package does not pull in a metrics library.
package telemetry
