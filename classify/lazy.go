package classify

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
)

// lazy is the state of a response whose Result is pending: a 2xx answer
// with an identity-encoded body that a Transport returned without reading
// (see Classify). Its head is read on the first Read or WriteTo of its
// body, in the caller's goroutine and without a time bound (the caller is
// reading: a wait there is its own), and judged by the same rules as an
// eager peek. Of, Head and Attach settle it earlier: Of and Head with the
// time-bounded peek of an eager response, Attach with the Result given.
// Close before any read settles it on the status and headers alone; so
// does a first read (or Of) after the request's context ended.
//
// Whoever settles runs the hooks registered with OnSettle, on its own
// goroutine, holding no lock, before the body hands out a byte.
type lazy struct {
	c    *Classifier
	resp *http.Response  // status and header
	ctx  context.Context // the request's context; nil when unknown
	kind bodyKind        // from the Content-Type; kindUnknown is sniffed from the head
	n    int             // how many bytes of the head are judged
	b    *body           // the body whose peek holds the head

	done atomic.Bool // state == lazySettled; lets Read skip the lock

	// Guarded by b.p.mu.
	state lazyState
	r     Result         // the Result once settled
	fn    func(Result)   // the first hook not yet run
	fns   []func(Result) // further hooks
}

type lazyState uint8

const (
	lazyUnread  lazyState = iota // no read of the head has started
	lazyReading                  // a read of the head is in flight (b.p.pending)
	lazySettled                  // r is final
)

// lazyOutcome allocates the outcome, body, peek and lazy state of a
// pending response together.
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
func (c *Classifier) defers(status int, enc encoding) bool {
	return enc == encIdentity && status >= 200 && status <= 299 && !slices.Contains(c.fullOK, status)
}

// deferResponse installs the lazy body and the pending outcome of resp, the
// response to req (a request to attach to; see attach), whose context is
// ctx.
func (c *Classifier) deferResponse(ctx context.Context, req *http.Request, resp *http.Response, kind bodyKind) {
	lo := &lazyOutcome{}
	lo.body.rc, lo.body.p, lo.body.lz = resp.Body, &lo.peek, &lo.lazy
	lo.peek.pool = &c.heads
	lo.lazy.c, lo.lazy.resp, lo.lazy.ctx, lo.lazy.kind, lo.lazy.n, lo.lazy.b = c, resp, ctx, kind, c.okPeek, &lo.body
	lo.outcome.lz = &lo.lazy
	resp.Body = &lo.body
	attach(resp, req, &lo.outcome)
}

// startLocked starts a read of the head: it takes a pooled buffer and
// marks the read in flight. b.p.mu must be held and the state unread.
func (lz *lazy) startLocked() (buf []byte, done chan struct{}) {
	pk := lz.b.p
	bp := lz.c.heads.Get().(*[]byte)
	pk.buf = bp
	buf = (*bp)[:lz.n]
	pk.head = buf[:0]
	done = make(chan struct{})
	pk.pending = done
	lz.state = lazyReading
	return buf, done
}

// readHead is the first Read or WriteTo of the body: it reads the head in
// the caller's goroutine, without a time bound, and settles the Result. If
// another goroutine's read of the head is in flight (Of settling it), it
// waits for that read and settles on it.
func (lz *lazy) readHead() {
	pk := lz.b.p
	pk.mu.Lock()
	switch lz.state {
	case lazySettled:
		pk.mu.Unlock()
		return
	case lazyReading:
		done := pk.pending
		pk.mu.Unlock()
		if done != nil {
			<-done
		}
	default:
		if lz.ctx != nil && lz.ctx.Err() != nil {
			lz.settleUnreadLocked() // unlocks
			return
		}
		buf, done := lz.startLocked()
		pk.mu.Unlock()
		pk.read(lz.b.rc, buf, done)
	}
	lz.settle(false)
}

// settleUnreadLocked settles, on its status and headers alone, a Result
// whose head no read has begun while the request's context has ended: the
// answer came in time, and a caller that reads it late (or asks Of late)
// is not the host's failure. b.p.mu must be held; it is released before
// the hooks run.
func (lz *lazy) settleUnreadLocked() {
	r, h := lz.closeLocked()
	lz.b.p.mu.Unlock()
	h.run(r)
}

// settle judges the head read so far, unless the Result is settled
// already, and runs the hooks. cut reports that the time budget of Of cut
// the read.
func (lz *lazy) settle(cut bool) {
	pk := lz.b.p
	pk.mu.Lock()
	if lz.state == lazySettled {
		pk.mu.Unlock()
		return
	}
	head, err := pk.head, pk.err
	if len(head) == 0 {
		head = nil
		if pk.pending == nil {
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
		ctxEnded = lz.ctx != nil && lz.ctx.Err() != nil
	}
	kind := lz.kind
	if kind == kindUnknown && head != nil {
		kind = sniffKind(head)
	}
	// The head stays under the lock while it is judged: a concurrent Close
	// would give its buffer back to the pool.
	r := lz.c.decide(lz.ctx, lz.resp, head, kind, peekErr, ctxEnded)
	r.PeekCut = cut
	h := lz.finishLocked(r)
	pk.mu.Unlock()
	h.run(r)
}

// closeLocked settles a Result that no read has begun to judge on the
// status and headers alone, as Close does; b.p.mu must be held. It returns
// the Result and the hooks to run once the lock is released (none, and the
// zero Result, when a read had begun or the Result was settled).
func (lz *lazy) closeLocked() (Result, hooks) {
	if lz.state != lazyUnread {
		return Result{}, hooks{}
	}
	r := lz.c.decide(lz.ctx, lz.resp, nil, lz.kind, nil, false)
	return r, lz.finishLocked(r)
}

// finishLocked makes r the Result and returns the hooks to run, which it
// forgets; b.p.mu must be held.
func (lz *lazy) finishLocked(r Result) hooks {
	lz.state, lz.r = lazySettled, r
	lz.done.Store(true)
	h := hooks{lz.fn, lz.fns}
	lz.fn, lz.fns = nil, nil
	return h
}

// hooks are the functions OnSettle kept, in the order they were added.
type hooks struct {
	fn   func(Result) // the first; nil when none
	more []func(Result)
}

// run runs the hooks with r.
func (h hooks) run(r Result) {
	if h.fn == nil {
		return
	}
	h.fn(r)
	for _, fn := range h.more {
		fn(r)
	}
}

// result returns the Result, settling it first if it is pending: with the
// eager peek's time budget (PeekTimeout from now, and the request's
// context), on a read of its own or on one already in flight.
func (lz *lazy) result() Result {
	pk := lz.b.p
	pk.mu.Lock()
	var done chan struct{}
	switch lz.state {
	case lazySettled:
		r := lz.r
		pk.mu.Unlock()
		return r
	case lazyReading:
		done = pk.pending
		pk.mu.Unlock()
	default:
		if lz.ctx != nil && lz.ctx.Err() != nil {
			lz.settleUnreadLocked() // unlocks
			return lz.settledResult()
		}
		var buf []byte
		buf, done = lz.startLocked()
		pk.mu.Unlock()
		go pk.read(lz.b.rc, buf, done)
	}
	cut := false
	if done != nil {
		cut = pk.wait(lz.ctx, lz.b.rc, done, lz.c.peekTimeout, &lz.c.timers)
	}
	lz.settle(cut)
	return lz.settledResult()
}

// settledResult returns the Result once settled.
func (lz *lazy) settledResult() Result {
	pk := lz.b.p
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return lz.r
}

// onSettle is OnSettle for a lazy Result.
func (lz *lazy) onSettle(fn func(Result)) (Result, bool) {
	pk := lz.b.p
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if lz.state == lazySettled {
		return lz.r, true
	}
	switch {
	case fn == nil:
	case lz.fn == nil:
		lz.fn = fn
	default:
		lz.fns = append(lz.fns, fn)
	}
	return Result{}, false
}

// attach makes r the Result: in place when it is settled, else settling it
// with r, so that the body is handed out without being judged.
func (lz *lazy) attach(r Result) {
	pk := lz.b.p
	pk.mu.Lock()
	if lz.state == lazySettled {
		lz.r = r
		pk.mu.Unlock()
		return
	}
	h := lz.finishLocked(r)
	pk.mu.Unlock()
	h.run(r)
}

// head returns a copy of up to n bytes of the head not yet handed out,
// settling the Result first as result does.
func (lz *lazy) head(n int) []byte {
	lz.result()
	pk := lz.b.p
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if len(pk.head) == 0 {
		return nil
	}
	return slices.Clone(pk.head[:min(n, len(pk.head))])
}

// OnSettle reports the Result of resp (see Of) without settling it. When
// it is settled (every Result but that of a 2xx answer a Transport
// returned before reading its body), OnSettle returns it and true, and
// does not keep fn. When it is pending, OnSettle returns false and, unless
// fn is nil, keeps fn to run once with the Result when it settles: on the
// goroutine that settles it, holding no lock, before any byte of the body
// is handed out. That is the goroutine of the body's first Read or
// WriteTo; or of Of, Head (a Classifier's) or Attach, when one of them is
// called first; or of Close, when the body is closed unread. fn may call
// Of, Head and Attach on resp. Hooks run in the order they were added.
//
// A layer that must not make a response wait for its body (a retry
// decision, a metric) reads the Result with OnSettle instead of Of. A
// pending Result is that of a 2xx answer: OK or Refused (a challenge page)
// once read, or Transient or Canceled when reading its head fails, which
// the reader of the body sees itself.
func OnSettle(resp *http.Response, fn func(Result)) (Result, bool) {
	if resp != nil {
		if o := outcomeOf(resp); o != nil && o.lz != nil {
			return o.lz.onSettle(fn)
		}
	}
	return Of(resp, nil), true
}
