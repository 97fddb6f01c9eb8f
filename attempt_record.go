package egresskit

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/telemetry"
)

// settled feeds the Result r of an attempt that was sent to the block
// detector, the host's state (record), the audit log and the escalation
// hook (halt), and the observers.
func (a *attempt) settled(r classify.Result) {
	t := a.t
	suspected := t.watch.Observe(a.key, a.req.URL, r, a.sent)
	if suspected != nil {
		r, _ = suspectedBlock(r, a.resp)
	}
	if a.resp != nil {
		r.Latency = a.took
	}
	eff, err := a.record(r)
	if eff.Halted {
		a.halt(r, suspected)
	}
	if t.cfg.Audit != nil && a.choice != nil && a.choice.Reason == "forced" {
		auditrec.ForcedEgress(t.cfg.Audit, a.key, a.choice.EndpointID, a.choice.Reason)
	}
	a.observe(r, &eff, err, "")
}

// record feeds r to the host's state, as one failure per connection (see
// connFails), and returns what it changed and the attempt's error, joined
// with the store's. A refusal the store could not take halts the host in
// this Transport (see holds).
func (a *attempt) record(r classify.Result) (hoststate.Effect, error) {
	t := a.t
	counted, shared := t.connFails.countable(r, a.err, a.conn)
	a.shared = shared
	eff, err := t.record(a.ctx, a.key, a.adm, counted)
	if err != nil && r.Outcome == classify.Refused && !eff.Halted {
		// The store lost the halt: keep it in this Transport.
		eff.Halted = t.holds.hold(a.key, a.sent)
	}
	if err == nil {
		err = a.err
	} else if a.err != nil {
		err = errors.Join(a.err, err)
	}
	return eff, err
}

// halt hands the evidence of the refusal r that halted the host to the
// audit log, the store's HaltLog and the escalation hook. suspected is the
// block detector's evidence when it decided.
func (a *attempt) halt(r classify.Result, suspected *blockwatch.Evidence) {
	t := a.t
	if t.cfg.Audit != nil {
		auditrec.Halt(t.cfg.Audit, a.key, r)
	}
	var head []byte
	if a.resp != nil {
		// What the classifier read, or at most its peek's time budget
		// more: a stalled body must not hold RoundTrip. For a 2xx page
		// judged as it is read, the head that judgement read.
		head = a.id.classify.Head(a.req.Context(), a.resp, 1024)
	}
	t.putHalt(a.ctx, a.key, a.req, r, a.sent, head, suspected)
	if t.cfg.OnEscalate != nil {
		t.escalate(a.key, a.req, head, r, a.sent, suspected)
	}
}

// observe builds the attempt's event when there is an observer. The event
// of attempt n is delivered when attempt n+1 is sent (not final) or when
// the request returns (final), so Final is exact without guessing the
// retry decision. An attempt whose Result settles after the request
// returned (late) is the request's last: its event is delivered Final when
// it settles. r is the attempt's Result; eff is what recording it did to
// the host's state, nil when nothing was recorded; err is the attempt's
// error; unsent is the reason an attempt was not sent (unsentReason), ""
// for one sent.
func (a *attempt) observe(r classify.Result, eff *hoststate.Effect, err error, unsent string) {
	t := a.t
	if len(t.observers) == 0 {
		return
	}
	at := a.sent
	if unsent != "" {
		at = a.start
	}
	e := &telemetry.Event{
		Time:     at,
		Host:     a.key,
		Method:   a.req.Method,
		URL:      t.cfg.Redactor.RedactURL(a.req.URL),
		Attempt:  a.n,
		Status:   r.Status,
		Outcome:  r.Outcome,
		Markers:  r.Markers,
		Wait:     a.wait,
		Duration: a.took,
		Unsent:   unsent,
	}
	e.Retries = e.Attempt - 1
	switch {
	case errors.Is(err, ErrHalted) || (eff != nil && eff.Halted):
		e.Breaker = "halted"
	case errors.Is(err, ErrOpen):
		e.Breaker = breaker.Open.String()
	case eff != nil:
		e.Breaker = eff.To.String()
	}
	if a.choice != nil {
		e.Egress, e.EgressReason, e.EgressRule = a.choice.EndpointID, a.choice.Reason, a.choice.Rule
	}
	if err != nil {
		e.Err = t.cfg.Redactor.RedactError(err)
	}
	if p, ok := a.ctx.Value(pendingKey{}).(*pending); ok && !a.late {
		p.push(a.ctx, t.observers, e)
		return
	}
	e.Final = true
	t.observers.Observe(a.ctx, e)
}

// stateTimeout bounds a Record made after the caller's context ended, so
// that the outcome of a sent attempt is never lost to a cancellation.
const stateTimeout = 2 * time.Second

// record feeds r to the store and returns what it changed, and its error:
// the attempt's event carries it. A Refused result the store could not
// take is held by the caller (see holds). The records of attempts not
// sent (Canceled) only free their admission; their error changes nothing
// a caller can act on, and the store reports it as it does any (a
// Redis store's Warning).
func (t *Transport) record(ctx context.Context, key string, adm hoststate.Admission, r classify.Result) (hoststate.Effect, error) {
	if ctx.Err() != nil {
		// The outcome of an attempt that was admitted must reach the
		// state even when the caller has gone: detach, but bound it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stateTimeout)
		defer cancel()
	}
	return t.state.Record(ctx, key, adm, r)
}

// refuse reports a request the chain refused before its first attempt
// (scope, robots.txt, the agent): one Final event, not sent, when there
// is an observer. It closes the request's body and returns err.
func (t *Transport) refuse(req *http.Request, key string, err error) error {
	if len(t.observers) > 0 {
		o := classify.Permanent
		if errors.Is(err, context.Canceled) {
			o = classify.Canceled
		}
		t.observers.Observe(req.Context(), &telemetry.Event{
			Time:    time.Now(),
			Host:    key,
			Method:  req.Method,
			URL:     t.cfg.Redactor.RedactURL(req.URL),
			Attempt: 1,
			Final:   true,
			Outcome: o,
			Unsent:  unsentReason(err),
			Err:     t.cfg.Redactor.RedactError(err),
		})
	}
	return unsent(req, err)
}

// suspectedBlock turns the attempt that made the block detector flag its
// host into a refusal: the host is halted through the Store like any
// refusal, and the caller's response reads as Refused (Halted).
func suspectedBlock(r classify.Result, resp *http.Response) (classify.Result, *http.Response) {
	r.Outcome, r.Reason = classify.Refused, "suspected block"
	if resp != nil {
		classifyHooks.Attach(resp, r)
	}
	return r, resp
}

func (t *Transport) escalate(key string, req *http.Request, head []byte, r classify.Result, at time.Time, suspected *blockwatch.Evidence) {
	if t.cfg.Audit != nil {
		auditrec.Escalation(t.cfg.Audit, key, r)
	}
	e := Escalation{
		Host:    key,
		URL:     t.cfg.Redactor.RedactURL(req.URL),
		Status:  r.Status,
		Markers: append([]string(nil), r.Markers...),
		Reason:  r.Reason,
		Time:    at,

		Suspected: suspected,
	}
	if len(head) > 0 { // redacted like the halt record's copy (putHalt)
		e.BodyHead = []byte(t.cfg.Redactor.RedactString(string(head)))
	}
	t.cfg.OnEscalate(e)
}

// putHalt writes the evidence of a halt to the Store's HaltLog, for the
// operator who will judge it: the URL and the body's head redacted, and
// no header. A failure to write it does not undo the halt.
func (t *Transport) putHalt(ctx context.Context, key string, req *http.Request, r classify.Result, at time.Time, head []byte, suspected *blockwatch.Evidence) {
	h := hoststate.Halt{
		Host:     key,
		Time:     at,
		Worker:   worker,
		Status:   r.Status,
		Reason:   r.Reason,
		Markers:  r.Markers,
		URL:      t.cfg.Redactor.RedactURL(req.URL),
		BodyHead: t.cfg.Redactor.RedactString(string(head)),
	}
	if suspected != nil {
		h.Evidence = suspected.Reason
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), haltLogTimeout)
	defer cancel()
	t.state.PutHalt(ctx, h)
}

// haltLogTimeout bounds the write of a halt's record.
const haltLogTimeout = 2 * time.Second

// worker names this process in halt records: its host name and pid.
var worker = func() string {
	name, err := os.Hostname()
	if err != nil {
		name = "unknown"
	}
	return name + ":" + strconv.Itoa(os.Getpid())
}()

type pendingKey struct{}

// pending holds the last attempt event of one request until it is known
// whether another attempt follows.
type pending struct {
	mu sync.Mutex // guards e
	e  *telemetry.Event
}

// observers are the chain's observers (Config.Observers, then
// Config.Audit), each handed every event in turn.
type observers []telemetry.Observer

// Observe passes e to each observer in turn.
func (os observers) Observe(ctx context.Context, e *telemetry.Event) {
	for _, o := range os {
		o.Observe(ctx, e)
	}
}

func (p *pending) push(ctx context.Context, o observers, e *telemetry.Event) {
	if prev := p.swap(e); prev != nil {
		o.Observe(ctx, prev)
	}
}

// advance delivers the held event, not final: an attempt after it was
// sent, whose own event is delivered on its own.
func (p *pending) advance(ctx context.Context, o observers) {
	p.push(ctx, o, nil)
}

func (p *pending) flush(ctx context.Context, o observers) {
	if e := p.swap(nil); e != nil {
		e.Final = true
		o.Observe(ctx, e)
	}
}

// swap holds e in place of the held event, which it returns.
func (p *pending) swap(e *telemetry.Event) *telemetry.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.e
	p.e = e
	return prev
}
