package retrier

import (
	"sync"
	"time"
)

// The retry budget's window and its floor: retries to a host may add at
// most a share of the requests it received over about the last
// budgetWindow, and budgetMin retries in any window whatever the share —
// one a second: a host answering a few percent of a modest crawl's
// requests with a stray 429 or 503 has every one retried (at 2 % of 30
// requests a window, eleven come in one window once in about 2·10^10
// windows; with a floor of 3, four came once in about 300, and a broad
// crawl over 200 hosts handed a 429 back to its caller every few runs),
// and a failing host still gets at most one retry a second beyond the
// share.
const (
	budgetWindow = 10 * time.Second
	budgetMin    = 10
)

// budget limits retries per host to a share of its recent requests, so
// that a struggling host is not sent several retries per request. Counts
// are kept over a sliding window: the current window's count plus the
// previous one's weighted by the part of it still in range. Hosts idle for
// two windows are forgotten. It is safe for concurrent use.
type budget struct {
	share float64
	now   func() time.Time

	mu    sync.Mutex // guards hosts, swept, last and lastHost
	hosts map[string]*budgetCounts
	swept time.Time
	// last is hosts[lastHost], the entry found last, or nil: a request's
	// count and its retries' come in a row for one host, and a crawl
	// often sends several requests to a host in a row.
	last     *budgetCounts
	lastHost string
}

// budgetCounts is one host's requests and retries, in the window that
// began at start and in the one before.
type budgetCounts struct {
	start                time.Time
	requests, retries    float64
	prevReqs, prevRetrys float64
}

func newBudget(share float64, now func() time.Time) *budget {
	return &budget{share: share, now: now, hosts: map[string]*budgetCounts{}}
}

// roll brings c's windows to now and returns the weight of the previous
// one.
func (c *budgetCounts) roll(now time.Time) float64 {
	switch d := now.Sub(c.start); {
	case d >= 2*budgetWindow:
		*c = budgetCounts{start: now}
	case d >= budgetWindow:
		c.prevReqs, c.prevRetrys = c.requests, c.retries
		c.requests, c.retries = 0, 0
		c.start = c.start.Add(budgetWindow)
	}
	return 1 - float64(now.Sub(c.start))/float64(budgetWindow)
}

// counts returns host's counts, forgetting first, at most once every two
// windows, the hosts idle for two windows. b.mu must be held.
func (b *budget) counts(host string, now time.Time) *budgetCounts {
	if now.Sub(b.swept) >= 2*budgetWindow {
		for h, c := range b.hosts {
			if now.Sub(c.start) >= 2*budgetWindow {
				delete(b.hosts, h)
			}
		}
		b.swept = now
		b.last = nil // it may be gone from hosts
	}
	if b.last != nil && b.lastHost == host {
		return b.last
	}
	c := b.hosts[host]
	if c == nil {
		c = &budgetCounts{start: now}
		b.hosts[host] = c
	}
	b.last, b.lastHost = c, host
	return c
}

// request counts a request to host, and returns the time it read to
// count it.
func (b *budget) request(host string) time.Time {
	now := b.now()
	b.mu.Lock()
	c := b.counts(host, now)
	c.roll(now)
	c.requests++
	b.mu.Unlock()
	return now
}

// take reports whether a retry to host fits in the budget, and counts it
// when it does.
func (b *budget) take(host string) bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.counts(host, now)
	w := c.roll(now)
	retries := c.retries + w*c.prevRetrys
	requests := c.requests + w*c.prevReqs
	if retries+1 > max(budgetMin, b.share*requests) {
		return false
	}
	c.retries++
	return true
}
