package redisstore_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// sessBenchStores returns the stores to compare: memory, and Redis with
// the server's clock.
func sessBenchStores(b *testing.B) map[string]sessionstore.Store {
	return map[string]sessionstore.Store{
		"memory": session.NewMemoryStore(nil),
		"redis":  sessStore(b, redistest.Client(b), nil),
	}
}

// sessBlob is a value the size of a sealed cookie.
func sessBlob() []byte {
	b := make([]byte, 160)
	rand.Read(b)
	return b
}

// BenchmarkSessionMergeCookies merges one cookie (of 50 names, so most
// replace one) into a session, with the Manager's default bound.
func BenchmarkSessionMergeCookies(b *testing.B) {
	for _, name := range []string{"memory", "redis"} {
		b.Run(name, func(b *testing.B) {
			st := sessBenchStores(b)[name]
			id := sessCreate(b, st, time.Now(), time.Hour)
			ctx := context.Background()
			blob := sessBlob()
			names := make([]string, 50)
			for i := range names {
				names[i] = "c/" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m := sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: names[i%len(names)], Value: blob}}, Limit: 3000}
				if _, err := st.MergeCookies(ctx, id, 0, m); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSessionGet reads a whole session of 3 fields and 20 cookies.
func BenchmarkSessionGet(b *testing.B) {
	for _, name := range []string{"memory", "redis"} {
		b.Run(name, func(b *testing.B) {
			st := sessBenchStores(b)[name]
			ctx := context.Background()
			now := time.Now()
			r := sessionstore.Record{ID: sessionkit.NewID(), Created: now, Expires: now.Add(time.Hour),
				Fields: map[string][]byte{}, Cookies: map[string][]byte{}}
			for i := range 3 {
				r.Fields["f"+strconv.Itoa(i)] = sessBlob()
			}
			for i := range 20 {
				r.Cookies["c/"+strconv.Itoa(i)] = sessBlob()
			}
			if err := st.Create(ctx, r); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Get(ctx, r.ID, sessionstore.PartFields|sessionstore.PartCookies); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
