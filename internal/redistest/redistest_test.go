package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Main(m))
}

// TestServerLifecycle: a dedicated server answers, is gone after Kill,
// answers again on the same address after Restart, empty.
func TestServerLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := redistest.Start(t)
	c := redistest.Dial(t, srv.Addr)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("after Restart: EXISTS k = %d, %v; want 0 (no persistence)", n, err)
	}
	if err := srv.Restart(); err == nil {
		t.Error("Restart of a running server succeeded")
	}
}

// TestShared: Addr gives every test of the binary the same server, and
// Prefix keys of a test are deleted when it ends.
func TestShared(t *testing.T) {
	var addr, prefix string
	t.Run("first", func(t *testing.T) {
		addr = redistest.Addr(t)
		prefix = redistest.Prefix(t)
		c := redistest.Client(t)
		if err := c.Set(context.Background(), prefix+":k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("second", func(t *testing.T) {
		if got := redistest.Addr(t); got != addr {
			t.Errorf("Addr = %q, want the shared %q", got, addr)
		}
		n, err := redistest.Client(t).Exists(context.Background(), prefix+":k").Result()
		if err != nil || n != 0 {
			t.Errorf("key of the first test after it ended: EXISTS = %d, %v; want 0", n, err)
		}
	})
}
