package egresskit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit/hoststate"
)

// ErrOutOfScope is returned for a request to a host that Config.Scope does
// not allow. Match it with errors.Is; the error is a *ScopeError.
var ErrOutOfScope = errors.New("egresskit: host out of scope")

// ScopeError reports a host refused by the scope check.
type ScopeError struct {
	Host string // the host key
	Err  error  // the reason: ErrOutOfScope or the error of Scope.Check
}

func (e *ScopeError) Error() string {
	return fmt.Sprintf("egresskit: host %s out of scope: %v", e.Host, e.Err)
}

// Unwrap returns ErrOutOfScope and the underlying reason.
func (e *ScopeError) Unwrap() []error { return []error{ErrOutOfScope, e.Err} }

// Scope decides which hosts the crawler may visit. Host patterns are host
// keys ("example.com", "example.com:8080"); a pattern starting with "." also
// matches every subdomain (".example.com" matches "a.example.com" and
// "example.com"). The zero Scope allows every host.
type Scope struct {
	// Allow, when not empty, lists the only hosts that may be visited.
	Allow []string
	// Deny lists hosts that may never be visited; it wins over Allow.
	Deny []string
	// Check, when set, is called last with the host key; a non-nil error
	// refuses the host and is wrapped in the ScopeError.
	Check func(host string) error
}

func (s *Scope) check(host string) error {
	for _, p := range s.Deny {
		if matchHost(p, host) {
			return &ScopeError{Host: host, Err: errors.New("denied")}
		}
	}
	if len(s.Allow) > 0 {
		ok := false
		for _, p := range s.Allow {
			if matchHost(p, host) {
				ok = true
				break
			}
		}
		if !ok {
			return &ScopeError{Host: host, Err: errors.New("not in allow list")}
		}
	}
	if s.Check != nil {
		if err := s.Check(host); err != nil {
			return &ScopeError{Host: host, Err: err}
		}
	}
	return nil
}

func matchHost(pattern, host string) bool {
	pattern = strings.ToLower(strings.TrimSuffix(pattern, "."))
	if strings.HasPrefix(pattern, ".") {
		return host == pattern[1:] || strings.HasSuffix(host, pattern)
	}
	return host == pattern
}

// ceilingCache remembers the robots.txt Crawl-delay last applied per host so
// that the state store is told only when it changes, and again after
// ceilingRefresh, so that a host whose state was evicted while idle gets its
// ceiling back. It is bounded: when it is full it is cleared, which costs at
// most one repeated SetCeiling per host.
type ceilingCache struct {
	mu sync.Mutex // guards m
	m  map[string]ceiling
}

type ceiling struct {
	delay   time.Duration
	applied time.Time
}

const (
	maxCeilings    = 1 << 16
	ceilingRefresh = time.Minute
)

func (c *ceilingCache) apply(ctx context.Context, s hoststate.Store, host string, delay time.Duration) error {
	now := time.Now()
	c.mu.Lock()
	prev, seen := c.m[host]
	if (seen && prev.delay == delay && now.Sub(prev.applied) < ceilingRefresh) || (!seen && delay <= 0) {
		c.mu.Unlock()
		return nil
	}
	if c.m == nil || len(c.m) >= maxCeilings {
		c.m = make(map[string]ceiling)
	}
	c.m[host] = ceiling{delay: delay, applied: now}
	c.mu.Unlock()
	perMinute := 0.0
	if delay > 0 {
		perMinute = float64(time.Minute) / float64(delay)
	}
	return s.SetCeiling(ctx, host, perMinute)
}

func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse errors quote the URL, which may hold credentials.
		return nil, fmt.Errorf("%w: malformed URL", ErrInvalidRequest)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: no host", ErrInvalidRequest)
	}
	return u, nil
}
