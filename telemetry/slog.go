package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/egresskit/egresskit/classify"
)

// Attribute names written by Slog, one per Event field. They are stable:
// dashboards and alerts may rely on them.
const (
	AttrHost         = "host"
	AttrMethod       = "method"
	AttrURL          = "url"
	AttrAttempt      = "attempt"
	AttrRetries      = "retries"
	AttrFinal        = "final"
	AttrStatus       = "status"
	AttrOutcome      = "outcome"
	AttrMarkers      = "markers"
	AttrEgress       = "egress"
	AttrEgressReason = "egress_reason"
	AttrEgressRule   = "egress_rule" // only when a rule governs the host
	AttrBreaker      = "breaker"
	AttrWait         = "wait"
	AttrDuration     = "duration"
	AttrError        = "error"
)

// SlogMessage is the message of every record written by Slog.
const SlogMessage = "egress attempt"

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

// DefaultLevel is the level Slog uses by default for an outcome: Debug for
// OK and Canceled, Info for Permanent, Warn for Transient and Throttled,
// Error for Refused (a halted host needs a human), and Warn for an unknown
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

// Slog is an Observer writing one log record per event. Records carry the
// event's time and the attributes named by the Attr constants, every one on
// every record (empty when unset; markers joined with ","), in the order of
// the constants; the record of an attempt the chain did not send ends with
// one more, "unsent", holding Event.Unsent. It is safe for concurrent use.
type Slog struct {
	h      slog.Handler
	level  func(classify.Outcome) slog.Level
	sample float64
	okSeen atomic.Uint64
}

var _ Observer = (*Slog)(nil)

// NewSlog returns an Observer logging to l. A nil l discards every event.
func NewSlog(l *slog.Logger, opts SlogOptions) *Slog {
	s := &Slog{level: opts.Level, sample: opts.SampleOK}
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

// Observe writes e as one record, unless the handler is not enabled for
// its level or the event is an OK event sampled out. Handler errors are
// ignored, as slog.Logger does.
func (s *Slog) Observe(ctx context.Context, e *Event) {
	level := s.level(e.Outcome)
	if !s.h.Enabled(ctx, level) {
		return
	}
	if e.Outcome == classify.OK && !s.keepOK() {
		return
	}
	r := slog.NewRecord(e.Time, level, SlogMessage, 0)
	r.AddAttrs(
		slog.String(AttrHost, e.Host),
		slog.String(AttrMethod, e.Method),
		slog.String(AttrURL, RedactString(e.URL)),
		slog.Int(AttrAttempt, e.Attempt),
		slog.Int(AttrRetries, e.Retries),
		slog.Bool(AttrFinal, e.Final),
		slog.Int(AttrStatus, e.Status),
		slog.String(AttrOutcome, e.Outcome.String()),
		slog.String(AttrMarkers, strings.Join(e.Markers, ",")),
		slog.String(AttrEgress, e.Egress),
		slog.String(AttrEgressReason, e.EgressReason),
		slog.String(AttrBreaker, e.Breaker),
		slog.Duration(AttrWait, e.Wait),
		slog.Duration(AttrDuration, e.Duration),
		slog.String(AttrError, RedactString(e.Err)),
	)
	if e.EgressRule != "" {
		r.AddAttrs(slog.String(AttrEgressRule, e.EgressRule))
	}
	if e.Unsent != "" {
		r.AddAttrs(slog.String("unsent", e.Unsent))
	}
	_ = s.h.Handle(ctx, r)
}

// keepOK decides, deterministically, whether the next OK event is logged:
// the n-th is kept when floor(n*rate) grows.
func (s *Slog) keepOK() bool {
	if s.sample >= 1 {
		return true
	}
	if s.sample < 0 {
		return false
	}
	n := s.okSeen.Add(1)
	return uint64(float64(n)*s.sample) != uint64(float64(n-1)*s.sample)
}
