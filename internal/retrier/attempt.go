package retrier

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/settle"
)

// drainLimit bounds how much of a retried response's body is read before
// it is closed, so that its connection can be reused.
const drainLimit = 64 << 10

type callKey struct{}

// AttemptFrom returns the 1-based number of the attempt whose request
// context is ctx, or 0 when ctx does not belong to an attempt made by a
// Transport. Layers below the retry layer use it to label what they see.
func AttemptFrom(ctx context.Context) int {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return int(c.attempts)
	}
	return 0
}

// keyFrom is firstsend.KeyFrom.
func keyFrom(ctx context.Context) (string, bool) {
	if c, ok := ctx.Value(callKey{}).(*call); ok && c.key != "" {
		return c.key, true
	}
	return "", false
}

// call is the state of one RoundTrip. go-retryablehttp's hooks receive
// no request, so the hooks are bound to a call, and attemptSender and
// holdAttemptTimer find it in the request context (its one key). All of it is used by the goroutine
// running RoundTrip only: the engine calls the hooks and the http.Client
// calls attempts synchronously.
type call struct {
	// The request's context: a call is the context of the requests the
	// engine sends, so that its hooks find it without another allocation.
	context.Context

	p *policy

	key string // the caller's key for the request (keyFrom); "" for none

	budget *budget // the Transport's retry budget; nil for none
	host   string  // the request's host in the budget

	getBody  func() (io.ReadCloser, error) // the caller's GetBody; nil without a body
	url      *url.URL                      // the caller's URL when it has userinfo, else nil
	left     int32                         // retries left
	attempts int32                         // attempts started
	timer    *attemptTimer                 // the current attempt's timer; nil without AttemptTimeout
	wait     time.Duration                 // the wait checkRetry chose for the next retry
	next     io.ReadCloser                 // the body for the next retry, from getBody

	// req is the request the engine sends: the caller's, shallow-copied,
	// with the call as its context and what the engine must not see
	// removed (see Transport.RoundTrip).
	req http.Request
}

// Value returns the call itself for callKey, and otherwise what the
// request's context holds.
func (c *call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// checkRetry is the engine's CheckRetry: the decision of the request's
// call.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil {
		return false, nil
	}
	return c.checkRetry(ctx, resp, err)
}

// noBackoff is the engine's Backoff. The engine cannot tell a hook which
// request it is waiting for when an attempt failed without a response, so
// the wait the call chose is made in prepareRetry, which has the request.
func noBackoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration { return 0 }

// prepareRetry is the engine's PrepareRetry, run before every retry: it
// waits the call's chosen wait, honouring the request context (its error
// ends the request, as the engine's own wait would), then installs the
// replayed body on the engine's copy of the request.
func prepareRetry(r *http.Request) error {
	c, _ := r.Context().Value(callKey{}).(*call)
	if c == nil {
		return errNoCall
	}
	if c.wait > 0 {
		timer := time.NewTimer(c.wait)
		select {
		case <-r.Context().Done():
			timer.Stop()
			return r.Context().Err()
		case <-timer.C:
		}
	}
	if c.next != nil {
		r.Body, c.next = c.next, nil
	}
	return nil
}

// checkRetry decides for the call. It retries when the request may
// be retried, retries are left, classify.Of says the attempt is retryable
// (a pending Result, read with settle.Hooks.OnSettle, is not),
// the wait fits under MaxDelay and before the deadline, the host's retry
// budget has room, and the body can be replayed. Before saying yes it drains and closes the response. It
// never returns an error, so the engine returns the real response or error.
func (c *call) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if c.left <= 0 || ctx.Err() != nil {
		return false, nil
	}
	// A pending Result (a 2xx answer judged as its body is read) is not
	// forced: it settles OK or Refused, neither retried, or fails as the
	// caller reads the body, too late for a retry.
	var (
		r       classify.Result
		settled = true
	)
	if err != nil {
		r = classify.Of(nil, unwrapClient(err))
	} else {
		r, settled = classifyHooks.OnSettle(resp, nil)
	}
	if !settled || !r.Retryable() {
		return false, nil
	}
	wait := c.p.backoff(int(c.attempts))
	if ra := r.RetryAfter; ra > 0 {
		if ra > c.p.MaxDelay {
			return false, nil // a wait the policy will not make: hand back the response
		}
		wait = max(wait, ra)
	}
	if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
		return false, nil
	}
	if c.budget != nil && !sharedFailure(err) && !c.budget.take(c.host) {
		return false, nil // over the host's retry budget: hand back the answer
	}
	if c.getBody != nil {
		b, gerr := c.getBody()
		if gerr != nil || b == nil {
			return false, nil // cannot replay: the first failure stands
		}
		c.next = b
	}
	if resp != nil && resp.Body != nil {
		discard(resp)
	}
	c.left--
	c.wait = wait
	return true, nil
}

// sharedFailure reports whether err is the failure of an attempt whose
// connection failed under several attempts at once (the streams of one
// HTTP/2 connection) after the first of them: that failure was counted
// with the first, and its retry spends no budget.
func sharedFailure(err error) bool {
	var s interface{ SharedFailure() bool }
	return err != nil && errors.As(err, &s) && s.SharedFailure()
}

// discard drains (up to drainLimit, and only if the body is not known to
// be longer) and closes a retried response's body. The body is replaced
// by http.NoBody so the engine's own drain reads nothing.
func discard(resp *http.Response) {
	if resp.ContentLength <= drainLimit {
		io.CopyN(io.Discard, resp.Body, drainLimit)
	}
	resp.Body.Close()
	resp.Body = http.NoBody
}

// errNoResponse is returned for an attempt whose RoundTripper returned no
// response and no error.
var errNoResponse = errors.New("retry: round tripper returned no response and no error")

// errNoCall is returned if attemptSender is reached without a call: a bug.
var errNoCall = errors.New("retry: attempt outside a call")

// attemptSender is the engine http.Client's RoundTripper: it makes one
// attempt through next, counting it in the call and bounding it by the
// attempt timeout. It deliberately has no CloseIdleConnections method.
type attemptSender struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (a *attemptSender) RoundTrip(r *http.Request) (*http.Response, error) {
	c, _ := r.Context().Value(callKey{}).(*call)
	if c == nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errNoCall
	}
	c.attempts++
	// The attempt number is read from the call (AttemptFrom); the request
	// is copied only when the attempt changes it.
	ar := r
	var cancel context.CancelFunc
	if a.timeout > 0 {
		var ctx context.Context
		ctx, cancel = c.startAttemptTimer(r.Context(), a.timeout)
		ar = r.WithContext(ctx)
	}
	if c.getBody != nil || c.url != nil {
		if ar == r {
			cp := *r
			ar = &cp
		}
		ar.GetBody = c.getBody
		if c.url != nil {
			ar.URL = c.url
		}
	}

	resp, err := a.next.RoundTrip(ar)
	if err != nil || resp == nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if cancel != nil {
			cancel()
		}
		if err == nil {
			err = errNoResponse
		}
		return nil, err
	}
	if cancel != nil {
		if resp.Body == nil {
			resp.Body = http.NoBody
		}
		resp.Body = releaseOnClose(resp.Body, cancel)
	}
	return resp, nil
}

// classifyHooks reaches package classify's plumbing.
var classifyHooks = settle.Get[classify.Result, classify.Config]()
