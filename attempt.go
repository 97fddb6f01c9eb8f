package egresskit

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/ratelimit"
)

// gatedSender is the per-attempt layer under retry: it admits the attempt
// (halt, breaker, token), waits, sends it through egress and classify, and
// feeds the one Result back into the host's state and to the observers.
type gatedSender struct {
	t *Transport
}

// noResume is the resume function of a timer that is not held.
func noResume() {}

var _ firstsend.Sender = (*gatedSender)(nil)

// RoundTrip sends an attempt whose context is the retry layer's.
func (g *gatedSender) RoundTrip(req *http.Request) (*http.Response, error) {
	// Transport.RoundTrip derived the key once for all the attempts.
	key, ok := firstsend.KeyFrom(req.Context())
	if !ok {
		var err error
		if key, err = hostkey.Of(req.URL, g.t.cfg.HostKey); err != nil {
			return nil, unsent(req, err)
		}
	}
	return g.send(req, key, false, time.Time{})
}

// SendFirst sends a request's first attempt, which the retry layer hands
// over with the caller's request as it is when the attempt needs no
// context of its own (no attempt timeout): the key Transport.RoundTrip
// derived comes with it, and the attempt is the first, with no attempt
// timer to hold; so does the time the retry layer read for it.
func (g *gatedSender) SendFirst(at firstsend.Attempt) (*http.Response, error) {
	key := at.Key
	if key == "" {
		var err error
		if key, err = hostkey.Of(at.Req.URL, g.t.cfg.HostKey); err != nil {
			return nil, unsent(at.Req, err)
		}
	}
	return g.send(at.Req, key, true, at.Now)
}

// attempt holds the facts of one attempt, from its admission to its
// event: each step of send reads the facts the steps before it set and
// adds its own. An attempt that was sent and whose Result settles after
// RoundTrip returned (a 2xx page judged as the caller reads it) is copied
// whole, and the copy is fed its Result (see deferred).
type attempt struct {
	t     *Transport
	ctx   context.Context // the attempt's: the caller's (first) or the retry layer's
	req   *http.Request   // as sent: with the egress recorder's context when there is one
	key   string          // the host's key
	n     int             // the attempt's number, 1-based
	first bool            // a first attempt on the caller's context: no attempt timer to hold
	start time.Time       // when the attempt began; zero until needed (observed, or a bound on its wait)

	adm     hoststate.Admission // the host's admission, held until it is recorded
	wait    time.Duration       // the pacing wait: the admission's, or the one refused
	pacedAt float64             // the host's rate, per minute, when the attempt was paced; 0 if it was not

	slotDone   func() // gives the in-flight slot back; nil without one
	slotWaited bool   // the slot came only when another attempt ended

	id     *identity      // the identity the attempt is sent and judged as
	choice *egress.Choice // the egress endpoint chosen, when someone reads it
	sent   time.Time      // when the attempt was sent
	took   time.Duration  // time to headers: the host's latency
	resp   *http.Response
	err    error // the transport's error
	conn   any   // the connection of a failed attempt, when one was used
	shared bool  // failed with a connection whose failure was counted already
	late   bool  // settled after RoundTrip returned
}

// send sends the attempt req to the host whose key is key, in the chain's
// steps: admit, take an in-flight slot, space from the previous paced
// send, send, judge the answer, record it and observe it. first is set for
// a first attempt whose context is the caller's (SendFirst); else the
// context is the retry layer's attempt context. now is when the attempt
// began, when the retry layer read the clock for it (the zero Time if it
// did not). A step that ends the attempt unsent returns its error with the
// request's body closed.
func (g *gatedSender) send(req *http.Request, key string, first bool, now time.Time) (*http.Response, error) {
	a := attempt{t: g.t, ctx: req.Context(), req: req, key: key, n: 1, first: first, start: now}
	if !first {
		a.n = max(retrier.AttemptFrom(a.ctx), 1)
	}
	if a.start.IsZero() && len(a.t.observers) > 0 {
		// The clock is read for the events only when someone observes
		// them; sent is known always (the block detector keeps it).
		a.start = time.Now()
	}
	if err := a.admit(); err != nil {
		return nil, err
	}
	if err := a.takeSlot(); err != nil {
		return nil, err
	}
	if err := a.space(); err != nil {
		return nil, err
	}
	if err := a.roundTrip(); err != nil {
		return nil, err
	}
	r, settled := a.judge()
	if !settled {
		return a.resp, nil // recorded and observed when it settles
	}
	a.settled(r)
	if a.shared {
		// The retry layer spends no retry budget on it: the host's
		// failure was counted with the connection's first.
		return a.resp, &sharedConnError{a.err}
	}
	return a.resp, a.err
}

// admit takes the host's admission for the attempt (halt, breaker,
// pacing), waits out its pacing wait (see settle), and then the crawl-wide
// cap's (Config.CrawlRate).
func (a *attempt) admit() error {
	t := a.t
	var limit time.Time // the latest a pacing wait may end (Config.MaxWait); zero: none
	if t.maxWait > 0 {
		if a.start.IsZero() {
			a.start = time.Now()
		}
		limit = a.start.Add(t.maxWait)
	}
	adm, err := t.admit(a.ctx, a.key, limit, a.start)
	if err != nil {
		if we, ok := errors.AsType[*ratelimit.WaitError](err); ok {
			a.wait = we.RetryAfter // refused for passing the bound or the deadline
		}
		return a.withdraw(notSent(err), false)
	}
	a.adm, a.wait = adm, adm.Wait
	if adm.Wait > 0 {
		resume := noResume
		if !a.first {
			resume = firstsend.HoldAttemptTimer(a.ctx)
		}
		var held bool
		a.adm, a.pacedAt, held, err = t.settle(a.ctx, a.key, adm, limit)
		resume()
		a.wait = a.adm.Wait
		if err != nil {
			return a.withdraw(notSent(err), held)
		}
	}
	if t.crawl != nil {
		if err := t.crawlWait(a.ctx, a.first); err != nil {
			return a.withdraw(err, true)
		}
	}
	return nil
}

// takeSlot takes one of the host's in-flight slots (Config.MaxInFlight).
// A slot that came only when another attempt ended, however long after
// the attempt's pacing, has the attempt spaced at the host's rate as of
// now.
func (a *attempt) takeSlot() error {
	t := a.t
	if t.inflight == nil {
		return nil
	}
	done, waited, err := t.slotWait(a.ctx, a.key, a.adm.PerMinute, a.adm.BaseLatency, a.first)
	if err != nil {
		return a.withdraw(err, true)
	}
	a.slotDone, a.slotWaited = done, waited
	if !waited {
		return nil
	}
	// For a host paced faster than spacingMatters, whose spacing is under
	// a millisecond, the admission's rate serves, without a round trip to
	// the store.
	if a.adm.PerMinute > spacingMatters {
		a.pacedAt = a.adm.PerMinute
	} else if st, err := t.state.Status(a.ctx, a.key); err == nil {
		a.pacedAt = st.PerMinute
		t.inflight.SetRate(a.key, st.PerMinute, a.adm.BaseLatency)
	}
	return nil
}

// space holds a paced attempt apart from this process's previous paced
// send to the host, whatever the timers and the in-flight slots let
// through together (see spacing).
func (a *attempt) space() error {
	if a.pacedAt > 0 {
		if err := a.t.spaceOut(a.ctx, a.key, a.pacedAt, a.first); err != nil {
			a.freeSlot()
			return a.withdraw(err, true)
		}
	}
	return nil
}

// roundTrip sends the attempt through the classifier of its identity, over
// egress or the base transport, and notes its answer, its connection and
// its time to headers, which ends its in-flight slot.
func (a *attempt) roundTrip() error {
	t := a.t
	if t.cfg.Egress != nil && (len(t.observers) > 0 || t.cfg.Audit != nil) {
		a.choice = new(egress.Choice)
		a.req = a.req.WithContext(egress.WithRecorder(a.ctx, a.choice))
	}
	// An admission without a wait (pacing or in-flight slot) was granted
	// just now: the clock the store read for it stands for the time the
	// attempt is sent.
	a.sent = a.adm.At
	if a.adm.Wait > 0 || a.sent.IsZero() || a.slotWaited {
		a.sent = time.Now()
	}
	id, err := t.ids.of(userAgent(a.req.Header)) // set by Transport.RoundTrip
	if err != nil {
		// Unreachable: Transport.RoundTrip made this identity. Give the
		// admission back and send nothing.
		a.freeSlot()
		t.record(a.ctx, a.key, a.adm, classify.Result{Outcome: classify.Canceled, Reason: "not sent"})
		return unsent(a.req, err)
	}
	a.id = id
	a.resp, a.conn, a.err = id.classify.RoundTripConn(a.req)
	a.took = time.Since(a.sent)
	if t.inflight != nil {
		t.slotEnd(a.key, a.slotDone, a.resp, a.err, a.took)
	}
	return nil
}

// judge returns the attempt's Result and true when it is settled: at once
// for an error and for most responses. A 2xx page the classifier judges as
// the caller reads it stays pending, and judge reports false: the Result
// is fed to a copy of the attempt when it settles (see deferred).
func (a *attempt) judge() (classify.Result, bool) {
	if a.err != nil {
		return classify.Of(nil, a.err), true
	}
	// No one else holds resp yet, so a pending Result is still pending
	// when deferred adds its hook.
	if r, settled := classifyHooks.OnSettle(a.resp, nil); settled {
		return r, true
	}
	return a.deferred()
}

// deferred has the pending Result of a.resp fed to a copy of a when it
// settles, and reports false; or returns the Result and true if it was
// settled meanwhile. A pending attempt is the request's last (the retry
// layer does not retry it), so the event of the attempt before it is
// delivered now, and its own, Final, when it settles.
func (a *attempt) deferred() (classify.Result, bool) {
	t := a.t
	if len(t.observers) > 0 { // a request has a pending event only then
		if p, ok := a.ctx.Value(pendingKey{}).(*pending); ok {
			p.advance(a.ctx, t.observers)
		}
	}
	late := lateEnds.Get().(*lateEnd)
	late.a = *a
	late.a.late = true
	r, settled := classifyHooks.OnSettle(a.resp, late.hook)
	if settled { // the hook is not kept
		late.release()
	}
	return r, settled
}

// withdraw ends an attempt that will not be sent, for err: it gives back
// the admission when one is held (recorded as Canceled), observes the
// attempt, and returns err with the request's body closed.
func (a *attempt) withdraw(err error, held bool) error {
	r := classify.Of(nil, err)
	var eff *hoststate.Effect
	if held {
		// Freeing an unsent admission: a failure leaves a probe slot to
		// its lease, and the store reports it (see Transport.record).
		e, _ := a.t.record(a.ctx, a.key, a.adm, classify.Result{Outcome: classify.Canceled, Reason: r.Reason})
		eff = &e
	}
	a.observe(r, eff, err, unsentReason(err))
	return unsent(a.req, err)
}

// freeSlot gives the attempt's in-flight slot back unused, if it holds one.
func (a *attempt) freeSlot() {
	if a.slotDone != nil {
		a.slotDone()
	}
}

// lateEnd is the copy of an attempt that a pending Result is fed to when
// it settles. They are pooled, each with its hook bound once, so that a
// 2xx page judged as it is read costs no allocation for its hook: the hook
// runs once (settle.Hooks.OnSettle), and the lateEnd is reused after.
type lateEnd struct {
	a    attempt
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
	l.a.settled(r)
	l.release()
}

// release forgets the attempt, whose response and request must not be
// kept alive by the pool, and returns l to the pool.
func (l *lateEnd) release() {
	l.a = attempt{}
	lateEnds.Put(l)
}
