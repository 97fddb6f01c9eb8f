package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
)

// Error is the error the chain returns when an attempt fails without a
// response. It carries the attempt's Result; Of reads it back through any
// wrapping (http.Client wraps it in *url.Error). A crawler author reaches
// it through Of, or errors.As for the underlying Err.
type Error struct {
	// Result is the classification of the failed attempt.
	Result Result
	// Err is the error the next RoundTripper returned.
	Err error
}

// Error returns the text of the underlying error, unchanged.
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Err == nil {
		return "classify: " + e.Result.Reason
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Timeout reports whether the underlying error is a timeout, so that
// url.Error.Timeout and net.Error checks see through the wrapping.
func (e *Error) Timeout() bool {
	t, ok := errors.AsType[interface {
		error
		Timeout() bool
	}](e.Unwrap())
	return ok && t.Timeout()
}

// Errors reported or recognised by this package.
var (
	// ErrTooManyRedirects may be returned (or wrapped) by an
	// http.Client CheckRedirect function; it classifies as Permanent, like
	// the default policy's "stopped after 10 redirects".
	ErrTooManyRedirects = errors.New("classify: too many redirects")
	// ErrAttemptTimeout is the cancellation cause that marks a
	// per-attempt timeout. A layer bounds an attempt with
	// context.WithTimeoutCause(ctx, d, ErrAttemptTimeout); when that fires the attempt is Transient, a host
	// failure, while the end of the caller's own context is Canceled. It
	// matches context.DeadlineExceeded with errors.Is and reports
	// Timeout() true.
	ErrAttemptTimeout error = attemptTimeoutError{}
)

type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string        { return "classify: attempt timed out" }
func (attemptTimeoutError) Timeout() bool        { return true }
func (attemptTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Errors of the classifying transport.
var (
	// errNilRequest is returned by transport.RoundTrip for a nil request
	// or a request without a URL; its Result is Permanent.
	errNilRequest = errors.New("classify: nil request or request URL")
	// errNoResponse is returned by transport.RoundTrip when the next
	// RoundTripper returned neither a response nor an error; its Result is
	// Transient.
	errNoResponse = errors.New("classify: round tripper returned no response and no error")
)

// contextOutcome classifies an attempt whose request context has ended
// after it was sent: a deadline (the attempt timeout, the caller's own
// deadline, http.Client.Timeout) is the host's failure to answer in time;
// only a cancellation is the caller's own doing.
func contextOutcome(ctx context.Context) (Outcome, string) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrAttemptTimeout):
		return Transient, "attempt timeout"
	case errors.Is(cause, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
		return Transient, "timeout"
	}
	return Canceled, "canceled"
}

// errorsAsError finds a non-nil *Error in err's chain.
func errorsAsError(err error) (*Error, bool) {
	ce, ok := errors.AsType[*Error](err)
	return ce, ok && ce != nil
}

// classifyError classifies a failed attempt; ctx is the request's context,
// nil when unknown. See Classify for the rules.
func (c *classifier) classifyError(ctx context.Context, err error) Result {
	if ce, ok := errorsAsError(err); ok {
		return ce.Result
	}
	r := Result{}
	switch {
	case ctx != nil && ctx.Err() != nil:
		r.Outcome, r.Reason = contextOutcome(ctx)
	case errors.Is(err, ErrAttemptTimeout):
		r.Outcome, r.Reason = Transient, "attempt timeout"
	case anyInChain(err, isNotSent):
		r.Outcome, r.Reason, r.Egress = Permanent, "not sent", true
	case anyInChain(err, isEgressFault):
		r.Outcome, r.Reason, r.Egress = Transient, "egress failure", true
	case ctx == nil && anyInChain(err, isDeadlineError):
		r.Outcome, r.Reason = Transient, "timeout"
	case ctx == nil && anyInChain(err, isCancelError):
		r.Outcome, r.Reason = Canceled, "canceled"
	case errors.Is(err, ErrTooManyRedirects) || anyInChain(err, isRedirectLimit):
		r.Outcome, r.Reason = Permanent, "too many redirects"
	case isCertificateError(err):
		r.Outcome, r.Reason = Permanent, "tls certificate"
	case errors.Is(err, errNilRequest) || anyInChain(err, isInvalidRequest):
		r.Outcome, r.Reason = Permanent, "invalid request"
	case isTimeout(err):
		r.Outcome, r.Reason = Transient, "timeout"
	default:
		r.Outcome, r.Reason = Transient, "network error"
	}
	return r
}

// isEgressFault matches errors that blame the egress route (a proxy that
// cannot be dialled, refuses our credentials, or fails on its own) rather
// than the target: they implement EndpointFault() bool and return true.
// classify imports no egress package; the method is the contract.
func isEgressFault(e error) bool {
	f, ok := e.(interface{ EndpointFault() bool })
	return ok && f.EndpointFault()
}

// isNotSent matches errors of a layer that decided not to send the request
// at all (no usable egress endpoint, a session's endpoint gone): they
// implement NotSent() bool and return true. Retrying them would fail the
// same way, and the target was never asked.
func isNotSent(e error) bool {
	f, ok := e.(interface{ NotSent() bool })
	return ok && f.NotSent()
}

// isCancelError matches context.Canceled by identity.
func isCancelError(e error) bool { return e == context.Canceled }

// isDeadlineError matches context.DeadlineExceeded by identity, and
// http.Client's Client.Timeout error, which replaces the chain with text.
func isDeadlineError(e error) bool {
	if e == context.DeadlineExceeded {
		return true
	}
	return isLeaf(e) && strings.Contains(errorText(e), "(Client.Timeout ")
}

// isRedirectLimit matches http.Client's default CheckRedirect error,
// "stopped after N redirects", which has no exported sentinel.
func isRedirectLimit(e error) bool {
	if !isLeaf(e) {
		return false
	}
	s := errorText(e)
	return strings.HasPrefix(s, "stopped after ") && strings.HasSuffix(s, " redirects")
}

// isInvalidRequest matches net/http's errors for requests that can never be
// sent, which have no exported sentinels.
func isInvalidRequest(e error) bool {
	if !isLeaf(e) {
		return false
	}
	s := errorText(e)
	return strings.HasPrefix(s, "unsupported protocol scheme") ||
		s == "http: no Host in request URL" ||
		s == "http: nil Request.URL"
}

func isCertificateError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.SystemRootsError](err)
	return ok
}

func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// errorText returns e.Error(), or "" when that panics (an x509.HostnameError
// without a certificate does).
func errorText(e error) (s string) {
	defer func() {
		if recover() != nil {
			s = ""
		}
	}()
	return e.Error()
}

// isLeaf reports whether e wraps nothing.
func isLeaf(e error) bool {
	switch e.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		return false
	}
	return true
}

// maxChain bounds the walk of an error chain.
const maxChain = 64

// anyInChain reports whether f holds for err or any error it wraps, without
// the Is methods errors.Is would consult.
func anyInChain(err error, f func(error) bool) bool {
	budget := maxChain
	return walkChain(err, f, &budget)
}

func walkChain(err error, f func(error) bool, budget *int) bool {
	for err != nil && *budget > 0 {
		*budget--
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walkChain(e, f, budget) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
