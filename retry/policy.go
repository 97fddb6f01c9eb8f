package retry

import (
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/egresskit/egresskit/internal/configerr"
)

// Policy configures a Transport. The zero value is the recommended
// policy: 3 jittered retries of idempotent requests. As everywhere in this
// module, zero means the documented default and a negative number means
// "none" or "off"; a setting that cannot be off is refused by New when
// negative.
//
// Every zero value, in one place:
//
//	MaxRetries          0: 3 retries (negative: none)
//	BaseDelay           0: 500ms (negative: no backoff, only Retry-After)
//	MaxDelay            0: 30s (negative: refused; a server-chosen wait is always capped)
//	AttemptTimeout      0: no per-attempt limit (negative: the same)
//	Deadline            0: no overall limit (negative: the same)
//	RetryNonIdempotent  false: POST, PATCH, ... are sent once
//	Rand                nil: math/rand/v2's Int64N
type Policy struct {
	// MaxRetries is the number of retries after the first attempt. 0
	// means 3; a negative value means none.
	MaxRetries int

	// BaseDelay is the backoff ceiling of the first retry; the ceiling
	// doubles with each retry up to MaxDelay, and the wait is drawn
	// uniformly below it (full jitter). 0 means 500ms; a negative value
	// means no backoff: only Retry-After is waited for.
	BaseDelay time.Duration

	// MaxDelay caps every single wait, Retry-After included. A response
	// asking for a longer wait is not retried: it is returned as it is, so
	// the caller sees the real 429 and the layers below can pause the
	// host. 0 means 30s; a negative value is refused by New (a wait chosen
	// by the server is never uncapped).
	MaxDelay time.Duration

	// AttemptTimeout bounds each attempt, from sending the request to
	// closing its response body. An attempt cut by it fails with an error
	// matching classify.ErrAttemptTimeout, which classifies as Transient,
	// and so is retried. 0 or negative means no per-attempt limit.
	AttemptTimeout time.Duration

	// Deadline bounds the whole request: every attempt, every wait, and
	// reading the final response body, like http.Client.Timeout. A wait
	// that would end past it (or past the request context's deadline) is
	// not started: the last response or error is returned instead. 0 or
	// negative means no overall limit.
	Deadline time.Duration

	// RetryNonIdempotent allows retrying requests whose method is not
	// idempotent (RFC 9110 §9.2.2: POST, PATCH, CONNECT, ...). Without it,
	// only GET, HEAD, OPTIONS, TRACE, PUT and DELETE are retried, and any
	// request carrying an Idempotency-Key or X-Idempotency-Key header (the
	// same opt-in net/http honours). Default false.
	RetryNonIdempotent bool

	// Budget is the share of a host's recent requests (over about the
	// last 10 s) that retries may add: with a host failing, each request
	// is not retried MaxRetries times, and a retry over the budget is not
	// made — the last answer is returned. Whatever the share, 3 retries
	// in 10 s are allowed. 0 means 0.2; a negative value means no budget.
	// Hosts are told apart by their URL host (the chain's host key when
	// under egresskit's chain).
	Budget float64

	// Rand returns a uniformly distributed pseudo-random number in [0, n)
	// for n > 0; it draws the jitter and must be safe for concurrent use.
	// Tests inject a deterministic one. Nil means math/rand/v2's Int64N.
	Rand func(n int64) int64
}

// Defaults of Policy.
const (
	defaultMaxRetries = 3
	defaultBaseDelay  = 500 * time.Millisecond
	defaultMaxDelay   = 30 * time.Second
	defaultBudget     = 0.2
)

// DefaultPolicy returns the zero Policy's meaning with every default
// filled in, for printing: 3 retries, a 500ms base delay, a 30s cap, no
// timeouts, idempotent requests only, a retry budget of 20 % per host. A Transport needs it no more than
// the zero Policy.
func DefaultPolicy() Policy {
	return Policy{
		MaxRetries: defaultMaxRetries,
		BaseDelay:  defaultBaseDelay,
		MaxDelay:   defaultMaxDelay,
		Budget:     defaultBudget,
	}
}

// check reports why p cannot be honoured, naming the field, or nil.
func (p Policy) check() error {
	switch {
	case p.MaxDelay < 0:
		return configerr.Field("MaxDelay", "is %v, negative: a server-chosen wait is always capped (0 means %v)", p.MaxDelay, defaultMaxDelay)
	case p.BaseDelay > 0 && p.MaxDelay > 0 && p.BaseDelay > p.MaxDelay:
		return configerr.Field("BaseDelay", "is %v, above MaxDelay %v", p.BaseDelay, p.MaxDelay)
	case p.Budget != p.Budget || p.Budget > math.MaxFloat64:
		return configerr.Field("Budget", "is %v, not a finite number (0 means %v; negative: no budget)", p.Budget, defaultBudget)
	case p.BaseDelay > 0 && p.MaxDelay == 0 && p.BaseDelay > defaultMaxDelay:
		return configerr.Field("BaseDelay", "is %v, above the default MaxDelay %v", p.BaseDelay, defaultMaxDelay)
	}
	return nil
}

// normalized returns p with the defaults filled in: MaxRetries ≥ 0,
// BaseDelay ≥ 0, MaxDelay > 0, timeouts ≥ 0 and Rand set.
func (p Policy) normalized() Policy {
	switch {
	case p.MaxRetries == 0:
		p.MaxRetries = defaultMaxRetries
	case p.MaxRetries < 0:
		p.MaxRetries = 0
	}
	switch {
	case p.BaseDelay == 0:
		p.BaseDelay = defaultBaseDelay
	case p.BaseDelay < 0:
		p.BaseDelay = 0
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = defaultMaxDelay
	}
	if p.Budget == 0 {
		p.Budget = defaultBudget
	}
	p.AttemptTimeout = max(p.AttemptTimeout, 0)
	p.Deadline = max(p.Deadline, 0)
	if p.Rand == nil {
		p.Rand = rand.Int64N
	}
	return p
}

// backoff returns the jittered wait before retry number n (1-based): a
// uniform draw in [0, min(MaxDelay, BaseDelay·2^(n-1))), AWS "full jitter".
//
// Full jitter rather than decorrelated jitter: both spread a fleet's
// retries about equally well (AWS, "Exponential Backoff and Jitter"), but
// full jitter depends only on the retry number, so it needs no state
// carried between attempts, is bounded by a ceiling a reader can compute,
// and combines simply with Retry-After, which is taken as a floor.
func (p *Policy) backoff(n int) time.Duration {
	ceil := p.MaxDelay
	if p.BaseDelay <= 0 {
		return 0
	}
	if shift := max(n-1, 0); shift < 62 {
		if d := p.BaseDelay << shift; d > 0 && d>>shift == p.BaseDelay && d < ceil {
			ceil = d
		}
	}
	d := time.Duration(p.Rand(int64(ceil)))
	if d < 0 || d >= ceil { // a misbehaving injected Rand
		d = ceil
	}
	return d
}

// idempotent reports whether req may be sent twice without a different
// effect: RFC 9110 §9.2.2 methods, or an idempotency key header, whose
// mere presence counts (as in net/http).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	_, ok := req.Header["X-Idempotency-Key"]
	return ok
}
