package classify

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Of returns the Result of an attempt that the chain made: the one carried
// by an error wrapping *Error, else the one attached to resp. When neither
// carries one, Of classifies (resp, err) with the default Config without
// reading the body, so body markers and the agent token cannot match. A
// crawler author calls it on what the chain's RoundTrip (or an
// http.Client over it) returned.
//
// A 2xx answer that the chain returned before reading its body has a
// pending Result: Of settles it, reading the body's head with the time
// budget of Config.PeekTimeout, unless the caller's read (or an earlier
// Of) did so already.
//
// A response's Result lives in one place: the context of the request that
// the classifier sets as resp.Request. It survives anything that wraps or
// replaces resp.Body (http.Client does when it has a Timeout). A layer that
// replaces resp.Request itself keeps the Result only if the new request has
// the same context (as req.Clone(resp.Request.Context()) does).
func Of(resp *http.Response, err error) Result {
	if err != nil {
		if ce, ok := errorsAsError(err); ok {
			return ce.Result
		}
		//lint:ignore SA1012 a nil context means "the request's context is unknown"
		return defaultClassifier.classifyError(nil, err)
	}
	if resp == nil {
		return noResponse
	}
	if o := outcomeOf(resp); o != nil {
		if o.lz != nil {
			return o.lz.result()
		}
		return o.r
	}
	//lint:ignore SA1012 a nil context means "the request's context is unknown"
	return defaultClassifier.decide(nil, resp, nil, kindOther, nil, false)
}

// outcome is the home of a response's Result: the context of the request
// the classifier sets as resp.Request. It is found by its type, so only the
// response it was attached to carries it; a context derived from it does
// not.
type outcome struct {
	context.Context // the attempt request's context
	r               Result
	// lz holds the Result instead of r when it is settled as the body is
	// read (see lazy); nil otherwise.
	lz *lazyOutcome
	// req is resp.Request: a shallow copy of the attempt's request whose
	// context is the outcome, allocated with it.
	req http.Request
	// ct is the attempt's connection trace while the attempt is sent, when
	// the outcome was made before (see roundTripConn and Value).
	ct atomic.Pointer[connTrace]
}

// plain returns the outcome of a Result decided at once, without reading
// the body: lo's, made before the attempt was sent, when there is one (see roundTripConn), else a new one.
func (lo *lazyOutcome) plain() *outcome {
	if lo == nil {
		return new(outcome)
	}
	return &lo.outcome
}

// peekedOutcome allocates an outcome with the body and peek state of an
// inspected response together.
type peekedOutcome struct {
	outcome
	body
	peek
}

// reattach makes r the Result of resp (what Of reports), replacing the one
// Classify attached. It is for a layer that reclassifies a response on
// evidence Classify cannot see, such as a host-level block detector; resp
// must not be nil. Like Classify, it sets resp.Request to a shallow copy
// whose context carries r; but when resp's Result is one that a transport
// settles as the body is read (see onSettle), r replaces it in place,
// leaving resp.Request as it is, and settles it if it was pending: the body
// is then handed out unjudged, and the onSettle hooks run with r, on the
// goroutine calling reattach.
func reattach(resp *http.Response, r Result) {
	if o := outcomeOf(resp); o != nil && o.lz != nil {
		o.lz.attach(r)
		return
	}
	attach(resp, nil, &outcome{r: r})
}

// outcomeOf returns the outcome attached to resp, or nil.
func outcomeOf(resp *http.Response) *outcome {
	if resp.Request == nil {
		return nil
	}
	o, _ := resp.Request.Context().(*outcome)
	return o
}

// attach makes o the context of a copy of req that becomes resp.Request. A
// nil req stands for resp.Request, and an empty request when that is nil.
func attach(resp *http.Response, req *http.Request, o *outcome) {
	if o.req.Context() == context.Context(o) {
		// Made before the attempt was sent (see roundTripConn): its
		// request is the one sent, whose fields the next RoundTripper
		// may still read.
		resp.Request = &o.req
		return
	}
	if req == nil {
		req = resp.Request
		if req == nil {
			req = new(http.Request)
		}
	}
	parent := req.Context()
	if prev, ok := parent.(*outcome); ok {
		parent = prev.Context // a reclassification replaces the Result
	}
	o.Context = parent
	// WithContext is the only way to set a request's context; it is
	// inlined here, so the copy it makes stays on the stack and the one
	// that outlives attach is o.req, allocated with the outcome.
	o.req = *req.WithContext(o)
	resp.Request = &o.req
}
