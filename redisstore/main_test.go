package redisstore_test

import (
	"context"
	"crypto/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/session"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(envWorker); spec != "" {
		os.Exit(runWorker(spec)) // a worker process of TestFleetProcesses
	}
	// The fault tests make go-redis log every refused dial; they are
	// expected.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(redistest.Main(m))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// clockAt returns a clock reading t.
func clockAt(t time.Time) *clock { return &clock{t: t} }

// newKey returns a session Key with id and fresh random key material.
func newKey(id uint32) session.Key {
	b := make([]byte, 32)
	rand.Read(b) // never returns an error (crypto/rand, Go 1.24+)
	return session.Key{ID: id, Secret: session.Secret(b)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testTimeout is the Redis timeout of tests that must not fail over to
// local state on a loaded machine.
const testTimeout = 5 * time.Second
