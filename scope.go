package egresskit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
// ceiling back. A ceiling is remembered only once SetCeiling took it: after
// a failure the next request tells the store again. Hosts are looked up
// without a lock shared by all hosts. It is bounded: when it holds more
// than maxCeilings hosts it is cleared, which costs at most one repeated
// SetCeiling per host.
type ceilingCache struct {
	m sync.Map     // host key → ceiling
	n atomic.Int64 // hosts stored in m since it was last cleared
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
	v, seen := c.m.Load(host)
	if seen {
		if prev := v.(ceiling); prev.delay == delay && now.Sub(prev.applied) < ceilingRefresh {
			return nil
		}
	} else if delay <= 0 {
		return nil
	}
	perMinute := 0.0
	if delay > 0 {
		perMinute = float64(time.Minute) / float64(delay)
	}
	if err := s.SetCeiling(ctx, host, perMinute); err != nil {
		return err
	}
	applied := ceiling{delay: delay, applied: now}
	if _, loaded := c.m.Swap(host, applied); !loaded && c.n.Add(1) > maxCeilings {
		c.m.Clear()
		c.n.Store(1)
		c.m.Store(host, applied)
	}
	return nil
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
