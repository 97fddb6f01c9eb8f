package redisstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestHaltRecordsReadBackClean: records written straight into Redis, by
// something other than a Store, are bounded and cleaned when read.
func TestHaltRecordsReadBackClean(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	c := redistest.Dial(t, addr)
	st, err := redisstore.New(c, redisstore.Config{Prefix: prefix, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hostile := "\x1b[2J\x1b]0;pwned\x07\u009b31m\u202eDETCADER"
	push := func(host, kind string, v any) {
		b, err := json.Marshal(map[string]any{"kind": kind, kind: v})
		if err != nil {
			t.Fatal(err)
		}
		suffix := map[string]string{"halt": "halts", "note": "notes"}[kind]
		if err := c.LPush(ctx, prefix+":{"+host+"}:"+suffix, b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	halt := func(host string) {
		a, err := st.Admit(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		st.Record(ctx, host, a, classify.Result{Outcome: classify.Refused, Status: 403})
		c.ZAdd(ctx, prefix+":halted", redis.Z{Score: float64(time.Now().UnixMicro()), Member: host})
	}
	halt("evil.example")
	markers := make([]string, 200_000)
	for i := range markers {
		markers[i] = hostile
	}
	push("evil.example", "halt", map[string]any{"host": "x", "reason": hostile, "worker": hostile,
		"url": "http://e/?" + strings.Repeat(hostile, 1000), "body_head": hostile, "markers": markers[:100]})
	push("evil.example", "note", map[string]any{"by": hostile, "text": hostile + strings.Repeat("n", 10000)})
	halt("big.example")
	push("big.example", "halt", map[string]any{"reason": "big", "body_head": strings.Repeat("A", 64<<20), "markers": markers})
	c.ZAdd(ctx, prefix+":halted", redis.Z{Score: 1, Member: "bad\u202ehost.example"})

	check := func(what, s string, limit int) {
		t.Helper()
		if len(s) > limit {
			t.Errorf("%s: %d bytes, want at most %d", what, len(s), limit)
		}
		if strings.ContainsAny(s, "\x1b\x07\u009b\u202e") {
			t.Errorf("%s = %q keeps a control", what, s)
		}
	}
	hs, err := st.Halts(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("Halts = %d records, want 2 (the bad host's dropped)", len(hs))
	}
	for _, h := range hs {
		check("Reason", h.Reason, 512)
		check("Worker", h.Worker, 128)
		check("URL", h.URL, 2048)
		check("BodyHead", h.BodyHead, 512)
		if len(h.Markers) > 16 {
			t.Errorf("%d markers", len(h.Markers))
		}
		for _, m := range h.Markers {
			check("marker", m, 64)
		}
		if h.Host == "big.example" && (!strings.Contains(h.Reason, "not shown") || h.Time.IsZero()) {
			t.Errorf("oversized record read as %+v", h)
		}
	}
	halts, notes, err := st.History(ctx, "evil.example")
	if err != nil || len(halts) != 1 || len(notes) != 1 {
		t.Fatalf("History = %d, %d, %v", len(halts), len(notes), err)
	}
	check("note by", notes[0].By, 128)
	check("note text", notes[0].Text, 512)
	if halts[0].Host != "evil.example" {
		t.Errorf("History's halt host = %q", halts[0].Host)
	}
}
