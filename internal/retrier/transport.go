// Package retrier is the retry layer of the egresskit chain, configured
// by retry.Policy: an http.RoundTripper that
// retries an attempt only when its classify.Result says so, with jittered
// exponential backoff, a capped Retry-After, per-attempt and overall time
// limits, and replay of request bodies through GetBody.
//
// Retries are driven by go-retryablehttp's Client.Do engine, one per
// Transport. What is the engine's and what is ours:
//
//   - The engine's: the loop over attempts (counting them against
//     RetryMax, stopping when the context ends, returning the last
//     response or error through PassthroughErrorHandler), the copy of the
//     request it makes before each retry, and the send of each retry
//     through its http.Client.
//   - Ours, as the engine's hooks: the decision (CheckRetry, reading the
//     attempt's classify.Result and the policy), the backoff and the wait
//     (Backoff returns 0; PrepareRetry waits the jittered or Retry-After
//     wait the decision chose, capped by the policy and honouring the
//     context, because the engine's Backoff hook is not told which request
//     it waits for), and the body replay (PrepareRetry installs a fresh
//     body from GetBody on the engine's copy, and the previous attempt's
//     body is drained and closed).
//
// The first attempt is sent outside the engine, directly, and decided by
// the same CheckRetry; the engine is entered only when that attempt is to
// be retried. The engine would wrap even a first attempt that needs no
// retry in a retryablehttp.Request and an http.Client pass (a copy of the
// request, a body reader, redirect and timeout handling): a request that
// succeeds first time, nearly every request of a crawl, should pay nothing
// for retries it does not need, and egresskit's chain hands such a first
// attempt to the layer below as the caller made it. The engine's outcome
// would be the same: after a first attempt it only checks the context,
// copies the request and runs PrepareRetry, which this package does in
// the same order before entering it. Every decision reads classify.Of(resp, err): the
// retry layer never classifies a response itself. Transient and Throttled
// are retried; OK, Refused, Permanent and Canceled are returned at once,
// and so are the errors of the layers below that mean "do not send"
// (breaker open, host halted, robots disallowed, a pacing wait past the
// deadline), which classify as Permanent or Canceled.
//
// The caller always receives the real last response or error: never a
// synthetic "giving up" error, never an *url.Error added by the engine. The
// bodies of retried responses are drained (at most 64 KiB) and closed.
// Nothing is logged.
package retrier

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/retry"
	"github.com/hashicorp/go-retryablehttp"
)

// Errors for requests that cannot be sent. They are returned wrapped in a
// *classify.Error whose Result is Permanent ("invalid request"), so that
// classify.Of reports them correctly; match them with errors.Is.
var (
	// ErrNilRequest: RoundTrip was given a nil request.
	ErrNilRequest = errors.New("retry: nil request")
	// ErrNoHost: the request has no URL, or its URL has no host.
	ErrNoHost = errors.New("retry: request URL has no host")
	// ErrUnsupportedScheme: the URL scheme is not http or https.
	ErrUnsupportedScheme = errors.New("retry: unsupported URL scheme")
)

// Transport is an http.RoundTripper that retries failed attempts according
// to a Policy and the classify.Result of each attempt. It is safe for
// concurrent use. A zero (or nil) Transport behaves as New(nil, retry.Policy{})
// (the default policy), building that on every call; use New.
//
// Each attempt's request context carries the attempt number (AttemptFrom)
// and, with Policy.AttemptTimeout, its own deadline, which lasts until the
// attempt's response body is closed. The one exception is egresskit's own
// chain, whose layer under this Transport is told the attempt and its key
// directly: there a first attempt that needs no deadline of its own goes
// out with the caller's request as it is, sparing a copy of the request
// per request.
type Transport struct {
	next   http.RoundTripper
	p      policy           // normalized
	first  *attemptSender   // sends first attempts; the engine's client sends retries through it too
	direct firstsend.Sender // next, when it takes first attempts without an attempt context; else nil
	hc     *http.Client     // the engine's client; its Transport is first
	engine *retryablehttp.Client
	budget *budget // nil when Policy.Budget is negative
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport sending attempts through next, governed by p.
// A nil next means http.DefaultTransport. A Policy it cannot honour is
// refused with an error wrapping egresskit.ErrInvalidConfig that names
// the field.
func New(next http.RoundTripper, p0 retry.Policy) (*Transport, error) {
	p := policy(p0)
	if err := p.check(); err != nil {
		return nil, err
	}
	if next == nil {
		next = http.DefaultTransport
	}
	t := &Transport{next: next, p: p.normalized()}
	if t.p.Budget > 0 {
		t.budget = newBudget(t.p.Budget, time.Now)
	}
	t.first = &attemptSender{next: next, timeout: t.p.AttemptTimeout}
	t.direct, _ = next.(firstsend.Sender)
	t.hc = &http.Client{
		// attemptSender has no CloseIdleConnections method, so the engine's
		// calls to HTTPClient.CloseIdleConnections after a failure never
		// reach next: one failed request must not drop the idle
		// connections of every other request sharing the base transport.
		Transport: t.first,
		// The caller's own client follows redirects, once.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// One engine serves every request: its hooks find the request's call
	// in the request context, so that no per-request hooks are bound.
	t.engine = &retryablehttp.Client{
		HTTPClient:   t.hc,
		RetryMax:     max(t.p.MaxRetries, 0),
		CheckRetry:   checkRetry,
		Backoff:      noBackoff,
		PrepareRetry: prepareRetry,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return t, nil
}

// RoundTrip sends req, retrying it as the policy and each attempt's
// classify.Result allow, and returns the last response or error.
//
// It does not send requests it cannot send: a nil request, a request
// without URL host, or a scheme other than http and https yield an error
// matching ErrNilRequest, ErrNoHost or ErrUnsupportedScheme. A request is
// retried only if its method is idempotent (or the policy or an
// Idempotency-Key header allows it) and its body can be replayed: no body,
// or GetBody set. Other requests are sent once.
//
// Errors of the layers below are returned as they are (a *classify.Error
// when the classifying transport is below). When the policy's Deadline passes,
// the error matches context.DeadlineExceeded; when an attempt is cut by
// AttemptTimeout and no retry is left, it matches classify.ErrAttemptTimeout.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.roundTrip(req, "")
}

func init() {
	firstsend.KeyFrom = keyFrom
	firstsend.HoldAttemptTimer = holdAttemptTimer
	firstsend.RoundTripKey = func(rt http.RoundTripper, req *http.Request, key string) (*http.Response, error) {
		return rt.(*Transport).roundTrip(req, key)
	}
}

func (t *Transport) roundTrip(req *http.Request, key string) (*http.Response, error) {
	if t == nil || t.hc == nil {
		zero, _ := New(nil, retry.Policy{}) // the zero Policy is valid
		return zero.roundTrip(req, key)
	}
	if err := validate(req); err != nil {
		if req != nil && req.Body != nil {
			req.Body.Close()
		}
		return nil, &classify.Error{
			Result: classify.Result{Outcome: classify.Permanent, Reason: "invalid request"},
			Err:    err,
		}
	}

	ctx := req.Context()
	var cancel context.CancelFunc
	if t.p.Deadline > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.p.Deadline)
	}

	// The call stays on the stack while the first attempt needs no
	// context of its own (see sendDirect); it moves to the heap with the
	// attempts' request otherwise.
	first := call{p: &t.p, key: key}
	var now time.Time // read for the budget, handed to the first attempt
	if t.budget != nil {
		first.budget, first.host = t.budget, key
		if key == "" {
			first.host = req.URL.Host
		}
		now = t.budget.request(first.host)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody {
		first.getBody = req.GetBody
	}
	if (!hasBody || req.GetBody != nil) && (t.p.RetryNonIdempotent || idempotent(req)) {
		first.left = int32(min(t.p.MaxRetries, math.MaxInt32))
	}

	var (
		resp *http.Response
		err  error
	)
	if t.direct != nil && cancel == nil && t.p.AttemptTimeout <= 0 &&
		req.Header != nil && req.URL.User == nil && req.RequestURI == "" {
		resp, err = t.sendDirect(&first, req, now)
	} else {
		resp, err = t.do(t.newCall(&first, ctx, req), nil)
	}

	err = unwrapClient(err)
	if err == nil && resp == nil {
		err = errors.New("retry: no response and no error")
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if cancel != nil {
			cancel()
		}
		return nil, err
	}
	// resp.Request stays the last attempt's request as the layers below
	// returned it: it has the caller's URL, method and header, and its
	// context carries the attempt's classify.Result (classify.Of).
	if cancel != nil {
		resp.Body = releaseOnClose(resp.Body, cancel)
	}
	return resp, nil
}

// newCall returns the call of the request req, whose attempts' context is
// ctx, with the state of first: the attempts' request is req,
// shallow-copied, with the call as its context and what the engine's
// http.Client must not see removed.
func (t *Transport) newCall(first *call, ctx context.Context, req *http.Request) *call {
	c := new(call)
	*c = *first
	c.Context = ctx
	// The attempts' request lives in the call: one allocation for both.
	// WithContext's own copy does not escape (it is copied at once), so it
	// costs no allocation.
	c.req = *req.WithContext(c)
	out := &c.req
	// Hidden from the engine's http.Client, which would otherwise call it
	// for a 307/308 it is not going to follow; attemptSender restores it for
	// the layers below (http.Transport rewinds with it on a dead
	// keep-alive connection).
	out.GetBody = nil
	// A server-side request forwarded as is: http.Client refuses it,
	// http.Transport does not.
	out.RequestURI = ""
	if req.URL.User != nil {
		// http.Client would turn userinfo into an Authorization header
		// the caller did not set; attemptSender restores the caller's URL.
		u := *req.URL
		u.User = nil
		out.URL = &u
		c.url = req.URL
	}
	return c
}

// do makes the attempts of the call c: the first directly, unless it was
// made already (c.attempts is then 1, resp1 its response, and checkRetry
// said yes to it), then, if
// checkRetry asks for a retry, the rest in the engine. The engine's
// outcome for a first attempt it made itself would be the same: between
// attempts it ends the request if the context has ended, copies the
// request, runs PrepareRetry (whose error ends the request with the last
// response), and its loop then continues as from a first attempt, which
// changes nothing: the call counts the attempts and the retries left.
func (t *Transport) do(c *call, resp1 *http.Response) (resp *http.Response, err error) {
	defer func() {
		if c.next != nil { // a replay body obtained for a retry that did not happen
			c.next.Close()
			c.next = nil
		}
	}()
	out := &c.req
	if c.attempts == 0 {
		resp, err = t.sendFirst(out)
		if ok, _ := c.checkRetry(c, resp, err); !ok {
			return resp, err
		}
	} else {
		resp = resp1 // checkRetry said yes already
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	// Between attempts, as the engine: a shallow copy (the transport may
	// still be closing the sent request's body), then PrepareRetry.
	next := *out
	if perr := prepareRetry(&next); perr != nil {
		return resp, perr
	}
	return t.engine.Do(&retryablehttp.Request{Request: &next})
}

// sendDirect makes the first attempt of req through t.direct, with the
// caller's request as it is, and decides on it with first, a call on the
// caller's stack whose context is req's; only a retry moves the call to
// the heap and goes on in do. Its preconditions (RoundTrip checks them):
// no Deadline or AttemptTimeout (the attempt's context is req's), a
// non-nil Header, no userinfo in the URL and no RequestURI, so that the
// request is what the engine's http.Client would send. now is when the
// budget counted the request (see firstsend.Attempt.Now).
func (t *Transport) sendDirect(first *call, req *http.Request, now time.Time) (*http.Response, error) {
	first.attempts = 1
	resp, err := t.direct.SendFirst(firstsend.Attempt{Req: req, Key: first.key, Now: now})
	resp, err = t.firstOutcome(req, resp, err)
	ok, _ := first.checkRetry(req.Context(), resp, err)
	if !ok {
		return resp, err
	}
	return t.do(t.newCall(first, req.Context(), req), resp)
}

// sendFirst sends the first attempt of out through the attemptSender with
// the outcome the engine's http.Client would give it: the request gets a
// header (the client adds an empty one), a TLS record that is HTTP is
// http.ErrSchemeMismatch, every response has a body (an empty one when the
// RoundTripper returns none), and a redirect whose Location does not parse
// is an error, as the client reports it before asking CheckRedirect (which
// then returns the redirect itself). The client's other work does not
// apply: it has no timeout and no cookie jar, and out carries no userinfo,
// no GetBody and no RequestURI (see RoundTrip).
func (t *Transport) sendFirst(out *http.Request) (*http.Response, error) {
	if out.Header == nil {
		out.Header = make(http.Header)
	}
	resp, err := t.first.RoundTrip(out)
	return t.firstOutcome(out, resp, err)
}

// firstOutcome turns what the layers below returned for the first attempt
// of out into what the engine's http.Client would have returned (see
// sendFirst).
func (t *Transport) firstOutcome(out *http.Request, resp *http.Response, err error) (*http.Response, error) {
	if err == nil && resp == nil { // as attemptSender reports it
		err = errNoResponse
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if tlsErr, ok := err.(tls.RecordHeaderError); ok && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch
		}
		return nil, err
	}
	if resp.Body == nil {
		if resp.ContentLength > 0 && out.Method != http.MethodHead {
			return nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a *Response with content length %d but a nil Body", t.first, resp.ContentLength)
		}
		resp.Body = http.NoBody
	}
	if err := badLocation(out, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// badLocation returns the error http.Client gives a redirect it would
// follow (301, 302, 303; 307 and 308 unless the request had a body, since
// out has no GetBody) whose Location does not parse.
func badLocation(out *http.Request, resp *http.Response) error {
	switch resp.StatusCode {
	case 301, 302, 303:
	case 307, 308:
		if out.Body != nil && out.Body != http.NoBody {
			return nil
		}
	default:
		return nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	if _, err := out.URL.Parse(loc); err != nil {
		return fmt.Errorf("failed to parse Location header %q: %v", loc, err)
	}
	return nil
}

// CloseIdleConnections closes the idle connections of the next
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	if t == nil || t.next == nil {
		return
	}
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func validate(req *http.Request) error {
	if req == nil {
		return ErrNilRequest
	}
	if req.URL == nil || req.URL.Host == "" {
		return ErrNoHost
	}
	if s := req.URL.Scheme; !strings.EqualFold(s, "http") && !strings.EqualFold(s, "https") {
		return fmt.Errorf("%w %q", ErrUnsupportedScheme, safeScheme(s))
	}
	return nil
}

// safeScheme bounds a scheme quoted in an error message.
func safeScheme(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// unwrapClient removes the one *url.Error layer the engine's http.Client
// adds to every error, so the caller sees the error of the layer below.
func unwrapClient(err error) error {
	if ue, ok := err.(*url.Error); ok && ue.Err != nil {
		return ue.Err
	}
	return err
}

// releaseOnClose returns rc wrapped so that Close also calls cancel.
func releaseOnClose(rc io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	b := &cancelBody{rc: rc, cancel: cancel}
	if w, ok := rc.(io.Writer); ok { // a 101 Switching Protocols body
		return &cancelRWBody{cancelBody: b, w: w}
	}
	return b
}

// cancelBody is a response body that releases a context when closed.
type cancelBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) { return b.rc.Read(p) }

func (b *cancelBody) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, b.rc) }

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

type cancelRWBody struct {
	*cancelBody
	w io.Writer
}

func (b *cancelRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }
