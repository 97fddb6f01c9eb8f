package sessiontest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// A clock drives a store's expiry without waiting.
func TestClockDrivesExpiry(t *testing.T) {
	clock := newClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := session.NewMemoryStore(clock.Now)
	ctx := context.Background()
	if err := store.Create(ctx, sessionstore.Record{ID: "s1", Created: clock.Now(), Expires: clock.Now().Add(time.Minute)}); err != nil {
		t.Fatalf("Create = %v, want nil", err)
	}
	clock.Advance(time.Minute)
	if _, err := store.Get(ctx, "s1", sessionstore.PartFields|sessionstore.PartCookies); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get after the record's expiry = %v, want ErrNotFound", err)
	}
}
