package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/egresskit/egresskit"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
	"github.com/redis/go-redis/v9"
)

// sessStore returns a Redis session store over client under a prefix of t's own;
// now nil means Redis time.
func sessStore(t testing.TB, client redis.UniversalClient, now func() time.Time) sessionstore.Store {
	t.Helper()
	st, err := redisstore.NewSessionStore(client, redisstore.SessionConfig{Prefix: redistest.Prefix(t), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sessCreate creates a record of ttl, on the store's clock, with one field
// and one cookie.
func sessCreate(t testing.TB, st sessionstore.Store, now time.Time, ttl time.Duration) string {
	t.Helper()
	id := sessionkit.NewID()
	r := sessionstore.Record{ID: id, Created: now, Expires: now.Add(ttl),
		Fields:  map[string][]byte{"f": []byte("field")},
		Cookies: map[string][]byte{"c": []byte("cookie")}}
	if err := st.Create(context.Background(), r); err != nil {
		t.Fatalf("Create = %v, want nil", err)
	}
	return id
}

// TestSessionRedisTime runs with the server's clock (SessionConfig.Now
// nil), as a fleet does: expiry, physical TTLs and leases follow Redis
// TIME.
func TestSessionRedisTime(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	st := sessStore(t, client, nil)
	server, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}

	if err := st.Create(ctx, sessionstore.Record{ID: sessionkit.NewID(), Created: server, Expires: server.Add(-time.Second)}); err == nil {
		t.Errorf("Create(expiry before the server's now) = nil, want an error")
	}
	id := sessCreate(t, st, server, time.Hour)
	k, err := redisstore.SessionKeysOf(st, id)
	if err != nil {
		t.Fatal(err)
	}
	// A key created by a later write gets the record's TTL too.
	if err := st.SetFields(ctx, id, 0, sessionstore.FieldWrite{Delete: []string{"f"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetFields(ctx, id, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "g", Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.Meta, k.Fields, k.Cookies, k.Order} {
		if ttl := client.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
			t.Errorf("PTTL(%s) = %v, want about 1h", key, ttl)
		}
	}
	if err := st.SetExpiry(ctx, id, 0, server.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.Meta, k.Fields, k.Cookies, k.Order} {
		if ttl := client.PTTL(ctx, key).Val(); ttl <= 119*time.Minute || ttl > 2*time.Hour {
			t.Errorf("PTTL(%s) after SetExpiry(+2h) = %v, want about 2h", key, ttl)
		}
	}

	l, err := st.Acquire(ctx, id, "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Expires.Sub(server); d < time.Minute || d > time.Minute+30*time.Second {
		t.Errorf("lease expires %v after the server's time, want about 1m", d)
	}
	if _, err := st.Acquire(ctx, id, "B", time.Minute); !errors.Is(err, session.ErrLeaseHeld) {
		t.Errorf("Acquire(B) = %v, want ErrLeaseHeld", err)
	}

	// Expiry at the server's now removes every key.
	now, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetExpiry(ctx, id, l.Token, now); err != nil {
		t.Fatalf("SetExpiry(now) = %v, want nil", err)
	}
	if n := client.Exists(ctx, k.Meta, k.Fields, k.Cookies, k.Order).Val(); n != 0 {
		t.Errorf("%d keys left after SetExpiry(now), want 0", n)
	}
	if _, err := st.Get(ctx, id, sessionstore.PartFields|sessionstore.PartCookies); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get(expired) = %v, want ErrNotFound", err)
	}
}

// TestSessionForeignValues writes values another program might have left
// under a session's keys. Every method reports a *CorruptError naming the
// key, changes nothing, and nothing panics.
func TestSessionForeignValues(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	hset := func(key string, kv ...string) error { return client.HSet(ctx, key, kv).Err() }
	// replace deletes key, then writes a value of another type with write.
	replace := func(key string, write func() error) error {
		if err := client.Del(ctx, key).Err(); err != nil {
			return err
		}
		return write()
	}
	tests := []struct {
		name   string
		setup  func(k redisstore.SessionKeys) error
		key    func(k redisstore.SessionKeys) string
		reason string
	}{
		{"string under meta", func(k redisstore.SessionKeys) error { return client.Set(ctx, k.Meta, "x", 0).Err() }, sessMeta, "wrongtype"},
		{"list under fields", func(k redisstore.SessionKeys) error {
			return replace(k.Fields, func() error { return client.LPush(ctx, k.Fields, "x").Err() })
		}, sessFields, "wrongtype"},
		{"set under cookies", func(k redisstore.SessionKeys) error {
			return replace(k.Cookies, func() error { return client.SAdd(ctx, k.Cookies, "x").Err() })
		}, sessCookies, "wrongtype"},
		{"hash under order", func(k redisstore.SessionKeys) error {
			return replace(k.Order, func() error { return hset(k.Order, "a", "1") })
		}, sessOrder, "wrongtype"},
		{"version not a number", func(k redisstore.SessionKeys) error { return hset(k.Meta, "v", "banana") }, sessMeta, "v"},
		{"negative expiry", func(k redisstore.SessionKeys) error { return hset(k.Meta, "e", "-5") }, sessMeta, "e"},
		{"float token count", func(k redisstore.SessionKeys) error { return hset(k.Meta, "lt", "1.5") }, sessMeta, "lt"},
		{"hex order counter", func(k redisstore.SessionKeys) error { return hset(k.Meta, "seq", "0x10") }, sessMeta, "seq"},
		{"huge version", func(k redisstore.SessionKeys) error { return hset(k.Meta, "v", "99999999999999999") }, sessMeta, "v"},
		{"expiry missing", func(k redisstore.SessionKeys) error { return client.HDel(ctx, k.Meta, "e").Err() }, sessMeta, "e"},
		{"lease without expiry", func(k redisstore.SessionKeys) error { return hset(k.Meta, "lk", "1", "lh", "x") }, sessMeta, "le"},
		{"meta of another program", func(k redisstore.SessionKeys) error {
			return replace(k.Meta, func() error { return hset(k.Meta, "owner", "someone else") })
		}, sessMeta, "v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockAt(time.Now().Truncate(time.Millisecond))
			st := sessStore(t, client, clock.Now)
			id := sessCreate(t, st, clock.Now(), time.Hour)
			k, _ := redisstore.SessionKeysOf(st, id)
			if err := tt.setup(k); err != nil {
				t.Fatal(err)
			}
			before := sessDump(t, client, k)
			check := func(op string, err error) {
				t.Helper()
				var ce *redisstore.CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, redisstore.ErrCorrupt) || ce.Key != tt.key(k) || ce.Reason != tt.reason {
					t.Errorf("%s = %v, want *CorruptError{%s, %s}", op, err, tt.key(k), tt.reason)
				}
			}
			_, err := st.Get(ctx, id, sessionstore.PartFields|sessionstore.PartCookies)
			check("Get", err)
			check("Create", st.Create(ctx, sessionstore.Record{ID: id, Created: clock.Now(), Expires: clock.Now().Add(time.Hour)}))
			check("SetFields", st.SetFields(ctx, id, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "f", Value: []byte("2")}}}))
			_, err = st.MergeCookies(ctx, id, 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: "c2", Value: []byte("2")}}, Limit: 1})
			check("MergeCookies", err)
			_, err = st.Acquire(ctx, id, "A", time.Minute)
			check("Acquire", err)
			check("Release", st.Release(ctx, sessionstore.Lease{ID: id, Token: 1}))
			check("SetExpiry", st.SetExpiry(ctx, id, 0, clock.Now().Add(time.Minute)))
			check("Delete", st.Delete(ctx, id, 0))
			if after := sessDump(t, client, k); after != before {
				t.Errorf("keys changed by failed calls:\n before %s\n after  %s", before, after)
			}
		})
	}

	// A creation time that does not parse fails Get only.
	t.Run("created not a time", func(t *testing.T) {
		clock := clockAt(time.Now().Truncate(time.Millisecond))
		st := sessStore(t, client, clock.Now)
		id := sessCreate(t, st, clock.Now(), time.Hour)
		k, _ := redisstore.SessionKeysOf(st, id)
		if err := hset(k.Meta, "c", "yesterday"); err != nil {
			t.Fatal(err)
		}
		var ce *redisstore.CorruptError
		if _, err := st.Get(ctx, id, 0); !errors.As(err, &ce) || ce.Key != k.Meta || ce.Reason != "c" {
			t.Errorf("Get = %v, want *CorruptError{%s, c}", err, k.Meta)
		}
	})
}

func sessMeta(k redisstore.SessionKeys) string    { return k.Meta }
func sessFields(k redisstore.SessionKeys) string  { return k.Fields }
func sessCookies(k redisstore.SessionKeys) string { return k.Cookies }
func sessOrder(k redisstore.SessionKeys) string   { return k.Order }

// sessDump renders a session's keys, whatever their types, to compare
// them before and after.
func sessDump(t testing.TB, c redis.UniversalClient, k redisstore.SessionKeys) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, key := range []string{k.Meta, k.Fields, k.Cookies, k.Order} {
		typ := c.Type(ctx, key).Val()
		var v any
		switch typ {
		case "string":
			v = c.Get(ctx, key).Val()
		case "hash":
			v = c.HGetAll(ctx, key).Val()
		case "list":
			v = c.LRange(ctx, key, 0, -1).Val()
		case "set":
			v = c.SMembers(ctx, key).Val()
		case "zset":
			v = c.ZRangeWithScores(ctx, key, 0, -1).Val()
		}
		fmt.Fprintf(&b, "%s=%s:%v ", key[strings.LastIndexByte(key, ':')+1:], typ, v)
	}
	return b.String()
}

// TestSessionScriptFlush: after SCRIPT FLUSH (a restart, a failover) the
// scripts are loaded again and the calls succeed.
func TestSessionScriptFlush(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	clock := clockAt(time.Now().Truncate(time.Millisecond))
	st := sessStore(t, client, clock.Now)
	id := sessCreate(t, st, clock.Now(), time.Hour)
	for i := range 3 {
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.MergeCookies(ctx, id, 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: fmt.Sprint("c", i), Value: []byte("v")}}}); err != nil {
			t.Fatalf("MergeCookies after SCRIPT FLUSH = %v, want nil", err)
		}
		r, err := st.Get(ctx, id, sessionstore.PartCookies)
		if err != nil || r.Version != uint64(2+i) || len(r.Cookies) != 2+i {
			t.Fatalf("Get after SCRIPT FLUSH = version %d, %d cookies, %v; want %d, %d, nil", r.Version, len(r.Cookies), err, 2+i, 2+i)
		}
	}
}

func TestSessionStoreConfig(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer client.Close()
	for _, p := range []string{"with space", "{tag}", "a}b", "ctl\x01", "tab\t", strings.Repeat("p", 129)} {
		_, err := redisstore.NewSessionStore(client, redisstore.SessionConfig{Prefix: p})
		var pe *redisstore.PrefixError
		if !errors.As(err, &pe) || !errors.Is(err, egresskit.ErrInvalidConfig) {
			t.Errorf("NewSessionStore(prefix %q) = %v, want *PrefixError", p, err)
		}
	}
	if _, err := redisstore.NewSessionStore(nil, redisstore.SessionConfig{}); err == nil {
		t.Errorf("NewSessionStore(nil client) = nil error, want an error")
	}
	st, err := redisstore.NewSessionStore(client, redisstore.SessionConfig{})
	if err != nil {
		t.Fatalf("NewSessionStore(zero config) = %v, want nil", err)
	}
	k, err := redisstore.SessionKeysOf(st, "s-1")
	want := redisstore.SessionKeys{Meta: "egresskit:session:{s-1}:meta", Fields: "egresskit:session:{s-1}:fields",
		Cookies: "egresskit:session:{s-1}:cookies", Order: "egresskit:session:{s-1}:order"}
	if err != nil || k != want {
		t.Errorf("Keys(s-1) = %+v, %v; want %+v", k, err, want)
	}
	for _, id := range []string{"", "{x}", "a b", "a\nb"} {
		if _, err := redisstore.SessionKeysOf(st, id); !errors.Is(err, session.ErrInvalidID) {
			t.Errorf("Keys(%q) = %v, want ErrInvalidID", id, err)
		}
	}

	// An unreachable server is an *UnavailableError, not a panic or a
	// "not found".
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = st.Get(ctx, "s-1", sessionstore.PartFields|sessionstore.PartCookies)
	if !errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("Get(unreachable server) = %v, want ErrUnavailable", err)
	}
	if _, err := st.Acquire(ctx, "s-1", "A", 0); err == nil {
		t.Errorf("Acquire(ttl 0) = nil, want an error")
	}
	if err := st.Create(ctx, sessionstore.Record{ID: "s-1", Expires: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil || errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("Create(expiry in 3000) = %v, want an out-of-range error before any call", err)
	}
}

// TestSessionConcurrentCreate: of many workers creating one session at
// once, exactly one succeeds.
func TestSessionConcurrentCreate(t *testing.T) {
	client := redistest.Client(t)
	st := sessStore(t, client, nil)
	now := time.Now()
	id := sessionkit.NewID()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			errs[i] = st.Create(context.Background(), sessionstore.Record{ID: id, Created: now, Expires: now.Add(time.Hour),
				Fields: map[string][]byte{"who": []byte(fmt.Sprint(i))}})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, session.ErrExists):
			t.Errorf("Create = %v, want nil or ErrExists", err)
		}
	}
	if won != 1 {
		t.Errorf("%d concurrent Creates succeeded, want 1", won)
	}
}

// Acquire while another holder's lease is live names that lease's expiry.
func TestSessionLeaseHeldExpiry(t *testing.T) {
	client := redistest.Client(t)
	clk := clockAt(time.Now().Truncate(time.Millisecond))
	st := sessStore(t, client, clk.Now)
	id := sessCreate(t, st, clk.Now(), time.Hour)
	ctx := context.Background()
	l1, err := st.Acquire(ctx, id, "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Acquire(ctx, id, "B", time.Minute)
	var held *sessionkit.LeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, session.ErrLeaseHeld) || !held.Expires.Equal(l1.Expires) || held.ID != id {
		t.Errorf("Acquire(B) while A holds = %v, want a LeaseHeldError expiring %v", err, l1.Expires)
	}
}
