// Package sessiontest holds the behaviour scenarios every sessionstore.Store
// must pass, for a store implementer: the in-memory store and the Redis
// store are proven to agree. A store's tests call Run with a factory:
//
//	func TestStore(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T, now func() time.Time) sessionstore.Store {
//			return session.NewMemoryStore(now)
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
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// newClock returns a clock reading t.
func newClock(t time.Time) *clock { return &clock{t: t} }

// Now returns the clock's time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is what a scenario runs with.
type env struct {
	store sessionstore.Store
	clock *clock
	keys  *session.Keyring // shared by the scenario's Managers
}

type scenario struct {
	name string
	run  func(t *testing.T, e env)
}

// Run runs every scenario as a subtest, each with a fresh Store from
// newStore, whose clock is now, and a fresh fake clock.
func Run(t *testing.T, newStore func(t *testing.T, now func() time.Time) sessionstore.Store) {
	t.Helper()
	all := append(append([]scenario(nil), storeScenarios...), managerScenarios...)
	for _, sc := range all {
		t.Run(sc.name, func(t *testing.T) {
			// Millisecond-aligned, near the real time, so a store that
			// also expires keys physically keeps them long enough.
			clock := newClock(time.Now().Truncate(time.Millisecond))
			keys, err := session.NewKeyring(newKey(1))
			if err != nil {
				t.Fatal(err)
			}
			sc.run(t, env{store: newStore(t, clock.Now), clock: clock, keys: keys})
		})
	}
}

// newKey returns a Key with id and fresh random key material.
func newKey(id uint32) session.Key {
	b := make([]byte, 32)
	rand.Read(b) // never returns an error (crypto/rand, Go 1.24+)
	return session.Key{ID: id, Secret: session.Secret(b)}
}
