package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// TestUpgradeFromHash: the hash an older version kept a host's state in
// (PREFIX:{HOST}:s) is not read, so it neither fails nor steers the
// scripts; the halt, in its own key, survives the upgrade; Resume deletes
// the old hash, which a halted host kept without a TTL.
func TestUpgradeFromHash(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	st := mustState(t, redistest.Addr(t), redisstore.Config{Prefix: redistest.Prefix(t), Timeout: testTimeout})
	const host = "old.example"
	stateKey, haltKey, _ := redisstore.KeysOf(st, host)
	oldKey := strings.TrimSuffix(stateKey, "st") + "s"
	// What the older version left: a breaker open for an hour, unreadable
	// as the packed state, and a halt.
	if err := client.HSet(ctx, oldKey, "bs", "2", "bo", "99999999999999999", "bu", "1", "lr", "banana").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Set(ctx, haltKey, "1700000000000000", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Admit(ctx, host); !errors.Is(err, egresskit.ErrHalted) {
		t.Fatalf("Admit of a host halted before the upgrade = %v, want ErrHalted", err)
	}
	if err := st.Resume(ctx, host); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(ctx, oldKey).Result(); err != nil || n != 0 {
		t.Errorf("old hash after Resume: exists = %d, %v; want deleted", n, err)
	}
	if _, err := st.Admit(ctx, host); err != nil {
		t.Errorf("Admit after Resume = %v, want admitted (a fresh breaker: the old hash is not read)", err)
	}
	if typ, _ := client.Type(ctx, stateKey).Result(); typ != "string" {
		t.Errorf("state key's type = %q, want string", typ)
	}
}

// TestPackedLayout: the prelude lists 42 fields and 9 of the extension,
// as StateSize counts, and
// the offsets resume.lua reads and writes (bo and bu of the breaker, lp of
// the limiter; Lua counts from 1) are theirs.
func TestPackedLayout(t *testing.T) {
	if n := len(redisstore.StateFields); n != 51 || redisstore.StateSize != 2+8*n {
		t.Fatalf("%d fields, size %d", n, redisstore.StateSize)
	}
	for field, lua := range map[string]int{"bo": 51, "bu": 59, "lp": 75} {
		if got := redisstore.StateOffset(field) + 1; got != lua {
			t.Errorf("%s at %d (from 1), resume.lua reads it at %d", field, got, lua)
		}
	}
}
