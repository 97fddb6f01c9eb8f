package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// TestMemoryStoreStaysBounded creates sessions that expire, wave after
// wave: the store holds the live ones and at most as many expired ones.
func TestMemoryStoreStaysBounded(t *testing.T) {
	clock := newClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := session.NewMemoryStore(clock.Now)
	ctx := context.Background()
	const wave = 5000
	maxLen := 0
	for w := range 20 {
		for i := range wave {
			now := clock.Now()
			r := sessionstore.Record{ID: fmt.Sprintf("w%d-%d", w, i), Created: now, Expires: now.Add(time.Minute)}
			if err := st.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		maxLen = max(maxLen, st.(interface{ Len() int }).Len())
		clock.Advance(time.Minute)
	}
	if maxLen > 2*wave+1024 {
		t.Errorf("store held up to %d records with %d live at a time, want at most %d", maxLen, wave, 2*wave+1024)
	}
}
