package classify

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
)

// Classify classifies one attempt: err when it is not nil, else resp.
//
// For a response, Classify inspects the status, the headers and, when
// useful, the first PeekSize bytes of the body (OKPeekSize of a 2xx
// answer; see Config), and attaches the Result to
// resp: resp.Request becomes a shallow copy of itself (an empty request when
// it is nil) whose context carries the Result, where Of finds it. A body
// that was inspected is replaced by one that yields the complete original
// body, byte for byte, whether it is read with Read or io.Copy; a body that
// was not inspected is left as it is. A body is
// inspected when a marker could match it, or the agent token could (a 401
// or 403), given its Content-Type: markers read HTML (text/html,
// application/xhtml+xml), JSON for the markers that allow it, and untyped
// bodies whose head looks like either; the agent token also reads
// text/plain; nothing reads other types, so a binary download is not held
// up and a source file quoting a block page is not taken for one. Never
// for HEAD requests, 1xx, 204, 3xx, or a nil or http.NoBody body. A gzip-
// or deflate-encoded body (the caller set Accept-Encoding itself, so
// net/http did not decompress it) is decoded for matching, at most PeekSize
// (or OKPeekSize) decoded bytes from the PeekSize bytes read, and handed over still
// encoded; other encodings (br, zstd) are not inspected and the Result says
// so (Uninspected).
// Reading the head stops at PeekSize (or OKPeekSize) bytes, the end of the body,
// PeekTimeout after the headers arrived, or the end of resp.Request's
// context, whichever comes first. A head cut by PeekTimeout is classified
// on what had arrived (Result.PeekCut); a read still in flight then
// finishes in the background and its bytes reach the caller in order. If
// the context ends while the body is being read, the body is closed so
// that even a body that ignores its context cannot hold the caller. Peek buffers are pooled
// and go back to the pool once the head has been read or the body closed.
//
// A transport does not wait for the body of a 2xx answer: when it would
// read the first OKPeekSize bytes of one whose body is not encoded, it
// returns the response at once with its Result pending, and the page is
// judged when the caller reads it. The first Read (or WriteTo) of the body
// reads those bytes in the caller's goroutine, waiting for them as long as
// the body lets a read wait (no PeekTimeout: the caller is waiting for the
// page anyway; the request's context and the body's own deadlines apply),
// applies the rules below to them, and only then hands out the bytes, all
// of them, in order; a read error within the head reaches the caller after
// the bytes before it. That first Read therefore returns once the head
// or the end of the body has arrived, not with the first bytes of a page
// that trickles in. A 2xx challenge page is Refused exactly as before,
// microseconds after RoundTrip returned for a caller that reads its
// bodies. Of (and classifier.Head) on a pending response settles it at
// once with the time-bounded read above, so a caller that asks for the
// Result before reading gets the same answer; a body closed unread is
// judged on its status and headers alone (OK, unless a header marker
// matches), never by its content, and so is one first read (or asked
// about) after the request's context ended: the host answered in time. onSettle reads the Result without
// settling it and runs a function once it is settled. Classify itself
// returns a Result, so it always reads the head before returning, as
// above; so does a transport for other statuses and for gzip- or
// deflate-encoded bodies.
//
// The rules, first match wins:
//
//   - an error: see the Canceled, Transient and Permanent rules below;
//   - no response and no error: Transient, "no response";
//   - a challenge marker, on any status: Refused, "challenge marker";
//   - a 401 or 403 whose body head names the agent token: Refused;
//   - the body head was needed but could not be read: by the request's
//     context (see Errors), else Transient, "body read error";
//   - 1xx, 2xx, 3xx: OK (the client follows redirects; a 202 challenge was
//     caught above);
//   - 429: Throttled; any 4xx or 5xx with a usable Retry-After: Throttled;
//     a 403 or 503 whose rate-limit fields say the quota is spent:
//     Throttled; a 403 whose body head says "secondary rate limit"
//     (GitHub's, which carries no header): Throttled, waiting
//     secondaryRateLimitWait unless a field states a wait;
//   - 408, 425, 500, 502, 503, 504 and other 5xx: Transient;
//   - other 4xx: Permanent; any other status: Transient.
//
// A challenge is Refused whatever the status, 429 included: a CAPTCHA is a
// refusal to be escalated, never a pace to slow down to. For 4xx and 5xx,
// Result.RetryAfter holds the wait the response asks for (see
// parseRetryAfter; a 429 or 503 also accepts a rate-limit reset without a
// remaining count), whatever the outcome.
//
// Errors: an error that wraps an *Error keeps its Result. Otherwise the
// request's context decides first, by the deadline-versus-cancel rule: an
// attempt reaches this classifier only once it has been sent, so a
// deadline that expires while it waits on the host's response, whoever set
// it (the retry layer's per-attempt ErrAttemptTimeout, the caller's
// context deadline, http.Client.Timeout), is the host's failure to answer
// in time: Transient ("attempt timeout" or "timeout"), which counts against
// the host's circuit breaker. Only a cancellation by the caller (its
// context canceled, without a deadline) is Canceled ("canceled"), neutral
// for the host. A layer that gives up before sending (a pacing wait past
// the deadline) reports that itself, with its own *Error. When the
// request's context is unknown (resp or resp.Request is nil, as in Of), the
// same rule reads the error: one wrapping ErrAttemptTimeout, or whose chain
// holds context.DeadlineExceeded itself (not merely an error matching it
// through an Is method, as net's i/o timeouts do), or http.Client's
// Client.Timeout error, is Transient ("timeout"); one whose chain holds
// context.Canceled itself is Canceled. Then: too many redirects
// (http.Client's "stopped after N redirects", or ErrTooManyRedirects) and
// TLS certificate errors are Permanent; so is an invalid request
// (errNilRequest, an unsupported scheme, no host); everything else,
// timeouts included, is Transient.
//
// A nil classifier classifies as newClassifier(Config{}).
func (c *classifier) Classify(resp *http.Response, err error) Result {
	if c == nil {
		c = defaultClassifier
	}
	var ctx context.Context
	if resp != nil && resp.Request != nil {
		ctx = resp.Request.Context()
	}
	if err != nil {
		return c.classifyError(ctx, err)
	}
	if resp == nil {
		return noResponse
	}
	return c.classifyResponse(nil, resp, false, nil)
}

var noResponse = Result{Outcome: Transient, Reason: "no response"}

// classifyResponse classifies resp, the response to req (nil: resp.Request),
// peeking at the body when useful, and attaches the Result to resp. When
// lazy is set and resp is a 2xx answer whose head would be read (see
// classifier.defers), it reads nothing: it attaches a pending Result,
// settled as the body is read (see lazy), and returns the zero Result.
//
// pre, when not nil, is an outcome made before the attempt was sent, whose
// request is req (see roundTripConn): the Result is attached to it, unless
// the body is peeked at before returning, which takes an outcome of its
// own.
func (c *classifier) classifyResponse(req *http.Request, resp *http.Response, lazy bool, pre *lazyOutcome) Result {
	if req == nil {
		req = resp.Request
	}
	var ctx context.Context
	if req != nil {
		ctx = req.Context()
	}
	var (
		o        *outcome
		head     []byte // the body head (decoded); nil when not inspected
		peekErr  error  // how a peek ended, when neither full nor at EOF
		ctxEnded bool   // the request's context ended before or during the peek
		peekCut  bool   // the peek's time budget passed first
	)
	kind := kindOf(resp.Header)
	peek, enc, uninspected := c.shouldPeek(resp, resp.StatusCode, kind)
	if pre != nil {
		ctx = pre.outcome.Context
	}
	switch {
	case !peek:
		o = pre.plain()
	case ctx != nil && ctx.Err() != nil:
		o = pre.plain()
		ctxEnded = true
	case lazy && c.defers(resp.StatusCode, enc):
		c.deferResponse(req, resp, kind, pre)
		return Result{}
	default:
		po := &peekedOutcome{}
		o = &po.outcome
		b := &po.body
		b.rc, b.p, po.peek.pool = resp.Body, &po.peek, &c.heads
		var (
			err error
			cut bool
		)
		// Only as many bytes as the decision needs: a 2xx answer's
		// first okPeek bytes. An encoded body is read in full PeekSize,
		// as its compressed bytes may decode to fewer, and the decoded
		// head is cut to the same length.
		n := c.peekLen(resp.StatusCode)
		if enc != encIdentity {
			n = c.peekSize
		}
		head, err, cut = c.peekHead(ctx, b.rc, b.p, n)
		if head != nil && enc != encIdentity {
			// Markers match the page, not its compressed bytes; the
			// caller still receives the encoded bytes.
			dp := c.decoded.Get().(*[]byte)
			defer c.decoded.Put(dp)
			dst := (*dp)[:c.peekLen(resp.StatusCode)]
			head = dst[:decodeHead(dst, head, enc)]
		}
		if err != nil && err != io.EOF {
			peekErr = err
			ctxEnded = ctx != nil && ctx.Err() != nil
		}
		peekCut = cut
		resp.Body = b
	}
	if kind == kindUnknown && head != nil {
		kind = sniffKind(head)
	}
	if resp.Body == nil {
		resp.Body = http.NoBody // as http.Client does; the caller can always Close
	}
	o.r = c.decide(ctx, resp, head, kind, peekErr, ctxEnded)
	o.r.Uninspected = uninspected
	o.r.PeekCut = peekCut
	attach(resp, req, o)
	return o.r
}

// maxStackNeedles is how many needles decide can record without allocating.
const maxStackNeedles = 128

// decide applies the rules of Classify to a response whose body head is head
// (nil when not inspected).
func (c *classifier) decide(ctx context.Context, resp *http.Response, head []byte, kind bodyKind, peekErr error, ctxEnded bool) Result {
	status := resp.StatusCode
	r := Result{Status: status}
	// One pass of the automaton over the head finds every needle at once;
	// found[id] > 0 when needle id occurs. Only when a needle can matter:
	// markers read HTML and JSON, the token and the secondary rate limit a
	// 401 or 403.
	var found []int32
	if head != nil && (kind == kindHTML || kind == kindJSON || status == 401 || status == 403) {
		// Declared here, so that an answer whose body is not inspected
		// does not pay for zeroing it.
		var buf [maxStackNeedles]int32
		if c.needles <= len(buf) {
			found = buf[:c.needles]
		} else {
			found = make([]int32, c.needles)
		}
		if !c.scan(status, head, found) {
			found = nil // nothing to match: skip the markers' loop
		}
	}
	var names [4]string
	matched := names[:0]
	// Adjacent markers on the same header share one lookup.
	var (
		key  string
		vals []string
	)
	for i := range c.headers {
		m := &c.headers[i]
		if !m.appliesTo(status) {
			continue
		}
		if m.header != key {
			key, vals = m.header, resp.Header[m.header]
		}
		if len(vals) > 0 && m.matchValues(vals) && !slices.Contains(matched, m.name) {
			matched = append(matched, m.name)
		}
	}
	if found != nil && (kind == kindHTML || kind == kindJSON) {
		for i := range c.bodies {
			m := &c.bodies[i]
			if (kind == kindHTML || m.json) && m.appliesTo(status) && m.matchHeader(resp.Header) && m.matchBody(found) &&
				!slices.Contains(matched, m.name) {
				matched = append(matched, m.name)
			}
		}
	}
	switch {
	case len(matched) > 0:
		r.Outcome, r.Reason = Refused, "challenge marker"
		r.Markers = slices.Clone(matched)
	case (status == 401 || status == 403) && c.token != noNeedle && found != nil && found[c.token] > 0:
		r.Outcome, r.Reason = Refused, "agent named"
	case ctxEnded:
		r.Outcome, r.Reason = contextOutcome(ctx)
	case peekErr != nil:
		r.Outcome, r.Reason = Transient, "body read error"
	case status == 403 && found != nil && found[c.secondary] > 0:
		r.Outcome, r.Reason = Throttled, "secondary rate limit"
		d, src := parseWait(resp.Header, c.now, true)
		if src == waitNone {
			d = secondaryRateLimitWait
		}
		r.RetryAfter = d
	default:
		c.statusRules(resp.Header, &r)
	}
	return r
}

// scan records in found (zero, one element per needle) the end of the
// first occurrence of every needle in head that can matter for status. It
// returns false when it knows that none occurs (found is then zero).
//
// For a status that no body marker names, other than 401 and 403 (a 200,
// a 404), only markers that apply to every status can match: when the
// skip search finds none of their needles in head, none of them matches;
// otherwise the automaton finds every needle, as for any other status.
func (c *classifier) scan(status int, head []byte, found []int32) bool {
	if c.skip != nil && !slices.Contains(c.fullScan, status) {
		if !c.skip.scan(head, found) {
			return false
		}
		clear(found)
	}
	c.ac.scan(head, found)
	return true
}

// statusRules applies the status and rate-limit rules to r.Status.
func (c *classifier) statusRules(h http.Header, r *Result) {
	status := r.Status
	r.Reason = statusReason(status)
	if status >= 100 && status < 400 {
		r.Outcome = OK
		r.Quota = parseQuota(h, c.now)
		return
	}
	if status >= 400 && status < 600 {
		d, src := parseWait(h, c.now, status == 429 || status == 503)
		r.RetryAfter = d
		switch {
		case status == 429:
			r.Outcome = Throttled
			return
		case src == waitRetryAfter:
			r.Outcome, r.Reason = Throttled, "retry-after"
			return
		case src == waitRateLimit && (status == 403 || status == 503):
			r.Outcome, r.Reason = Throttled, "rate limit"
			return
		}
	}
	switch {
	case status >= 400 && status < 500 && status != 408 && status != 425:
		r.Outcome = Permanent
	default:
		r.Outcome = Transient
	}
}

// statusReasons holds "status NNN" for 100..599, so a Reason costs no
// allocation.
var statusReasons = func() (t [500]string) {
	for i := range t {
		t[i] = "status " + strconv.Itoa(i+100)
	}
	return t
}()

func statusReason(code int) string {
	if code >= 100 && code < 600 {
		return statusReasons[code-100]
	}
	return "unexpected status"
}
