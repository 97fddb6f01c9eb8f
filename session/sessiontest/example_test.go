package sessiontest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessiontest"
)

// A Clock drives a store's expiry without waiting.
func ExampleClock() {
	clock := sessiontest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := session.NewMemoryStore(session.MemoryConfig{Now: clock.Now})
	ctx := context.Background()
	err := store.Create(ctx, session.Record{ID: "s1", Created: clock.Now(), Expires: clock.Now().Add(time.Minute)})
	fmt.Println(err)

	clock.Advance(time.Minute)
	_, err = store.Get(ctx, "s1", session.PartAll)
	fmt.Println(errors.Is(err, session.ErrNotFound))
	// Output:
	// <nil>
	// true
}
