package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/egresskit/egresskit/classify"
)

// Attribute names written by NewSlog's observer, one per Event field,
// listed in its doc. They are stable: dashboards and alerts rely on them.
const (
	attrHost         = "host"
	attrMethod       = "method"
	attrURL          = "url"
	attrAttempt      = "attempt"
	attrRetries      = "retries"
	attrFinal        = "final"
	attrStatus       = "status"
	attrOutcome      = "outcome"
	attrMarkers      = "markers"
	attrEgress       = "egress"
	attrEgressReason = "egress_reason"
	attrEgressRule   = "egress_rule" // only when a rule governs the host
	attrBreaker      = "breaker"
	attrWait         = "wait"
	attrDuration     = "duration"
	attrError        = "error"
	attrUnsent       = "unsent" // only for an attempt the chain did not send
)

// slogMessage is the message of every record written by NewSlog's
// observer.
const slogMessage = "egress attempt"

// SlogOptions configures NewSlog. The zero value logs every event at the
// default levels.
type SlogOptions struct {
	// SampleOK is the fraction of OK events to log, between 0 and 1. The
	// sampling is deterministic: 0.1 logs exactly every tenth OK event.
	// Zero (the default), and any value of 1 or more, log every OK event;
	// a negative value logs none. Other outcomes are never sampled.
	SampleOK float64
	// Level chooses the level of an event's record. Nil means
	// DefaultLevel.
	Level func(classify.Outcome) slog.Level
}

// DefaultLevel is the level NewSlog's observer gives an outcome by default,
// for a crawler author's SlogOptions.Level to fall back on: Debug for OK
// and Canceled, Info for Permanent, Warn for Transient and Throttled, Error
// for Refused (a halted host needs a human), and Warn for an unknown
// outcome.
func DefaultLevel(o classify.Outcome) slog.Level {
	switch o {
	case classify.OK, classify.Canceled:
		return slog.LevelDebug
	case classify.Permanent:
		return slog.LevelInfo
	case classify.Refused:
		return slog.LevelError
	}
	return slog.LevelWarn
}

// slogObserver is the Observer NewSlog returns.
type slogObserver struct {
	h      slog.Handler
	level  func(classify.Outcome) slog.Level
	sample float64
	okSeen atomic.Uint64
}

// NewSlog returns an Observer writing one log record per event to l, for
// a crawler author or an operator reading the crawl in the logs. A nil l
// discards every event. The observer is safe for concurrent use.
//
// Every record has the message "egress attempt", the event's time, a
// level chosen by SlogOptions.Level, and these attributes, in this order,
// every one on every record (empty when unset):
//
//	host           Event.Host
//	method         Event.Method
//	url            Event.URL (redacted)
//	attempt        Event.Attempt
//	retries        Event.Retries
//	final          Event.Final
//	status         Event.Status
//	outcome        Event.Outcome: ok, transient, throttled, refused, permanent, canceled
//	markers        Event.Markers, joined with ","
//	egress         Event.Egress
//	egress_reason  Event.EgressReason
//	breaker        Event.Breaker
//	wait           Event.Wait (a duration)
//	duration       Event.Duration (a duration)
//	error          Event.Err (redacted)
//
// then "egress_rule" (Event.EgressRule) when a rule governs the host, and
// "unsent" (Event.Unsent) when the chain did not send the attempt. The
// names are stable: dashboards and alerts may rely on them.
//
// Observe writes an event as one record, unless the handler is not
// enabled for its level or the event is an OK event sampled out. Handler
// errors are ignored, as slog.Logger does.
func NewSlog(l *slog.Logger, opts SlogOptions) Observer {
	s := &slogObserver{level: opts.Level, sample: opts.SampleOK}
	if s.level == nil {
		s.level = DefaultLevel
	}
	if l != nil {
		s.h = l.Handler()
	} else {
		s.h = slog.DiscardHandler
	}
	if s.sample == 0 || s.sample > 1 {
		s.sample = 1
	}
	return s
}

// Observe writes e as one record (see NewSlog).
func (s *slogObserver) Observe(ctx context.Context, e *Event) {
	level := s.level(e.Outcome)
	if !s.h.Enabled(ctx, level) {
		return
	}
	if e.Outcome == classify.OK && !s.keepOK() {
		return
	}
	r := slog.NewRecord(e.Time, level, slogMessage, 0)
	r.AddAttrs(
		slog.String(attrHost, e.Host),
		slog.String(attrMethod, e.Method),
		slog.String(attrURL, Redactor{}.RedactString(e.URL)),
		slog.Int(attrAttempt, e.Attempt),
		slog.Int(attrRetries, e.Retries),
		slog.Bool(attrFinal, e.Final),
		slog.Int(attrStatus, e.Status),
		slog.String(attrOutcome, e.Outcome.String()),
		slog.String(attrMarkers, strings.Join(e.Markers, ",")),
		slog.String(attrEgress, e.Egress),
		slog.String(attrEgressReason, e.EgressReason),
		slog.String(attrBreaker, e.Breaker),
		slog.Duration(attrWait, e.Wait),
		slog.Duration(attrDuration, e.Duration),
		slog.String(attrError, Redactor{}.RedactString(e.Err)),
	)
	if e.EgressRule != "" {
		r.AddAttrs(slog.String(attrEgressRule, e.EgressRule))
	}
	if e.Unsent != "" {
		r.AddAttrs(slog.String(attrUnsent, e.Unsent))
	}
	_ = s.h.Handle(ctx, r)
}

// keepOK decides, deterministically, whether the next OK event is logged:
// the n-th is kept when floor(n*rate) grows.
func (s *slogObserver) keepOK() bool {
	if s.sample >= 1 {
		return true
	}
	if s.sample < 0 {
		return false
	}
	n := s.okSeen.Add(1)
	return uint64(float64(n)*s.sample) != uint64(float64(n-1)*s.sample)
}
