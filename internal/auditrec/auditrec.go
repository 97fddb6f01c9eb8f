// Package auditrec writes the audit lines the chain records about its own
// decisions (halts, escalations, resumes, forced egress, robots.txt), so
// that every writer of these kinds writes the same fields: the chain, the
// review tools and their tests. Their layout is documented on
// telemetry.Audit; the lines go through Audit.Record, which redacts them.
package auditrec

import (
	"log/slog"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

// Halt records that host was halted because of the attempt classified as
// r: a "halt" line with host, outcome, status, markers and reason.
func Halt(a *telemetry.Audit, host string, r classify.Result) error {
	return result(a, "halt", host, r)
}

// Escalation records that the evidence of r was handed to the escalation
// hook for host: an "escalation" line with the same fields as Halt.
func Escalation(a *telemetry.Audit, host string, r classify.Result) error {
	return result(a, "escalation", host, r)
}

func result(a *telemetry.Audit, kind, host string, r classify.Result) error {
	return a.Record(kind,
		slog.String("host", host),
		slog.String("outcome", r.Outcome.String()),
		slog.Int("status", r.Status),
		slog.Any("markers", r.Markers),
		slog.String("reason", r.Reason))
}

// Resume records that an operator (by, an identity of the operator's
// choosing) lifted the halt on host: a "resume" line.
func Resume(a *telemetry.Audit, host, by string) error {
	return a.Record("resume", slog.String("host", host), slog.String("by", by))
}

// ForcedEgress records that requests to host were forced through the egress
// endpoint egress for reason: a "forced_egress" line.
func ForcedEgress(a *telemetry.Audit, host, egress, reason string) error {
	return a.Record("forced_egress",
		slog.String("host", host), slog.String("egress", egress), slog.String("reason", reason))
}

// Robots records a robots.txt decision: a "robots" line with host, path
// (redacted) and allowed.
func Robots(a *telemetry.Audit, host, path string, allowed bool) error {
	return a.Record("robots",
		slog.String("host", host), slog.String("path", path), slog.Bool("allowed", allowed))
}
