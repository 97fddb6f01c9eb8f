package classify

import (
	"io"
	"net/http"
	"slices"
	"sync/atomic"
)

// lazy is the state of a response whose Result is pending: a 2xx answer
// with an identity-encoded body that a transport returned without reading
// (see Classify). Its head is read on the first Read or WriteTo of its
// body, in the caller's goroutine and without a time bound (the caller is
// reading: a wait there is its own), and judged by the same rules as an
// eager peek. Of, Head and reattach settle it earlier: Of and Head with the
// time-bounded peek of an eager response, reattach with the Result given.
// Close before any read settles it on the status and headers alone; so
// does a first read (or Of) after the request's context ended.
//
// Whoever settles runs the hooks registered with onSettle, on its own
// goroutine, holding no lock, before the body hands out a byte.
type lazy struct {
	c     *classifier
	resp  *http.Response // status and header
	kind  bodyKind       // from the Content-Type; kindUnknown is sniffed from the head
	state lazyState      // guarded by peek.mu; declared here so that a lazyOutcome fits its size class
	// hooking is set, guarded by peek.mu, while the goroutine that settled
	// the Result runs the hooks: the body hands out no byte until they
	// return (see awaitHooksLocked).
	hooking bool
	done    atomic.Bool // state == lazySettled and no hook is running; lets Read skip the lock

	// Guarded by peek.mu. The Result, once settled, is outcome.r.
	fn  func(Result)   // the first hook not yet run
	fns []func(Result) // further hooks
}

type lazyState uint8

const (
	lazyUnread  lazyState = iota // no read of the head has started
	lazyReading                  // a read of the head is in flight (peek.reading) or done, not yet judged
	lazySettled                  // outcome.r is final
)

// lazyOutcome allocates the outcome, body, peek and lazy state of a
// pending response together. Its head is read into peek (n bytes: the
// classifier's OKPeekSize), its Result kept in outcome.r, and the
// request's context is outcome.Context.
type lazyOutcome struct {
	outcome
	body
	peek
	lazy
}

// defers reports whether the Result of a response with this status and
// encoding, whose body classify would inspect, is settled as its body is
// read: a 2xx answer judged on its first okPeek bytes, with an identity
// encoding.
func (c *classifier) defers(status int, enc encoding) bool {
	return enc == encIdentity && status >= 200 && status <= 299 && !slices.Contains(c.fullOK, status)
}

// deferResponse installs the lazy body and the pending outcome of resp, the
// response to req (a request to attach to; see attach). pre, when not nil,
// is the outcome made before the attempt was sent (see roundTripConn).
func (c *classifier) deferResponse(req *http.Request, resp *http.Response, kind bodyKind, pre *lazyOutcome) {
	lo := pre
	if lo == nil {
		lo = &lazyOutcome{}
	}
	lo.body.rc, lo.body.p, lo.body.lz = resp.Body, &lo.peek, lo
	lo.peek.pool = &c.heads
	lo.lazy.c, lo.lazy.resp, lo.lazy.kind = c, resp, kind
	lo.outcome.lz = lo
	resp.Body = &lo.body
	attach(resp, req, &lo.outcome)
}

// ctxEnded reports whether the request's context has ended.
func (lo *lazyOutcome) ctxEnded() bool { return lo.outcome.Context.Err() != nil }

// startLocked starts a read of the head: it takes a pooled buffer and
// marks the read in flight. peek.mu must be held and the state unread.
func (lo *lazyOutcome) startLocked() (buf []byte) {
	pk := &lo.peek
	bp := lo.c.heads.Get().(*[]byte)
	pk.buf = bp
	buf = (*bp)[:lo.c.okPeek]
	pk.head = buf[:0]
	pk.reading = true
	lo.state = lazyReading
	return buf
}

// readHead is the first Read or WriteTo of the body: it reads the head in
// the caller's goroutine, without a time bound, and settles the Result. If
// another goroutine's read of the head is in flight (Of settling it), it
// waits for that read and settles on it. If another goroutine settled the
// Result, it waits until that goroutine's hooks have returned.
func (lo *lazyOutcome) readHead() {
	pk := &lo.peek
	pk.mu.Lock()
	switch lo.state {
	case lazySettled:
		lo.awaitHooksLocked() // unlocks
		return
	case lazyReading:
		if pk.reading {
			done := pk.endedLocked()
			pk.mu.Unlock()
			<-done
		} else {
			pk.mu.Unlock()
		}
	default:
		if lo.ctxEnded() {
			lo.settleUnreadLocked(false) // unlocks
			return
		}
		buf := lo.startLocked()
		pk.mu.Unlock()
		pk.read(lo.body.rc, buf)
	}
	lo.settle(false, false)
	pk.mu.Lock()
	lo.awaitHooksLocked() // another goroutine may have settled it meanwhile
}

// awaitHooksLocked waits until no goroutine runs the hooks of a settled
// Result (see finishLocked). peek.mu must be held; it is released. The
// hooks of a settle made by this goroutine have returned already, so it
// waits only for another goroutine's.
func (lo *lazyOutcome) awaitHooksLocked() {
	pk := &lo.peek
	for lo.hooking {
		ch := pk.endedLocked()
		pk.mu.Unlock()
		<-ch
		pk.mu.Lock()
	}
	pk.mu.Unlock()
}

// hooksRan ends the hooks' run that finishLocked began, and wakes the
// readers waiting for it.
func (lo *lazyOutcome) hooksRan() {
	pk := &lo.peek
	pk.mu.Lock()
	lo.hooking = false
	lo.done.Store(true)
	var ch chan struct{}
	if !pk.reading { // else the read in flight closes pk.ended, and its waiters look again
		ch, pk.ended = pk.ended, nil
	}
	pk.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// settleUnreadLocked settles, on its status and headers alone, a Result
// whose head no read has begun while the request's context has ended: the
// answer came in time, and a caller that reads it late (or asks Of late)
// is not the host's failure. peek.mu must be held; it is released before
// the hooks run. hold is as for finishLocked.
func (lo *lazyOutcome) settleUnreadLocked(hold bool) {
	r, h := lo.closeLocked(hold)
	lo.peek.mu.Unlock()
	h.run(r)
}

// settle judges the head read so far, unless the Result is settled
// already, and runs the hooks. cut reports that the time budget of Of cut
// the read. hold is as for finishLocked: the body's reader, settling in
// its own Read, has no other reader to hold.
func (lo *lazyOutcome) settle(cut, hold bool) {
	pk := &lo.peek
	pk.mu.Lock()
	if lo.state == lazySettled {
		pk.mu.Unlock()
		return
	}
	head, err := pk.head, pk.err
	if len(head) == 0 {
		head = nil
		if !pk.reading {
			pk.head = nil
			pk.releaseLocked()
		}
	}
	var (
		peekErr  error
		ctxEnded bool
	)
	if err != nil && err != io.EOF && !pk.closed { // a read failing after Close is no fault of the host
		peekErr = err
		ctxEnded = lo.ctxEnded()
	}
	kind := lo.kind
	if kind == kindUnknown && head != nil {
		kind = sniffKind(head)
	}
	// The head stays under the lock while it is judged: a concurrent Close
	// would give its buffer back to the pool.
	r := lo.c.decide(lo.outcome.Context, lo.resp, head, kind, peekErr, ctxEnded)
	r.PeekCut = cut
	h := lo.finishLocked(r, hold)
	pk.mu.Unlock()
	h.run(r)
}

// closeLocked settles a Result that no read has begun to judge on the
// status and headers alone, as Close does; peek.mu must be held. It returns
// the Result and the hooks to run once the lock is released (none, and the
// zero Result, when a read had begun or the Result was settled). hold is
// as for finishLocked.
func (lo *lazyOutcome) closeLocked(hold bool) (Result, hooks) {
	if lo.state != lazyUnread {
		return Result{}, hooks{}
	}
	r := lo.c.decide(lo.outcome.Context, lo.resp, nil, lo.kind, nil, false)
	return r, lo.finishLocked(r, hold)
}

// finishLocked makes r the Result and returns the hooks to run, which it
// forgets; peek.mu must be held. With hold, the body hands out no byte
// until the hooks have run (see awaitHooksLocked): a goroutine other than
// the body's reader settles. The reader's own first Read, which runs the
// hooks before it returns, and Close, after which the body hands out
// nothing, do not hold it.
func (lo *lazyOutcome) finishLocked(r Result, hold bool) hooks {
	lo.state, lo.outcome.r = lazySettled, r
	h := hooks{fn: lo.fn, more: lo.fns}
	lo.fn, lo.fns = nil, nil
	if hold && h.fn != nil {
		lo.hooking, h.lo = true, lo
	} else {
		lo.done.Store(true)
	}
	return h
}

// hooks are the functions onSettle kept, in the order they were added.
type hooks struct {
	fn   func(Result) // the first; nil when none
	more []func(Result)
	lo   *lazyOutcome // whose readers wait for the hooks; nil when none waits
}

// run runs the hooks with r.
func (h hooks) run(r Result) {
	if h.fn == nil {
		return
	}
	if h.lo != nil {
		defer h.lo.hooksRan() // a hook that panics must not hold the readers
	}
	h.fn(r)
	for _, fn := range h.more {
		fn(r)
	}
}

// result returns the Result, settling it first if it is pending: with the
// eager peek's time budget (PeekTimeout from now, and the request's
// context), on a read of its own or on one already in flight.
func (lo *lazyOutcome) result() Result {
	pk := &lo.peek
	pk.mu.Lock()
	var done chan struct{}
	switch lo.state {
	case lazySettled:
		r := lo.outcome.r
		pk.mu.Unlock()
		return r
	case lazyReading:
		if pk.reading {
			done = pk.endedLocked()
		}
		pk.mu.Unlock()
	default:
		if lo.ctxEnded() {
			lo.settleUnreadLocked(true) // unlocks
			return lo.settledResult()
		}
		buf := lo.startLocked()
		done = pk.endedLocked()
		pk.mu.Unlock()
		go pk.read(lo.body.rc, buf)
	}
	cut := false
	if done != nil {
		cut = pk.wait(lo.outcome.Context, lo.body.rc, done, lo.c.peekTimeout, &lo.c.timers)
	}
	lo.settle(cut, true)
	return lo.settledResult()
}

// settledResult returns the Result once settled.
func (lo *lazyOutcome) settledResult() Result {
	pk := &lo.peek
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return lo.outcome.r
}

// onSettle is onSettle for a lazy Result.
func (lo *lazyOutcome) onSettle(fn func(Result)) (Result, bool) {
	pk := &lo.peek
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if lo.state == lazySettled {
		return lo.outcome.r, true
	}
	switch {
	case fn == nil:
	case lo.fn == nil:
		lo.fn = fn
	default:
		lo.fns = append(lo.fns, fn)
	}
	return Result{}, false
}

// attach makes r the Result: in place when it is settled, else settling it
// with r, so that the body is handed out without being judged.
func (lo *lazyOutcome) attach(r Result) {
	pk := &lo.peek
	pk.mu.Lock()
	if lo.state == lazySettled {
		lo.outcome.r = r
		pk.mu.Unlock()
		return
	}
	h := lo.finishLocked(r, true)
	pk.mu.Unlock()
	h.run(r)
}

// head returns a copy of up to n bytes of the head not yet handed out,
// settling the Result first as result does.
func (lo *lazyOutcome) head(n int) []byte {
	lo.result()
	pk := &lo.peek
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if len(pk.head) == 0 {
		return nil
	}
	return slices.Clone(pk.head[:min(n, len(pk.head))])
}

// onSettle reports the Result of resp (see Of) without settling it. When
// it is settled (every Result but that of a 2xx answer a transport
// returned before reading its body), onSettle returns it and true, and
// does not keep fn. When it is pending, onSettle returns false and, unless
// fn is nil, keeps fn to run once with the Result when it settles: on the
// goroutine that settles it, holding no lock, before any byte of the body
// is handed out. That is the goroutine of the body's first Read or
// WriteTo; or of Of, Head (a classifier's) or reattach, when one of them is
// called first; or of Close, when the body is closed unread. fn may call
// Of, Head and reattach on resp, but must not read its body: the body's
// first Read waits for the hooks. Hooks run in the order they were added.
//
// A layer that must not make a response wait for its body (a retry
// decision, a metric) reads the Result with onSettle instead of Of. A
// pending Result is that of a 2xx answer: OK or Refused (a challenge page)
// once read, or Transient or Canceled when reading its head fails, which
// the reader of the body sees itself.
func onSettle(resp *http.Response, fn func(Result)) (Result, bool) {
	if resp != nil {
		if o := outcomeOf(resp); o != nil && o.lz != nil {
			return o.lz.onSettle(fn)
		}
	}
	return Of(resp, nil), true
}
