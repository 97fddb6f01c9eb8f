package session_test

import (
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessiontest"
)

func TestMemoryStore(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T, now func() time.Time) session.Store {
		return session.NewMemoryStore(session.MemoryConfig{Now: now})
	})
}
