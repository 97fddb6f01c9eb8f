package redisstore_test

import (
	"testing"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/hoststate/hoststatetest"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// TestScenarios runs the shared behaviour scenarios of hoststatetest on a
// real Redis server, with the expectations the in-memory store meets. The
// fake clock is passed to every script; Evict is nil because the Redis
// store forgets idle hosts by time alone.
func TestScenarios(t *testing.T) {
	client := redistest.Client(t)
	hoststatetest.Run(t, func(t *testing.T, cfg hoststate.Config, body func(*testing.T, hoststatetest.Env)) {
		clk := newClock()
		st, err := redisstore.New(client, redisstore.Config{
			Prefix:       redistest.Prefix(t),
			HostState:    cfg,
			OnRedisError: redisstore.FailClosed,
			Timeout:      testTimeout,
			Now:          clk.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		body(t, hoststatetest.Env{Store: st, Now: clk.Now, Advance: clk.Advance})
	})
}
