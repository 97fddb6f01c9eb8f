package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// TestCloseSendsHeldOKs: an OK held back for RecordDelay (a minute here,
// so that no timer sends it; the earlier ones ride with the next
// admission) reaches Redis when the worker calls Close before it exits:
// another worker sees it.
func TestCloseSendsHeldOKs(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	cfg := redisstore.Config{Prefix: redistest.Prefix(t), RecordDelay: time.Minute}
	w := mustState(t, addr, cfg)
	other := mustState(t, addr, cfg)
	const host = "close.example"
	for range 3 {
		a, err := w.Admit(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Record(ctx, host, a, classify.Result{Outcome: classify.OK, Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := other.Status(ctx, host); err != nil || st.Recent.OK != 2 {
		t.Fatalf("other worker before Close: %d OKs, %v; want 2 (the last held back)", st.Recent.OK, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := other.Status(ctx, host); err != nil || st.Recent.OK != 3 {
		t.Errorf("other worker after Close: %d OKs, %v; want 3", st.Recent.OK, err)
	}
}
