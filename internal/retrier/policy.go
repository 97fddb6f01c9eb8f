package retrier

import (
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/retry"
)

// policy is a retry.Policy with the methods the Transport needs.
type policy retry.Policy

// Defaults of Policy.
const (
	defaultMaxRetries = 3
	defaultBaseDelay  = 500 * time.Millisecond
	defaultMaxDelay   = 30 * time.Second
	defaultBudget     = 0.2
)

// DefaultPolicy returns the zero retry.Policy's meaning with every default
// filled in, for printing (egresskit.DefaultConfig): 3 retries, a 500ms
// base delay, a 30s cap, no timeouts, idempotent requests only, a retry
// budget of 20 % per host. A Transport needs it no more than the zero
// Policy.
func DefaultPolicy() retry.Policy {
	return retry.Policy{
		MaxRetries: defaultMaxRetries,
		BaseDelay:  defaultBaseDelay,
		MaxDelay:   defaultMaxDelay,
		Budget:     defaultBudget,
	}
}

// check reports why p cannot be honoured, naming the field, or nil.
func (p policy) check() error {
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
func (p policy) normalized() policy {
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
func (p *policy) backoff(n int) time.Duration {
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
