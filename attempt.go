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
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/robots"
	"github.com/egresskit/egresskit/telemetry"
)

// gatedSender is the per-attempt layer under retry: it admits the attempt
// (halt, breaker, token), waits, sends it through egress and classify, and
// feeds the one Result back into the host's state and to the observers.
type gatedSender struct {
	t *Transport
}

// noResume is the resume function of a timer that is not held.
func noResume() {}

// stateTimeout bounds a Record made after the caller's context ended, so
// that the outcome of a sent attempt is never lost to a cancellation.
const stateTimeout = 2 * time.Second

var _ firstsend.Sender = (*gatedSender)(nil)

// RoundTrip sends an attempt whose context is the retry layer's.
func (a *gatedSender) RoundTrip(req *http.Request) (*http.Response, error) {
	// Transport.RoundTrip derived the key once for all the attempts.
	key, ok := firstsend.KeyFrom(req.Context())
	if !ok {
		var err error
		if key, err = hostkey.Of(req.URL, a.t.cfg.HostKey); err != nil {
			return nil, unsent(req, err)
		}
	}
	return a.send(req, key, false)
}

// SendFirst sends a request's first attempt, which the retry layer hands
// over with the caller's request as it is when the attempt needs no
// context of its own (no attempt timeout): the key Transport.RoundTrip
// derived comes with it, and the attempt is the first, with no attempt
// timer to hold.
func (a *gatedSender) SendFirst(at firstsend.Attempt) (*http.Response, error) {
	key := at.Key
	if key == "" {
		var err error
		if key, err = hostkey.Of(at.Req.URL, a.t.cfg.HostKey); err != nil {
			return nil, unsent(at.Req, err)
		}
	}
	return a.send(at.Req, key, true)
}

// send sends the attempt req to the host whose key is key. first is set
// for a first attempt whose context is the caller's (SendFirst); else the
// context is the retry layer's attempt context.
func (a *gatedSender) send(req *http.Request, key string, first bool) (*http.Response, error) {
	t := a.t
	ctx := req.Context()
	attempt := 1
	if !first {
		attempt = max(retrier.AttemptFrom(ctx), 1)
	}
	// The clock is read for the events only when someone observes them;
	// sent is known always (the block detector keeps it).
	observed := len(t.observers) > 0
	var start time.Time
	if observed {
		start = time.Now()
	}
	limit := t.waitLimit()
	adm, err := t.admit(ctx, key, limit)
	if err != nil {
		var wait time.Duration // the wait refused for passing the bound or the deadline
		if we, ok := errors.AsType[*ratelimit.WaitError](err); ok {
			wait = we.RetryAfter
		}
		err = notSent(err)
		a.observe(ctx, req, key, attempt, start, wait, 0, classify.Of(nil, err), nil, nil, err, unsentReason(err), false)
		return nil, unsent(req, err)
	}
	var pacedAt float64 // the host's rate, per minute, when the attempt was paced
	if adm.Wait > 0 {
		resume := noResume
		if !first {
			resume = firstsend.HoldAttemptTimer(ctx)
		}
		var held bool
		adm, pacedAt, held, err = t.settle(ctx, key, adm, limit)
		resume()
		if err != nil {
			err = notSent(err)
			r := classify.Of(nil, err)
			var eff *hoststate.Effect
			if held {
				// Freeing an unsent admission: a failure leaves a probe
				// slot to its lease, and the store reports it (see record).
				e, _ := t.record(ctx, key, adm, classify.Result{Outcome: classify.Canceled, Reason: r.Reason})
				eff = &e
			}
			a.observe(ctx, req, key, attempt, start, adm.Wait, 0, r, eff, nil, err, unsentReason(err), false)
			return nil, unsent(req, err)
		}
	}
	if t.crawl != nil {
		if err := t.crawlWait(ctx, first); err != nil {
			r := classify.Of(nil, err)
			eff, _ := t.record(ctx, key, adm, classify.Result{Outcome: classify.Canceled, Reason: r.Reason}) // as above
			a.observe(ctx, req, key, attempt, start, adm.Wait, 0, r, &eff, nil, err, unsentReason(err), false)
			return nil, unsent(req, err)
		}
	}
	slotDone, slotWaited := noResume, false
	if t.inflight != nil {
		if slotDone, slotWaited, err = t.slotWait(ctx, key, adm.PerMinute, first); err != nil {
			r := classify.Of(nil, err)
			eff, _ := t.record(ctx, key, adm, classify.Result{Outcome: classify.Canceled, Reason: r.Reason}) // as above
			a.observe(ctx, req, key, attempt, start, adm.Wait, 0, r, &eff, nil, err, unsentReason(err), false)
			return nil, unsent(req, err)
		}
		if slotWaited {
			// The slot came when another attempt ended, however long
			// after its pacing: space it at the host's rate as of now
			// (for a host paced faster than spacingMatters, whose
			// spacing is under a millisecond, the admission's rate
			// serves, without a round trip to the store).
			if adm.PerMinute > spacingMatters {
				pacedAt = adm.PerMinute
			} else if st, err := t.state.Status(ctx, key); err == nil {
				pacedAt = st.PerMinute
				t.inflight.SetRate(key, st.PerMinute)
			}
		}
	}
	if pacedAt > 0 {
		// Apart from this process's previous paced send to the host,
		// whatever the timers and the in-flight slots let through
		// together (see spacing).
		if err := t.spaceOut(ctx, key, pacedAt, first); err != nil {
			slotDone()
			r := classify.Of(nil, err)
			eff, _ := t.record(ctx, key, adm, classify.Result{Outcome: classify.Canceled, Reason: r.Reason}) // as above
			a.observe(ctx, req, key, attempt, start, adm.Wait, 0, r, &eff, nil, err, unsentReason(err), false)
			return nil, unsent(req, err)
		}
	}
	var choice *egress.Choice
	if t.cfg.Egress != nil && (len(t.observers) > 0 || t.cfg.Audit != nil) {
		choice = new(egress.Choice)
		req = req.WithContext(egress.WithRecorder(ctx, choice))
	}
	// An admission without a wait (pacing or in-flight slot) was granted
	// just now: the clock the store read for it stands for the time the
	// attempt is sent.
	sent := adm.At
	if adm.Wait > 0 || sent.IsZero() || slotWaited {
		sent = time.Now()
	}
	id, err := t.ids.of(userAgent(req.Header)) // set by Transport.RoundTrip
	if err != nil {
		// Unreachable: Transport.RoundTrip made this identity. Give the
		// admission back and send nothing.
		slotDone()
		t.record(ctx, key, adm, classify.Result{Outcome: classify.Canceled, Reason: "not sent"})
		return nil, unsent(req, err)
	}
	// The attempt's connection, for counting a connection's failure once.
	resp, conn, err := id.classify.RoundTripConn(req) // classify over egress or base
	took := time.Since(sent)                          // time to headers: the host's latency
	if t.inflight != nil {
		t.slotEnd(key, slotDone, resp, err, took)
	}
	end := attemptEnd{a: a, ctx: ctx, req: req, key: key, attempt: attempt, id: id, adm: adm, sent: sent, took: took, choice: choice, resp: resp, err: err}
	end.conn = conn
	var r classify.Result
	if err != nil {
		r = classify.Of(nil, err)
	} else {
		var settled bool
		// A pending Result (a 2xx page judged as it is read) stays
		// pending until the caller reads the body: no one else holds resp
		// yet, so it is still pending when the hook is added.
		if r, settled = classifyHooks.OnSettle(resp, nil); !settled {
			if r, settled = end.deferred(); !settled {
				return resp, nil
			}
		}
	}
	end.settled(r)
	if end.shared {
		// The retry layer spends no retry budget on it: the host's
		// failure was counted with the connection's first.
		err = &sharedConnError{err}
	}
	return resp, err
}

// attemptEnd is what an attempt that was sent feeds its Result to, once
// the Result is settled: at once for an error and for most responses, or,
// for a 2xx answer whose page the classifier judges as the caller reads it,
// when it settles, after RoundTrip returned.
type attemptEnd struct {
	a       *gatedSender
	ctx     context.Context
	req     *http.Request
	key     string
	attempt int // 1-based
	id      *identity
	adm     hoststate.Admission
	sent    time.Time
	took    time.Duration
	choice  *egress.Choice
	resp    *http.Response
	err     error
	conn    any  // the connection of a failed attempt, when one was used
	shared  bool // failed with a connection whose failure was counted already
	late    bool // settled after RoundTrip returned
}

// deferred has the pending Result of e.resp fed to a copy of e when it
// settles, and reports false; or returns the Result and true if it was
// settled meanwhile. A pending attempt is the request's last (the retry
// layer does not retry it), so the event of the attempt before it is
// delivered now, and its own, Final, when it settles.
func (e attemptEnd) deferred() (classify.Result, bool) {
	t := e.a.t
	if len(t.observers) > 0 { // a request has a pending event only then
		if p, ok := e.ctx.Value(pendingKey{}).(*pending); ok {
			p.advance(e.ctx, t.observers)
		}
	}
	late := lateEnds.Get().(*lateEnd)
	late.e = e
	late.e.late = true
	r, settled := classifyHooks.OnSettle(e.resp, late.hook)
	if settled { // the hook is not kept
		late.release()
	}
	return r, settled
}

// lateEnd is the copy of an attemptEnd that a pending Result is fed to
// when it settles. They are pooled, each with its hook bound once, so that
// a 2xx page judged as it is read costs no allocation for its hook: the
// hook runs once (settle.Hooks.OnSettle), and the lateEnd is reused after.
type lateEnd struct {
	e    attemptEnd
	hook func(classify.Result) // settle, bound to this lateEnd
}

// lateEnds holds the lateEnds not in use. New is set by init: a
// lateEnd's hook puts it back.
var lateEnds sync.Pool

func init() {
	lateEnds.New = func() any {
		l := new(lateEnd)
		l.hook = l.settle
		return l
	}
}

func (l *lateEnd) settle(r classify.Result) {
	l.e.settled(r)
	l.release()
}

// release forgets the attempt, whose response and request must not be
// kept alive by the pool, and returns l to the pool.
func (l *lateEnd) release() {
	l.e = attemptEnd{}
	lateEnds.Put(l)
}

// settled feeds the attempt's Result r to the block detector, the host's
// state, the audit log, the escalation hook and the observers.
func (e *attemptEnd) settled(r classify.Result) {
	t := e.a.t
	suspected := t.watch.Observe(e.key, e.req.URL, r, e.sent)
	if suspected != nil {
		r, _ = suspectedBlock(r, e.resp)
	}
	if e.resp != nil {
		r.Latency = e.took
	}
	counted, shared := t.connFails.countable(r, e.err, e.conn)
	e.shared = shared
	eff, err := t.record(e.ctx, e.key, e.adm, counted)
	if err != nil && r.Outcome == classify.Refused && !eff.Halted {
		// The store lost the halt: keep it in this Transport.
		eff.Halted = t.holds.hold(e.key, e.sent)
	}
	if err == nil {
		err = e.err
	} else if e.err != nil {
		err = errors.Join(e.err, err)
	}
	if eff.Halted {
		if t.cfg.Audit != nil {
			auditrec.Halt(t.cfg.Audit, e.key, r)
		}
		var head []byte
		if e.resp != nil {
			// What the classifier read, or at most its peek's time budget
			// more: a stalled body must not hold RoundTrip. For a 2xx page
			// judged as it is read, the head that judgement read.
			head = e.id.classify.Head(e.req.Context(), e.resp, 1024)
		}
		t.putHalt(e.ctx, e.key, e.req, r, e.sent, head, suspected)
		if t.cfg.OnEscalate != nil {
			t.escalate(e.key, e.req, head, r, e.sent, suspected)
		}
	}
	if t.cfg.Audit != nil && e.choice != nil && e.choice.Reason == "forced" {
		auditrec.ForcedEgress(t.cfg.Audit, e.key, e.choice.EndpointID, e.choice.Reason)
	}
	e.a.observe(e.ctx, e.req, e.key, e.attempt, e.sent, e.adm.Wait, e.took, r, &eff, e.choice, err, "", e.late)
}

// readmitted is how an admission taken before a pause, or whose slot
// passed, is handed back.
var readmitted = classify.Result{Outcome: classify.Canceled, Reason: "re-admitted"}

// minSlack is the least lateness that makes an attempt miss its slot.
const minSlack = 20 * time.Millisecond

// slotSlack is how late an attempt may go out in its pacing slot: half an
// interval at perMinute, and at least minSlack.
func slotSlack(perMinute float64) time.Duration {
	if !(perMinute > 0) {
		return time.Duration(1<<63 - 1)
	}
	return max(time.Duration(30/perMinute*float64(time.Second)), minSlack)
}

// settle waits out an admission's pacing wait, then checks the host again:
// while this attempt waited, another may have halted the host, opened its
// breaker or throttled it. A halted or open host is not sent to. When a
// throttle paused the host meanwhile (its epoch moved past the
// admission's), the admission was reckoned at the old rate and is not
// honoured: it is recorded as Canceled and taken again, so that the
// attempts waiting when a pause ends go out one pacing interval apart at
// the new rate, never together. So is an admission whose slot passed
// while this process could not run (its timer fired more than half an
// interval, and at least minSlack, late): sent late, it would go out
// together with the next slot's; this is done once per attempt, so that a
// machine too busy to keep any slot cannot hold an attempt back for long.
// The wait honours ctx and ends early with its error; a wait that would
// end after limit (Config.MaxWait from the attempt's admission; zero: no
// bound) or after ctx's deadline is not begun: it ends at once with a
// *ratelimit.WaitError.
//
// settle returns the admission to send with and the host's pacing rate
// (0 when the state is unavailable). held reports whether that
// admission is still to be recorded (false only when taking it again
// failed); on an error the caller records a held admission as Canceled.
func (t *Transport) settle(ctx context.Context, key string, adm hoststate.Admission, limit time.Time) (_ hoststate.Admission, perMinute float64, held bool, _ error) {
	wait := adm.Wait
	lateOnce := true // an admission may be taken again once for lateness
	first := true    // the store checked the first wait against both bounds
	for {
		if !first {
			now := time.Now()
			if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < wait {
				return adm, 0, true, &ratelimit.WaitError{Host: key, RetryAfter: wait, Until: now.Add(wait)}
			}
			if !limit.IsZero() && limit.Sub(now) < wait {
				return adm, 0, true, &ratelimit.WaitError{Host: key, RetryAfter: wait, Until: now.Add(wait), Bound: t.maxWait}
			}
		}
		first = false
		due := time.Now().Add(wait)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return adm, 0, true, ctx.Err()
		case <-timer.C:
		}
		late := time.Since(due)
		st, err := t.state.Status(ctx, key)
		if err != nil {
			return adm, 0, true, nil // the state is unavailable: the admission stands
		}
		switch {
		case st.Halted:
			return adm, 0, true, &breaker.HaltError{Host: key, HaltedAt: st.HaltedAt}
		case st.Breaker == breaker.Open && !adm.Probe:
			return adm, 0, true, &breaker.OpenError{Host: key, Until: st.OpenUntil}
		case st.Epoch != adm.Epoch || (lateOnce && late > slotSlack(st.PerMinute)):
			lateOnce = lateOnce && st.Epoch != adm.Epoch
			t.record(ctx, key, adm, readmitted)
			next, err := t.admit(ctx, key, limit)
			if err != nil {
				return adm, 0, false, err
			}
			adm, wait = next, next.Wait
		default:
			wait = time.Until(st.PausedUntil)
		}
		if wait <= 0 {
			return adm, st.PerMinute, true, nil
		}
	}
}

// defaultMaxWait is what a zero Config.MaxWait means.
const defaultMaxWait = 30 * time.Second

// waitLimit is the latest time an attempt admitted now may wait for its
// host until (Config.MaxWait), or the zero Time for no bound.
func (t *Transport) waitLimit() time.Time {
	if t.maxWait <= 0 {
		return time.Time{}
	}
	return time.Now().Add(t.maxWait)
}

// admit asks the store for an admission to key that waits until limit at
// the latest (none when limit is zero) and not past ctx's deadline: a
// longer wait reserves nothing and returns a *ratelimit.WaitError at once
// (errors.Is ErrTryLater, and context.DeadlineExceeded when the deadline
// decided). The store is handed the earlier of the two as ctx's deadline,
// the bound stores already keep.
func (t *Transport) admit(ctx context.Context, key string, limit time.Time) (hoststate.Admission, error) {
	actx := ctx
	var bc *boundedCtx
	if !limit.IsZero() {
		if dl, ok := ctx.Deadline(); !ok || dl.After(limit) {
			bc = boundedCtxs.Get().(*boundedCtx)
			bc.Context, bc.at = ctx, limit
			actx = bc
		}
	}
	adm, err := t.state.Admit(actx, key)
	if bc != nil {
		// Drop the request's context; a store that broke the rule and
		// kept this one would find an expired, never nil, context.
		*bc = boundedCtx{Context: context.Background()}
		boundedCtxs.Put(bc)
	}
	if err != nil {
		if de, ok := errors.AsType[*ratelimit.DeadlineError](err); ok {
			if bc != nil && de.Wait <= t.maxWait {
				// The store reads deadlines on a clock of its own (a
				// fake one, Config.Now) that disagrees with ours: the
				// bound cannot be read there. Ask without it.
				return t.state.Admit(ctx, key)
			}
			we := &ratelimit.WaitError{Host: key, RetryAfter: de.Wait, Until: time.Now().Add(de.Wait)}
			if bc != nil { // the bound decided, not the caller's deadline
				we.Bound = t.maxWait
			}
			return adm, we
		}
	}
	return adm, err
}

// boundedCtx is a request's context with an earlier deadline, the
// chain's bound on a pacing wait, for the store's Admit to reserve
// nothing past it. Only its Deadline differs (it is not canceled at
// it): Admit reads the deadline to decide and returns; the context is
// not kept after Admit returns, so they are pooled, sparing an
// allocation per request.
type boundedCtx struct {
	context.Context
	at time.Time
}

// Deadline returns the bound.
func (c *boundedCtx) Deadline() (time.Time, bool) { return c.at, true }

// boundedCtxs holds the boundedCtxs not in use.
var boundedCtxs = sync.Pool{New: func() any { return new(boundedCtx) }}

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

// notSent wraps an admission error so that every layer above reads it as
// "not sent, do not retry": Canceled when the caller's context ended,
// Permanent otherwise (halted, open, a pacing wait past the bound or the
// deadline).
func notSent(err error) error {
	r := classify.Result{Outcome: classify.Permanent, Reason: "not admitted"}
	switch {
	case errors.Is(err, ErrHalted):
		r.Reason = "host halted"
	case errors.Is(err, ErrOpen):
		r.Reason = "breaker open"
	case errors.Is(err, context.Canceled):
		r = classify.Result{Outcome: classify.Canceled, Reason: "canceled"}
	case errors.Is(err, context.DeadlineExceeded):
		r.Reason = "pacing wait exceeds deadline"
	case errors.Is(err, ErrTryLater):
		r.Reason = "pacing wait exceeds MaxWait"
	}
	return &classify.Error{Result: r, Err: err}
}

// unsentReason is Event.Unsent for err, the error of a request or attempt
// the chain did not send.
func unsentReason(err error) string {
	switch {
	case errors.Is(err, ErrHalted):
		return "halted"
	case errors.Is(err, ErrOpen):
		return "open"
	case errors.Is(err, ErrDisallowed):
		return "disallowed"
	case errors.Is(err, ErrTryLater):
		// The reasons keep their names: robots.txt decided, or a pacing
		// wait passed a deadline, the request's or the chain's own
		// (Config.MaxWait).
		if _, ok := errors.AsType[*robots.DisallowedError](err); ok {
			return "disallowed"
		}
		return "deadline"
	case errors.Is(err, ErrOutOfScope):
		return "out_of_scope"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "error"
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

// observe builds the attempt's event when there is an observer. The event
// of attempt n is delivered when attempt n+1 is sent (not final) or when
// the request returns (final), so Final is exact without guessing the
// retry decision. An attempt whose Result settles after the request
// returned (late) is the request's last: its event is delivered Final when
// it settles. eff is what recording the attempt did to the host's state,
// nil when nothing was recorded; unsent is the reason an attempt was not
// sent (unsentReason), "" for one sent.
func (a *gatedSender) observe(ctx context.Context, req *http.Request, key string, attempt int, start time.Time, wait, took time.Duration,
	r classify.Result, eff *hoststate.Effect, choice *egress.Choice, err error, unsent string, late bool) {
	t := a.t
	if len(t.observers) == 0 {
		return
	}
	e := &telemetry.Event{
		Time:     start,
		Host:     key,
		Method:   req.Method,
		URL:      t.cfg.Redactor.RedactURL(req.URL),
		Attempt:  attempt,
		Status:   r.Status,
		Outcome:  r.Outcome,
		Markers:  r.Markers,
		Wait:     wait,
		Duration: took,
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
	if choice != nil {
		e.Egress, e.EgressReason, e.EgressRule = choice.EndpointID, choice.Reason, choice.Rule
	}
	if err != nil {
		e.Err = t.cfg.Redactor.RedactError(err)
	}
	if p, ok := ctx.Value(pendingKey{}).(*pending); ok && !late {
		p.push(ctx, t.observers, e)
		return
	}
	e.Final = true
	t.observers.Observe(ctx, e)
}

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
