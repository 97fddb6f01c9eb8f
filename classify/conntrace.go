package classify

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// The chain counts a connection's failure once (see egresskit's
// connfail.go), so it needs to know the connection each attempt was sent
// on: net/http tells an httptrace.ClientTrace's GotConn. The trace rides
// in the request's context, which takes a context value and a copy of the
// request per attempt; the classifier copies the attempt's request anyway,
// as resp.Request, with its outcome as the context. So roundTripConn makes
// that outcome (and the request copy in it) before the attempt is sent,
// sends the copy, and the outcome answers net/http's look-up of the trace
// itself: one allocation for the outcome, the copy and the trace, instead
// of three.

// connTrace learns the connection an attempt is sent on. They are pooled,
// each with its GotConn bound once: the transport calls GotConn before
// RoundTrip returns, after which the connection is read and the connTrace
// put back.
type connTrace struct {
	// mu guards conn, which GotConn may set on a goroutine of the
	// transport's (HTTP/2 writes a request on one of its own). A lock,
	// not an atomic.Value: storing a connection there would box it, an
	// allocation per attempt.
	mu    sync.Mutex
	conn  any // set by GotConn
	trace httptrace.ClientTrace
}

// newConnTrace returns a connTrace with its GotConn bound.
func newConnTrace() *connTrace {
	ct := new(connTrace)
	ct.trace.GotConn = func(info httptrace.GotConnInfo) {
		if info.Conn != nil {
			ct.mu.Lock()
			ct.conn = info.Conn
			ct.mu.Unlock()
		}
	}
	return ct
}

var connTraces = sync.Pool{New: func() any { return newConnTrace() }}

// connection returns the connection GotConn reported, or nil.
func (ct *connTrace) connection() any {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.conn
}

// take returns the connection GotConn reported, or nil, and puts ct back in
// the pool.
func (ct *connTrace) take() any {
	c := ct.connection()
	ct.mu.Lock()
	ct.conn = nil
	ct.mu.Unlock()
	connTraces.Put(ct)
	return c
}

// traceKey is the key under which httptrace.ContextClientTrace looks a
// trace up in a context, learnt by asking it once (keySpy), so that an
// outcome can answer it without a context.WithValue; nil if it could not
// be learnt, and then roundTripConn uses httptrace.WithClientTrace.
var traceKey = func() any {
	spy := &keySpy{Context: context.Background()}
	httptrace.ContextClientTrace(spy)
	if spy.n != 1 {
		return nil
	}
	return spy.key
}()

// keySpy is a context that records the key of the one Value call it
// expects.
type keySpy struct {
	context.Context
	key any
	n   int
}

func (s *keySpy) Value(key any) any {
	s.key = key
	s.n++
	return nil
}

// Value answers the look-up of the attempt's connection trace while the
// attempt is sent (see roundTripConn); every other key is looked up in
// the attempt request's context.
func (o *outcome) Value(key any) any {
	if traceKey != nil && key == traceKey {
		if ct := o.ct.Load(); ct != nil {
			return &ct.trace
		}
	}
	return o.Context.Value(key)
}

// roundTripConn is RoundTrip, and also returns the connection the attempt
// was sent on, as net/http's GotConn reports it (nil when none was, or the
// next RoundTripper reports none). A request whose context carries a
// ClientTrace of the caller's own gets a trace composed with it
// (httptrace.WithClientTrace), at the cost of a context value and a copy.
func (t *transport) roundTripConn(req *http.Request) (*http.Response, any, error) {
	if req == nil || req.URL == nil {
		resp, err := t.RoundTrip(req)
		return resp, nil, err
	}
	ctx := req.Context()
	if traceKey == nil || httptrace.ContextClientTrace(ctx) != nil {
		// Not a pooled trace: WithClientTrace composes the caller's hooks
		// into it.
		ct := newConnTrace()
		resp, err := t.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, &ct.trace)))
		return resp, ct.connection(), err
	}
	// The outcome the response will carry, made now: its request is the
	// one sent, and it answers the look-up of the trace (Value) until the
	// next RoundTripper returns.
	lo := new(lazyOutcome)
	o := &lo.outcome
	o.Context = ctx
	if prev, ok := ctx.(*outcome); ok {
		o.Context = prev.Context // as attach does
	}
	o.req = *req.WithContext(o)
	ct := connTraces.Get().(*connTrace)
	o.ct.Store(ct)
	resp, err := t.send(&o.req, ctx, lo)
	o.ct.Store(nil)
	return resp, ct.take(), err
}
