package testprog

import (
	"maps"
	"net/http"
	"sync"
)

// StatusCounter is an http.RoundTripper over an http.Transport that counts
// the answers it gets, by status: the politeness tests count a limiter's
// answers at the client, since HAProxy keeps no access log to count them
// in.
type StatusCounter struct {
	next *http.Transport
	mu   sync.Mutex // guards n
	n    map[int]int
}

// NewStatusCounter returns a StatusCounter over an http.Transport keeping
// idle connections idle per host.
func NewStatusCounter(idle int) *StatusCounter {
	return &StatusCounter{next: &http.Transport{MaxIdleConnsPerHost: idle}, n: map[int]int{}}
}

// RoundTrip sends req and counts the status of its answer.
func (c *StatusCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		c.n[resp.StatusCode]++
		c.mu.Unlock()
	}
	return resp, err
}

// CloseIdleConnections closes the idle connections of the transport
// below.
func (c *StatusCounter) CloseIdleConnections() { c.next.CloseIdleConnections() }

// Statuses returns how many answers had each status.
func (c *StatusCounter) Statuses() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}
