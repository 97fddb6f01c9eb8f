package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// FuzzSessionStoredMeta overwrites one field of a session's metadata hash
// with anything, then runs every method: each returns a result or one of
// the documented errors — never a script failure (a Lua error would be a
// bug), never a panic, and a Get that succeeds returns a sane record.
func FuzzSessionStoredMeta(f *testing.F) {
	for _, seed := range [][2]string{
		{"v", "banana"}, {"e", "1"}, {"e", "99999999999999999"}, {"lt", "9007199254740991"},
		{"seq", "9007199254740991"}, {"lk", "0"}, {"le", " 7"}, {"lh", "\x00\xff"}, {"c", "-1e3"},
		{"c", "-9223372036854775809"}, {"v", "0"}, {"other", "x"}, {"lk", "2"}, {"v", "00"}, {"seq", "01"},
	} {
		f.Add(seed[0], seed[1])
	}
	client := redistest.Client(f)
	start := time.Now().Truncate(time.Millisecond)
	st, err := redisstore.NewSessionStore(client, redisstore.SessionConfig{Prefix: redistest.Prefix(f), Now: func() time.Time { return start }})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, field, value string) {
		id := sessCreate(t, st, start, time.Hour)
		k, _ := redisstore.SessionKeysOf(st, id)
		defer client.Del(ctx, k.Meta, k.Fields, k.Cookies, k.Order)
		if _, err := st.Acquire(ctx, id, "A", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := client.HSet(ctx, k.Meta, field, value).Err(); err != nil {
			t.Fatal(err)
		}
		check := func(op string, err error) {
			t.Helper()
			var ce *redisstore.CorruptError
			switch {
			case err == nil, errors.As(err, &ce), errors.Is(err, session.ErrNotFound), errors.Is(err, session.ErrStaleLease),
				errors.Is(err, session.ErrLeaseHeld), errors.Is(err, session.ErrExists):
			default:
				t.Fatalf("%s with %s=%q: %v", op, field, value, err)
			}
		}
		r, err := st.Get(ctx, id, sessionstore.PartFields|sessionstore.PartCookies)
		check("Get", err)
		if err == nil && (r.ID != id || !r.Expires.After(start) || len(r.Cookies) != 1 || (r.Lease.Token != 0 && !r.Lease.Expires.After(start))) {
			t.Fatalf("Get with %s=%q = %+v: not a live record with its cookie", field, value, r)
		}
		check("Create", st.Create(ctx, sessionstore.Record{ID: id, Created: start, Expires: start.Add(time.Hour)}))
		check("SetFields", st.SetFields(ctx, id, 1, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "f", Value: []byte("2")}}}))
		_, err = st.MergeCookies(ctx, id, 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: "c2", Value: []byte("2")}}, Limit: 1})
		check("MergeCookies", err)
		_, err = st.Acquire(ctx, id, "B", time.Minute)
		check("Acquire", err)
		check("Release", st.Release(ctx, sessionstore.Lease{ID: id, Holder: "A", Token: 1}))
		check("SetExpiry", st.SetExpiry(ctx, id, 0, start.Add(2*time.Hour)))
		check("Delete", st.Delete(ctx, id, 0))
	})
}
