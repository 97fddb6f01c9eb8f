package redisstore_test

import (
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session/sessionstore"
	"github.com/egresskit/egresskit/session/sessiontest"
)

// TestSessionScenarios runs the shared scenarios of sessiontest on a real
// Redis server, with the expectations the in-memory store meets; the
// scenario's fake clock is passed to every script.
func TestSessionScenarios(t *testing.T) {
	client := redistest.Client(t)
	sessiontest.Run(t, func(t *testing.T, now func() time.Time) sessionstore.Store {
		st, err := redisstore.NewSessionStore(client, redisstore.SessionConfig{Prefix: redistest.Prefix(t), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
