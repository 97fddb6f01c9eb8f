package egresskit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/egresskit/egresskit/hoststate"
)

// TestCeilingCacheBound: past maxCeilings hosts the cache is cleared and
// keeps only the host just applied, so it cannot grow without bound.
func TestCeilingCacheBound(t *testing.T) {
	ctx := context.Background()
	s := mustMemory(hoststate.Config{})
	var c ceilingCache
	for i := range maxCeilings {
		if err := c.apply(ctx, s, "h"+strconv.Itoa(i)+".test", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.n.Load(); got != maxCeilings {
		t.Fatalf("after %d hosts the cache counts %d", maxCeilings, got)
	}
	if _, ok := c.m.Load("h0.test"); !ok {
		t.Fatal("the first host is gone before the bound was passed")
	}
	if err := c.apply(ctx, s, "last.test", time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.n.Load(); got != 1 {
		t.Errorf("after passing the bound the cache counts %d hosts, want 1", got)
	}
	if _, ok := c.m.Load("h0.test"); ok {
		t.Error("an earlier host is still cached after the bound was passed, want the cache cleared")
	}
	if v, ok := c.m.Load("last.test"); !ok || v.(ceiling).delay != time.Second {
		t.Errorf("the host that passed the bound is cached as %v, %v; want its 1s delay kept", v, ok)
	}
}
