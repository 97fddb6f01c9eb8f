package sessiontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// fullSession creates a session with a value in every kind of field.
func fullSession(t *testing.T, m *session.Manager, secret string) string {
	t.Helper()
	id := newSession(t, m, session.CreateOptions{
		Endpoint: "ep-1",
		Header:   http.Header{"X-Api-Key": {secret + "-header"}},
		Token:    session.Token{Type: "Bearer", Value: session.Secret(secret + "-token"), Expires: time.Now().Add(24 * time.Hour)},
	})
	j := jar(t, context.Background(), m, id)
	j.SetCookies(mustURL("https://"+secret+"-domain.example/"), []*http.Cookie{{Name: secret + "-name", Value: secret + "-cookie"}})
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	return id
}

func managerTampered(t *testing.T, e env) {
	ctx := context.Background()
	m := managers(t, e, 1, nil)[0]
	id := fullSession(t, m, "tamper")
	raw := get(t, e, id)
	if len(raw.Fields) != 3 || len(raw.Cookies) != 1 {
		t.Fatalf("raw record: %d fields, %d cookies; want 3, 1", len(raw.Fields), len(raw.Cookies))
	}
	write := func(cookie bool, name string, v []byte) {
		t.Helper()
		var err error
		if cookie {
			_, err = e.store.MergeCookies(ctx, id, 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: name, Value: v}}})
		} else {
			err = e.store.SetFields(ctx, id, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: name, Value: v}}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	type blob struct {
		cookie bool
		name   string
		value  []byte
	}
	var blobs []blob
	for k, v := range raw.Fields {
		blobs = append(blobs, blob{false, k, v})
	}
	for k, v := range raw.Cookies {
		blobs = append(blobs, blob{true, k, v})
	}
	for _, b := range blobs {
		for i := range b.value {
			for _, flip := range []byte{0x01, 0x80} {
				bad := bytes.Clone(b.value)
				bad[i] ^= flip
				write(b.cookie, b.name, bad)
				_, err := m.Get(ctx, id)
				if !errors.Is(err, session.ErrTampered) {
					t.Fatalf("Get with byte %d of %q flipped by %#x = %v, want ErrTampered", i, b.name, flip, err)
				}
			}
		}
		for _, bad := range [][]byte{nil, b.value[:len(b.value)-1], append(bytes.Clone(b.value), 0)} {
			write(b.cookie, b.name, bad)
			if _, err := m.Get(ctx, id); !errors.Is(err, session.ErrTampered) {
				t.Fatalf("Get with %q of %d bytes (want %d) = %v, want ErrTampered", b.name, len(bad), len(b.value), err)
			}
		}
		write(b.cookie, b.name, b.value)
	}
	if _, err := m.Get(ctx, id); err != nil {
		t.Errorf("Get after restoring every value = %v, want nil", err)
	}
	// A tampered cookie is an error through the jar too, never an empty jar.
	for k, v := range raw.Cookies {
		bad := bytes.Clone(v)
		bad[len(bad)-1] ^= 1
		write(true, k, bad)
	}
	j := jar(t, ctx, m, id)
	if got := j.Cookies(mustURL("https://tamper-domain.example/")); len(got) != 0 {
		t.Errorf("Cookies with a tampered cookie = %d cookies, want none", len(got))
	}
	wantErr(t, "Jar.Err() with a tampered cookie", j.Err(), session.ErrTampered)
	if _, err := m.Token(ctx, id); err != nil {
		t.Errorf("Token() with only a cookie tampered = %v, want nil", err)
	}
}

func managerMovedRecord(t *testing.T, e env) {
	ctx := context.Background()
	m := managers(t, e, 1, nil)[0]
	src := fullSession(t, m, "moved")
	dst := newSession(t, m, session.CreateOptions{Header: http.Header{"X-Other": {"o"}}})
	raw := get(t, e, src)

	// Every field of src, copied under the same name into dst.
	for name, v := range raw.Fields {
		if err := e.store.SetFields(ctx, dst, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: name, Value: v}}}); err != nil {
			t.Fatal(err)
		}
		_, err := m.Get(ctx, dst)
		wantErr(t, fmt.Sprintf("Get with field %q moved from another session", name), err, session.ErrTampered)
		if err := e.store.SetFields(ctx, dst, 0, sessionstore.FieldWrite{Delete: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range raw.Cookies {
		if _, err := e.store.MergeCookies(ctx, dst, 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: name, Value: v}}}); err != nil {
			t.Fatal(err)
		}
		_, err := m.Get(ctx, dst)
		wantErr(t, "Get with a cookie moved from another session", err, session.ErrTampered)
		if _, err := e.store.MergeCookies(ctx, dst, 0, sessionstore.CookieMerge{Delete: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	// A value moved to another field of its own session.
	if err := e.store.SetFields(ctx, src, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "h/X-Moved", Value: raw.Fields["h/X-Api-Key"]}}}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Get(ctx, src)
	wantErr(t, "Get with a header value moved to another field", err, session.ErrTampered)
	// A whole record recreated under another ID.
	now := e.clock.Now()
	copyID := sessionkit.NewID()
	if err := e.store.Create(ctx, sessionstore.Record{ID: copyID, Created: now, Expires: now.Add(time.Hour), Fields: raw.Fields, Cookies: raw.Cookies}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Get(ctx, copyID)
	wantErr(t, "Get of a record copied under another ID", err, session.ErrTampered)
}

func managerKeyRotation(t *testing.T, e env) {
	ctx := context.Background()
	k1, k2 := newKey(1), newKey(2)
	ring := func(keys ...session.Key) *session.Manager {
		kr, err := session.NewKeyring(keys...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := session.New(session.Config{Store: e.store, Keyring: kr, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	old, rotated, only2 := ring(k1), ring(k1, k2), ring(k2)
	id := fullSession(t, old, "rotate")

	s, err := rotated.Get(ctx, id)
	if err != nil || len(s.Cookies) != 1 || s.Endpoint != "ep-1" || s.Token.Value != "rotate-token" {
		t.Fatalf("Get through the rotated ring = %v, %v; want the old session readable", s, err)
	}
	if err := rotated.SetHeader(ctx, id, "X-New", "n"); err != nil {
		t.Fatal(err)
	}
	if kid := keyID(get(t, e, id).Fields["h/X-New"]); kid != 2 {
		t.Errorf("new value sealed under key %d, want 2", kid)
	}
	if kid := keyID(get(t, e, id).Fields["h/X-Api-Key"]); kid != 1 {
		t.Errorf("old value under key %d, want 1 until rewritten", kid)
	}
	if _, err := rotated.Get(ctx, id); err != nil {
		t.Errorf("Get with values under both keys = %v, want nil", err)
	}
	_, err = old.Get(ctx, id)
	wantErr(t, "Get through a ring without the new key", err, session.ErrTampered)
	_, err = only2.Get(ctx, id)
	wantErr(t, "Get through a ring without the old key", err, session.ErrTampered)
}

// keyID reads the key ID of a sealed value (format version 1).
func keyID(blob []byte) uint32 {
	if len(blob) < 5 {
		return 0
	}
	return uint32(blob[1])<<24 | uint32(blob[2])<<16 | uint32(blob[3])<<8 | uint32(blob[4])
}

func managerNoPlaintext(t *testing.T, e env) {
	m := managers(t, e, 1, nil)[0]
	const secret = "Zq7pl41nTextS3cret"
	id := fullSession(t, m, secret)
	raw := get(t, e, id)
	for _, part := range []map[string][]byte{raw.Fields, raw.Cookies} {
		for name, v := range part {
			if strings.Contains(name, secret) || bytes.Contains(v, []byte(secret)) {
				t.Errorf("stored field %q holds the secret in the clear", name)
			}
			if bytes.Contains(v, []byte("ep-1")) {
				t.Errorf("stored field %q holds the endpoint in the clear", name)
			}
		}
	}
}
