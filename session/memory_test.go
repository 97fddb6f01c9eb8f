package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
	"github.com/egresskit/egresskit/session/sessiontest"
)

func TestMemoryStore(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T, now func() time.Time) sessionstore.Store {
		return session.NewMemoryStore(now)
	})
}

// Acquire while another holder's lease is live names that lease's expiry.
func TestMemoryLeaseHeldExpiry(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := session.NewMemoryStore(func() time.Time { return now })
	ctx := context.Background()
	if err := st.Create(ctx, sessionstore.Record{ID: "s1", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l1, err := st.Acquire(ctx, "s1", "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Acquire(ctx, "s1", "B", time.Minute)
	var held *sessionkit.LeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, session.ErrLeaseHeld) || !held.Expires.Equal(l1.Expires) || held.ID != "s1" {
		t.Errorf("Acquire(B) while A holds = %v, want a LeaseHeldError expiring %v", err, l1.Expires)
	}
}
