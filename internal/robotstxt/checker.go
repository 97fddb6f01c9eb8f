package robotstxt

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit/robots"
)

// minMaxSize is the smallest parsing limit RFC 9309 section 2.5 allows.
const minMaxSize = 500 << 10

// DefaultConfig returns the configuration a zero robots.Config stands
// for, with every default filled in.
func DefaultConfig() robots.Config {
	return withDefaults(robots.Config{})
}

func withDefaults(c robots.Config) robots.Config {
	if c.AgentToken == "" {
		c.AgentToken = AgentToken(c.UserAgent)
	} else {
		c.AgentToken = AgentToken(c.AgentToken)
	}
	if c.Transport == nil {
		c.Transport = http.DefaultTransport
	}
	if c.TTL <= 0 {
		c.TTL = 24 * time.Hour
	}
	if c.MaxSize < minMaxSize {
		c.MaxSize = minMaxSize
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = 5
	} else if c.MaxRedirects < 0 {
		c.MaxRedirects = 0
	}
	if c.FetchTimeout <= 0 {
		c.FetchTimeout = 30 * time.Second
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = time.Minute
	}
	if c.RetryMaxDelay <= 0 {
		c.RetryMaxDelay = time.Hour
	}
	c.RetryMaxDelay = max(c.RetryMaxDelay, c.RetryBaseDelay)
	if c.UnreachableLimit == 0 {
		c.UnreachableLimit = 30 * 24 * time.Hour
	}
	if c.MaxCrawlDelay == 0 {
		c.MaxCrawlDelay = time.Minute
	}
	if c.MaxHosts <= 0 {
		c.MaxHosts = 10_000
	}
	if c.MaxCacheBytes <= 0 {
		c.MaxCacheBytes = 64 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Checker answers whether URLs may be fetched under their hosts'
// robots.txt. It is safe for concurrent use and starts no goroutines.
type Checker struct {
	cfg robots.Config

	mu    sync.Mutex // guards hosts, lru, bytes and the fields of every entry
	hosts map[string]*entry
	lru   list.List // of *entry, most recently checked first
	bytes int64     // estimated bytes retained by all entries
}

// entry is the cached state of one host.
type entry struct {
	key  string
	elem *list.Element
	used time.Time // last Check

	ans   answer        // zero until the first fetch completes
	fails int           // consecutive unreachable fetches
	down  time.Time     // start of the current unreachable run
	fetch chan struct{} // non-nil while a fetch runs; closed when it ends
	size  int64
}

// answer is what one fetch established about a host.
type answer struct {
	source  robots.Source // Parsed, Unavailable or Unreachable
	rules   *Rules        // for Parsed
	expires time.Time
}

// New returns a Checker configured by cfg.
func New(cfg robots.Config) *Checker {
	return &Checker{cfg: withDefaults(cfg), hosts: make(map[string]*entry)}
}

// Check reports whether u may be fetched under the robots.txt of its host,
// fetching that file first when it is not cached. Concurrent checks of one
// host share one fetch; ctx bounds the fetch and the wait for another
// caller's fetch. A fetch that ctx ends is not cached.
//
// When u is disallowed, Check returns the Decision and a *DisallowedError:
// errors.Is ErrDisallowed when a rule forbids u, ErrTryLater (with Until,
// the next fetch) when robots.txt is unreachable. It returns an error matching ErrInvalidURL for
// a URL it cannot check, and one wrapping ctx.Err() when ctx ends first.
// A fetch that failed on the egress route (a proxy's failure, which says
// nothing about the host) returns its error and is not cached. Other
// failures of the fetch are not errors: they decide as RFC 9309 says (see
// Source).
func (c *Checker) Check(ctx context.Context, u *url.URL) (Decision, error) {
	t, err := c.target(u)
	if err != nil {
		return Decision{}, err
	}
	if t.path == "/robots.txt" {
		return Decision{Allowed: true, Source: robots.Implicit}, nil
	}
	for {
		now := c.cfg.Now()
		c.mu.Lock()
		e := c.touch(t.key, now)
		if e.ans.source != 0 && now.Before(e.ans.expires) {
			a := e.ans
			c.mu.Unlock()
			return c.decide(a, t, u)
		}
		if wait := e.fetch; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue // the fetch ended; re-read, or fetch if it was cancelled
			case <-ctx.Done():
				return Decision{}, fmt.Errorf("robots: waiting for robots.txt of %s: %w", t.host, ctx.Err())
			}
		}
		e.fetch = make(chan struct{})
		c.mu.Unlock()
		a, err := c.lead(ctx, e, t)
		if err != nil {
			return Decision{}, err
		}
		return c.decide(a, t, u)
	}
}

// lead runs the fetch for e, which the caller has marked in flight, stores
// its outcome and wakes the waiters. A fetch that ctx ends, or that panics,
// stores nothing; the waiters then retry it.
func (c *Checker) lead(ctx context.Context, e *entry, t target) (answer, error) {
	finish := func() {
		close(e.fetch)
		e.fetch = nil
	}
	finished := false
	defer func() {
		if !finished {
			c.mu.Lock()
			finish()
			c.mu.Unlock()
		}
	}()
	res, err := c.fetch(ctx, t)
	c.mu.Lock()
	defer c.mu.Unlock()
	finish()
	finished = true
	if err != nil {
		return answer{}, err
	}
	c.store(e, res, c.cfg.Now())
	return e.ans, nil
}

// target is what Check needs to know about a URL.
type target struct {
	key    string // cache key: scheme://host:port, host lower-cased
	scheme string // http or https
	host   string // u.Host: host and optional port, never user information
	path   string // escaped path
}

func (c *Checker) target(u *url.URL) (target, error) {
	if u == nil {
		return target{}, fmt.Errorf("%w: nil URL", ErrInvalidURL)
	}
	scheme := strings.ToLower(u.Scheme)
	port := ""
	switch scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return target{}, fmt.Errorf("%w: scheme is not http or https", ErrInvalidURL)
	}
	host := u.Hostname()
	if host == "" {
		return target{}, fmt.Errorf("%w: empty host", ErrInvalidURL)
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(u.Host, "[") {
		return target{}, fmt.Errorf("%w: malformed port", ErrInvalidURL)
	}
	if p := u.Port(); p != "" {
		port = p
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return target{
		key:    scheme + "://" + net.JoinHostPort(host, port),
		scheme: scheme,
		host:   u.Host,
		path:   escapedPath(u),
	}, nil
}

// decide applies answer a to the URL.
func (c *Checker) decide(a answer, t target, u *url.URL) (Decision, error) {
	d := Decision{Source: a.source, Expires: a.expires}
	switch a.source {
	case robots.Parsed:
		d.Allowed = a.rules.allowed(matchTarget(t.path, u))
		if delay, ok := a.rules.CrawlDelay(); ok && c.cfg.MaxCrawlDelay > 0 {
			d.CrawlDelay = min(delay, c.cfg.MaxCrawlDelay)
		}
	case robots.Unavailable:
		d.Allowed = true
	}
	if !d.Allowed {
		de := &robots.DisallowedError{Host: t.host, Path: t.path, Source: a.source}
		if a.source == robots.Unreachable {
			de.Until = a.expires
		}
		return d, de
	}
	return d, nil
}

// touch returns the entry of key, created if missing, and marks it used.
// c.mu must be held.
func (c *Checker) touch(key string, now time.Time) *entry {
	e := c.hosts[key]
	if e == nil {
		e = &entry{key: key}
		e.elem = c.lru.PushFront(e)
		c.hosts[key] = e
		c.resize(e, 0)
	} else {
		c.lru.MoveToFront(e.elem)
	}
	e.used = now
	c.evict(now, e)
	return e
}

// store records the result of a fetch in e. c.mu must be held.
func (c *Checker) store(e *entry, res fetchResult, now time.Time) {
	switch res.source {
	case robots.Unreachable:
		if e.fails == 0 {
			e.down = now
		}
		e.fails++
		e.ans = answer{source: robots.Unreachable, expires: now.Add(c.backoff(e.fails))}
		if c.cfg.UnreachableLimit > 0 && now.Sub(e.down) >= c.cfg.UnreachableLimit {
			e.ans.source = robots.Unavailable
		}
	default:
		e.fails, e.down = 0, time.Time{}
		e.ans = answer{source: res.source, rules: res.rules, expires: now.Add(c.cfg.TTL)}
	}
	c.resize(e, e.ans.rules.size())
	c.evict(now, e)
}

// backoff returns the wait after the n-th consecutive unreachable fetch.
func (c *Checker) backoff(n int) time.Duration {
	d := c.cfg.RetryBaseDelay
	for i := 1; i < n && d < c.cfg.RetryMaxDelay; i++ {
		d *= 2
	}
	return min(d, c.cfg.RetryMaxDelay)
}

// resize sets the size accounted to e. c.mu must be held.
func (c *Checker) resize(e *entry, rules int64) {
	size := int64(200+len(e.key)) + rules
	c.bytes += size - e.size
	e.size = size
}

// evict drops least recently checked entries while the cache is over its
// bounds, and entries not checked for a TTL. Entries with a fetch in flight
// and keep, the entry in use, stay. c.mu must be held.
func (c *Checker) evict(now time.Time, keep *entry) {
	for el := c.lru.Back(); el != nil; {
		e := el.Value.(*entry)
		prev := el.Prev()
		over := len(c.hosts) > c.cfg.MaxHosts || c.bytes > c.cfg.MaxCacheBytes
		if !over && now.Sub(e.used) < c.cfg.TTL {
			return
		}
		if e.fetch == nil && e != keep {
			c.lru.Remove(el)
			delete(c.hosts, e.key)
			c.bytes -= e.size
		}
		el = prev
	}
}
