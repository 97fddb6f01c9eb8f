package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/hoststate/hoststatetest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/redisstore/redistest"
	"github.com/redis/go-redis/v9"
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

// TestScenariosCluster runs the scenarios through a *redis.ClusterClient
// against a one-node Redis Cluster, which refuses any script whose keys
// span slots: every script touches only its host's slot.
func TestScenariosCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true})
	defer client.Close()
	ctx := context.Background()
	if err := client.Eval(ctx, "return 1", []string{"{a}x", "{b}y"}).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a script over two slots = %v, want CROSSSLOT: the server must check slots", err)
	}
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
