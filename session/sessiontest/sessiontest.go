// Package sessiontest holds the behaviour scenarios every session.Store
// must pass, so the in-memory store and the Redis store are proven to
// agree. A store's tests call Run with a factory:
//
//	func TestStore(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T, now func() time.Time) session.Store {
//			return session.NewMemoryStore(session.MemoryConfig{Now: now})
//		})
//	}
//
// The factory must return a store that decides every expiry — of records
// and of leases — with now, the scenario's fake clock, which the scenarios
// advance; a store must keep times to at least millisecond precision.
// Scenarios use random session IDs, so stores over a shared server need
// not be emptied between them. Some scenarios start httptest servers on
// the loopback interface.
package sessiontest

import (
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
)

// Factory returns a Store whose clock is now.
type Factory func(t *testing.T, now func() time.Time) session.Store

// Clock is a fake clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is what a scenario runs with.
type env struct {
	store session.Store
	clock *Clock
	keys  *session.Keyring // shared by the scenario's Managers
}

type scenario struct {
	name string
	run  func(t *testing.T, e env)
}

// Run runs every scenario as a subtest, each with a fresh Store from
// newStore and a fresh Clock.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	all := append(append([]scenario(nil), storeScenarios...), managerScenarios...)
	for _, sc := range all {
		t.Run(sc.name, func(t *testing.T) {
			// Millisecond-aligned, near the real time, so a store that
			// also expires keys physically keeps them long enough.
			clock := NewClock(time.Now().Truncate(time.Millisecond))
			keys, err := session.NewKeyring(session.GenerateKey(1))
			if err != nil {
				t.Fatal(err)
			}
			sc.run(t, env{store: newStore(t, clock.Now), clock: clock, keys: keys})
		})
	}
}
