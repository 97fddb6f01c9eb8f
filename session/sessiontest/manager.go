package sessiontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/session"
)

var managerScenarios = []scenario{
	{"Manager/CookieSharedAcrossWorkers", managerCookieShared},
	{"Manager/JarSemantics", managerJarSemantics},
	{"Manager/ConcurrentJars", managerConcurrentJars},
	{"Manager/SessionExpires", managerSessionExpires},
	{"Manager/FencedStaleWriter", managerFencedStaleWriter},
	{"Manager/Tampered", managerTampered},
	{"Manager/MovedRecord", managerMovedRecord},
	{"Manager/KeyRotation", managerKeyRotation},
	{"Manager/NoPlaintextAtRest", managerNoPlaintext},
	{"Manager/CookieBound", managerCookieBound},
	{"Manager/BadCookies", managerBadCookies},
	{"Manager/Bind", managerBind},
	{"Manager/TokenRefreshOnceNearExpiry", func(t *testing.T, e env) { managerTokenRefreshOnce(t, e, 25*time.Second) }},
	{"Manager/TokenRefreshOnceExpired", func(t *testing.T, e env) { managerTokenRefreshOnce(t, e, 41*time.Second) }},
	{"Manager/ShortTokenNotRefreshedEachRequest", managerShortToken},
	{"Manager/TokenRefreshedMeanwhile", managerTokenRefreshedMeanwhile},
	{"Manager/TokenRefreshFailure", managerTokenRefreshFailure},
}

// managers returns n Managers sharing e's store and one Keyring, as n
// worker processes would.
func managers(t *testing.T, e env, n int, tweak func(*session.Config)) []*session.Manager {
	t.Helper()
	ms := make([]*session.Manager, n)
	for i := range ms {
		c := session.Config{Store: e.store, Keyring: e.keys, Now: e.clock.Now}
		if tweak != nil {
			tweak(&c)
		}
		ms[i] = session.New(c)
	}
	return ms
}

func newSession(t *testing.T, m *session.Manager, o session.CreateOptions) string {
	t.Helper()
	id := session.NewID()
	if _, err := m.Create(context.Background(), id, o); err != nil {
		t.Fatalf("Create = %v, want nil", err)
	}
	return id
}

func jar(t *testing.T, ctx context.Context, m *session.Manager, id string) *session.Jar {
	t.Helper()
	j, err := m.Jar(ctx, id)
	if err != nil {
		t.Fatalf("Jar(%q) = %v, want nil", id, err)
	}
	return j
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// cookieString renders cookies as "a=1; b=2".
func cookieString(cs []*http.Cookie) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Name + "=" + c.Value
	}
	return strings.Join(parts, "; ")
}

func managerCookieShared(t *testing.T, e env) {
	ms := managers(t, e, 2, nil)
	id := newSession(t, ms[0], session.CreateOptions{})
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "logged-in", Path: "/", HttpOnly: true})
	})
	mux.HandleFunc("/me", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("sid")
		if err != nil || c.Value != "logged-in" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "welcome back")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	a := &http.Client{Jar: jar(t, context.Background(), ms[0], id)}
	b := &http.Client{Jar: jar(t, context.Background(), ms[1], id)}
	resp, err := a.Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = b.Get(srv.URL + "/me")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("worker B GET /me = %d, want 200: the cookie worker A received was not sent", resp.StatusCode)
	}
}

func managerJarSemantics(t *testing.T, e env) {
	ms := managers(t, e, 2, nil)
	id := newSession(t, ms[0], session.CreateOptions{})
	ja, jb := jar(t, context.Background(), ms[0], id), jar(t, context.Background(), ms[1], id)

	ja.SetCookies(mustURL("https://shop.example.com/account/login"), []*http.Cookie{
		{Name: "host", Value: "h"},                                        // host-only, path /account
		{Name: "dom", Value: "d", Domain: "example.com", Path: "/"},       // domain cookie
		{Name: "sec", Value: "s", Path: "/", Secure: true},                // https only
		{Name: "old", Value: "o", Path: "/", MaxAge: 60},                  // expires in a minute
		{Name: "psl", Value: "p", Domain: "com", Path: "/"},               // public suffix: ignored
		{Name: "foreign", Value: "f", Domain: "other.example", Path: "/"}, // not our domain: ignored
		{Name: "deep", Value: "x", Path: "/account/settings/"},            // longer path first
	})
	if err := ja.Err(); err != nil {
		t.Fatalf("SetCookies: Err() = %v, want nil", err)
	}
	for _, tc := range []struct{ url, want string }{
		{"https://shop.example.com/account/settings/x", "deep=x; host=h; dom=d; sec=s; old=o"},
		{"https://shop.example.com/account", "host=h; dom=d; sec=s; old=o"},
		{"https://shop.example.com/accounting", "dom=d; sec=s; old=o"},
		{"http://shop.example.com/", "dom=d; old=o"},
		{"https://www.example.com/", "dom=d"},
		{"https://example.com/", "dom=d"},
		{"https://example.org/", ""},
		{"ftp://shop.example.com/", ""},
	} {
		if got := cookieString(jb.Cookies(mustURL(tc.url))); got != tc.want {
			t.Errorf("Cookies(%s) = %q, want %q", tc.url, got, tc.want)
		}
	}
	e.clock.Advance(time.Minute)
	if got := cookieString(jb.Cookies(mustURL("https://example.com/"))); got != "dom=d" {
		t.Errorf("Cookies after expiry = %q, want %q", got, "dom=d")
	}
	// Worker B deletes, worker A sees it; worker A updates, worker B sees it.
	jb.SetCookies(mustURL("https://www.example.com/"), []*http.Cookie{{Name: "dom", Domain: "example.com", Path: "/", MaxAge: -1}})
	ja.SetCookies(mustURL("https://shop.example.com/account/login"), []*http.Cookie{{Name: "host", Value: "h2"}})
	if got := cookieString(ja.Cookies(mustURL("https://shop.example.com/account"))); got != "host=h2; sec=s" {
		t.Errorf("Cookies after update and delete = %q, want %q", got, "host=h2; sec=s")
	}
	if st := ja.Stats(); st.BadDomain != 2 || st.Stored != 6 {
		t.Errorf("Stats() = %+v, want BadDomain 2, Stored 6", st)
	}
	s, err := ms[1].Get(context.Background(), id)
	if err != nil || len(s.Cookies) != 3 {
		t.Errorf("Get = %d cookies, %v; want 3 (host, sec, deep)", len(s.Cookies), err)
	}
}

func managerConcurrentJars(t *testing.T, e env) {
	ms := managers(t, e, 2, nil)
	id := newSession(t, ms[0], session.CreateOptions{})
	jars := []*session.Jar{jar(t, context.Background(), ms[0], id), jar(t, context.Background(), ms[1], id)}
	u := mustURL("https://example.com/")
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			j := jars[i%2]
			j.SetCookies(u, []*http.Cookie{{Name: fmt.Sprint("w", i), Value: fmt.Sprint(i)}})
			j.Cookies(u)
		})
	}
	wg.Wait()
	for i, j := range jars {
		if err := j.Err(); err != nil {
			t.Errorf("jar %d: Err() = %v, want nil", i, err)
		}
	}
	s, err := ms[0].Get(context.Background(), id)
	if err != nil || len(s.Cookies) != n {
		t.Fatalf("after %d concurrent writers: %d cookies, %v; want %d", n, len(s.Cookies), err, n)
	}
	if got := len(jars[1].Cookies(u)); got != n {
		t.Errorf("Cookies() = %d cookies, want %d", got, n)
	}
}

func managerSessionExpires(t *testing.T, e env) {
	ctx := context.Background()
	ms := managers(t, e, 1, nil)
	m := ms[0]
	id := newSession(t, m, session.CreateOptions{TTL: time.Minute})
	j := jar(t, ctx, m, id)
	u := mustURL("https://example.com/")
	j.SetCookies(u, []*http.Cookie{{Name: "a", Value: "1"}})
	e.clock.Advance(time.Minute)

	_, err := m.Get(ctx, id)
	wantErr(t, "Get(expired)", err, session.ErrNotFound)
	if got := j.Cookies(u); len(got) != 0 {
		t.Errorf("Cookies(expired session) = %q, want none", cookieString(got))
	}
	wantErr(t, "Jar.Err() after expiry", j.Err(), session.ErrNotFound)
	j.SetCookies(u, []*http.Cookie{{Name: "b", Value: "2"}})
	wantErr(t, "Jar.Err() after SetCookies", j.Err(), session.ErrNotFound)
	_, err = m.Jar(ctx, id)
	wantErr(t, "Jar(expired)", err, session.ErrNotFound)
	wantErr(t, "SetHeader(expired)", m.SetHeader(ctx, id, "X-A", "1"), session.ErrNotFound)
}

func managerFencedStaleWriter(t *testing.T, e env) {
	ctx := context.Background()
	ms := managers(t, e, 2, nil)
	id := newSession(t, ms[0], session.CreateOptions{})
	u := mustURL("https://example.com/")

	l1, err := ms[0].Acquire(ctx, id, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ms[1].Acquire(ctx, id, 10*time.Second)
	wantErr(t, "Acquire while held", err, session.ErrLeaseHeld)
	stale := session.WithLease(ctx, l1)
	ja := jar(t, stale, ms[0], id)
	ja.SetCookies(u, []*http.Cookie{{Name: "step", Value: "1"}})
	if err := ja.Err(); err != nil {
		t.Fatalf("fenced SetCookies under a live lease: Err() = %v", err)
	}

	// Worker A stalls past its lease; worker B takes over.
	e.clock.Advance(11 * time.Second)
	l2, err := ms[1].Acquire(ctx, id, 10*time.Second)
	if err != nil || l2.Token <= l1.Token {
		t.Fatalf("Acquire after expiry = %+v, %v", l2, err)
	}
	jb := jar(t, session.WithLease(ctx, l2), ms[1], id)
	jb.SetCookies(u, []*http.Cookie{{Name: "step", Value: "2"}})

	ja.SetCookies(u, []*http.Cookie{{Name: "step", Value: "stale"}})
	wantErr(t, "stale jar Err()", ja.Err(), session.ErrStaleLease)
	wantErr(t, "stale SetHeader", ms[0].SetHeader(stale, id, "X-Step", "stale"), session.ErrStaleLease)
	wantErr(t, "stale SetToken", ms[0].SetToken(stale, id, session.Token{Value: "stale"}), session.ErrStaleLease)
	wantErr(t, "stale Delete", ms[0].Delete(stale, id), session.ErrStaleLease)
	if got := cookieString(jb.Cookies(u)); got != "step=2" {
		t.Errorf("Cookies = %q, want %q", got, "step=2")
	}
	if err := ms[1].Release(ctx, l2); err != nil {
		t.Errorf("Release = %v", err)
	}
}

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
			_, err = e.store.MergeCookies(ctx, id, 0, session.CookieMerge{Set: []session.Field{{Name: name, Value: v}}})
		} else {
			err = e.store.SetFields(ctx, id, 0, session.FieldWrite{Set: []session.Field{{Name: name, Value: v}}})
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
	ts := m.TokenSource(id)
	if _, err := ts.Token(ctx); err != nil {
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
		if err := e.store.SetFields(ctx, dst, 0, session.FieldWrite{Set: []session.Field{{Name: name, Value: v}}}); err != nil {
			t.Fatal(err)
		}
		_, err := m.Get(ctx, dst)
		wantErr(t, fmt.Sprintf("Get with field %q moved from another session", name), err, session.ErrTampered)
		if err := e.store.SetFields(ctx, dst, 0, session.FieldWrite{Delete: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range raw.Cookies {
		if _, err := e.store.MergeCookies(ctx, dst, 0, session.CookieMerge{Set: []session.Field{{Name: name, Value: v}}}); err != nil {
			t.Fatal(err)
		}
		_, err := m.Get(ctx, dst)
		wantErr(t, "Get with a cookie moved from another session", err, session.ErrTampered)
		if _, err := e.store.MergeCookies(ctx, dst, 0, session.CookieMerge{Delete: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	// A value moved to another field of its own session.
	if err := e.store.SetFields(ctx, src, 0, session.FieldWrite{Set: []session.Field{{Name: "h/X-Moved", Value: raw.Fields["h/X-Api-Key"]}}}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Get(ctx, src)
	wantErr(t, "Get with a header value moved to another field", err, session.ErrTampered)
	// A whole record recreated under another ID.
	now := e.clock.Now()
	copyID := session.NewID()
	if err := e.store.Create(ctx, session.Record{ID: copyID, Created: now, Expires: now.Add(time.Hour), Fields: raw.Fields, Cookies: raw.Cookies}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Get(ctx, copyID)
	wantErr(t, "Get of a record copied under another ID", err, session.ErrTampered)
}

func managerKeyRotation(t *testing.T, e env) {
	ctx := context.Background()
	k1, k2 := session.GenerateKey(1), session.GenerateKey(2)
	ring := func(keys ...session.Key) *session.Manager {
		kr, err := session.NewKeyring(keys...)
		if err != nil {
			t.Fatal(err)
		}
		return session.New(session.Config{Store: e.store, Keyring: kr, Now: e.clock.Now})
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

func managerCookieBound(t *testing.T, e env) {
	ms := managers(t, e, 2, nil) // default bound: 3000
	id := newSession(t, ms[0], session.CreateOptions{})
	j := jar(t, context.Background(), ms[0], id)
	u := mustURL("https://example.com/")
	const total, batch = 5000, 100
	for i := 0; i < total; i += batch {
		cs := make([]*http.Cookie, batch)
		for k := range cs {
			cs[k] = &http.Cookie{Name: fmt.Sprintf("c%05d", i+k), Value: "v"}
		}
		j.SetCookies(u, cs)
	}
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.Stored != total || st.Evicted != total-3000 {
		t.Errorf("Stats() = %+v, want Stored %d, Evicted %d", st, total, total-3000)
	}
	got := jar(t, context.Background(), ms[1], id).Cookies(u)
	if len(got) != 3000 {
		t.Fatalf("Cookies() = %d cookies, want 3000", len(got))
	}
	seen := map[string]bool{}
	for _, c := range got {
		seen[c.Name] = true
	}
	if seen["c01999"] || !seen["c02000"] || !seen["c04999"] {
		t.Errorf("kept c01999 %v, c02000 %v, c04999 %v; want the oldest evicted: false, true, true", seen["c01999"], seen["c02000"], seen["c04999"])
	}
}

func managerBadCookies(t *testing.T, e env) {
	ctx := context.Background()
	m := managers(t, e, 1, nil)[0]
	id := newSession(t, m, session.CreateOptions{})
	j := jar(t, ctx, m, id)
	u := mustURL("https://www.example.com/")
	j.SetCookies(u, []*http.Cookie{{Name: "keep", Value: "original"}})
	before := get(t, e, id)

	huge := strings.Repeat("x", 64<<10)
	j.SetCookies(u, []*http.Cookie{
		{Name: "keep", Value: huge},                         // too large: the stored one stays
		{Name: "evil", Value: "1", Domain: "attacker.test"}, // not our domain
		{Name: "wide", Value: "1", Domain: "co.uk"},         // public suffix
		{Name: "dots", Value: "1", Domain: "example.com."},  // malformed
		{Name: "path", Value: "1", Path: "/" + huge},        // attribute too large
		nil,
	})
	if err := j.Err(); err != nil {
		t.Errorf("Err() = %v, want nil: bad cookies are dropped, not errors", err)
	}
	if st := j.Stats(); st.TooLarge != 2 || st.BadDomain != 3 || st.Stored != 1 {
		t.Errorf("Stats() = %+v, want TooLarge 2, BadDomain 3, Stored 1", st)
	}
	after := get(t, e, id)
	if after.Version != before.Version {
		t.Errorf("record changed by dropped cookies: version %d→%d", before.Version, after.Version)
	}
	if got := cookieString(j.Cookies(u)); got != "keep=original" {
		t.Errorf("Cookies() = %q, want %q", got, "keep=original")
	}

	// Through a real server: a 64 KiB Set-Cookie is dropped, the page served.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "big", Value: huge[:64<<10-16]})
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	resp, err := (&http.Client{Jar: j}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := j.Stats(); st.TooLarge != 3 || resp.StatusCode != http.StatusOK {
		t.Errorf("after a 64 KiB Set-Cookie: status %d, TooLarge %d; want 200, 3", resp.StatusCode, st.TooLarge)
	}

	for _, bad := range []string{"", "a\nb", "a\x00", "tab\t", "{x}", strings.Repeat("a", session.MaxIDLen+1)} {
		_, err := m.Create(ctx, bad, session.CreateOptions{})
		wantErr(t, fmt.Sprintf("Create(%q)", bad), err, session.ErrInvalidID)
		_, err = m.Jar(ctx, bad)
		wantErr(t, fmt.Sprintf("Jar(%q)", bad), err, session.ErrInvalidID)
		_, err = m.Get(ctx, bad)
		wantErr(t, fmt.Sprintf("Get(%q)", bad), err, session.ErrInvalidID)
	}
}

func managerBind(t *testing.T, e env) {
	ctx := context.Background()
	ms := managers(t, e, 2, nil)
	id := newSession(t, ms[0], session.CreateOptions{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = ms[i%2].Bind(ctx, id, fmt.Sprint("ep-", i)) })
	}
	wg.Wait()
	s, err := ms[1].Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			if want := fmt.Sprint("ep-", i); s.Endpoint != want {
				t.Errorf("Bind(%s) = nil but the session is bound to %q", want, s.Endpoint)
			}
		case !errors.Is(err, session.ErrAlreadyBound):
			t.Errorf("Bind = %v, want nil or ErrAlreadyBound", err)
		}
	}
	if won != 1 {
		t.Errorf("%d concurrent Binds won, want 1", won)
	}
	if err := ms[0].Bind(ctx, id, s.Endpoint); err != nil {
		t.Errorf("Bind(same endpoint) = %v, want nil", err)
	}
	if err := ms[0].Rebind(ctx, id, "ep-new"); err != nil {
		t.Fatal(err)
	}
	if s, err := ms[1].Get(ctx, id); err != nil || s.Endpoint != "ep-new" {
		t.Errorf("after Rebind: Endpoint %q, %v; want ep-new", s.Endpoint, err)
	}
}

// tokenServer issues tokens on POST /token and serves GET /api to the
// holders of a valid one. It counts both.
type tokenServer struct {
	*httptest.Server
	mu      sync.Mutex // guards the fields below
	valid   map[string]bool
	issued  int
	served  int
	refused int
	fail    bool
}

func newTokenServer(initial string) *tokenServer {
	ts := &tokenServer{valid: map[string]bool{}}
	if initial != "" {
		ts.valid[initial] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.fail {
			http.Error(w, "token service down", http.StatusServiceUnavailable)
			return
		}
		ts.issued++
		tok := fmt.Sprint("issued-", ts.issued)
		ts.valid[tok] = true
		fmt.Fprint(w, tok)
	})
	mux.HandleFunc("GET /api", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if !ts.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
			ts.refused++
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		ts.served++
	})
	ts.Server = httptest.NewServer(mux)
	return ts
}

// refresher returns a Config.Refresh that asks ts for a token valid for an
// hour of clock's time.
func (ts *tokenServer) refresher(now func() time.Time) func(context.Context, session.RefreshRequest) (session.Token, error) {
	return func(ctx context.Context, r session.RefreshRequest) (session.Token, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/token", nil)
		if err != nil {
			return session.Token{}, err
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			return session.Token{}, err
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := fmt.Fprint(&b, readAll(resp)); err != nil {
			return session.Token{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return session.Token{}, fmt.Errorf("token endpoint: %s", resp.Status)
		}
		return session.Token{Type: "Bearer", Value: session.Secret(b.String()), Expires: now().Add(time.Hour)}, nil
	}
}

func readAll(resp *http.Response) string {
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// managerTokenRefreshOnce stores a token valid for 40s (due for refresh
// after 20s with the default skew), lets elapsed pass, and sends 32
// concurrent requests through two Managers.
func managerTokenRefreshOnce(t *testing.T, e env, elapsed time.Duration) {
	ts := newTokenServer("initial")
	defer ts.Close()
	ms := managers(t, e, 2, func(c *session.Config) {
		c.Refresh = ts.refresher(e.clock.Now)
		c.PollInterval = time.Millisecond
	})
	id := newSession(t, ms[0], session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "initial", Expires: e.clock.Now().Add(40 * time.Second)},
	})
	e.clock.Advance(elapsed)
	if elapsed >= 40*time.Second {
		ts.valid["initial"] = false // an expired token is refused
	}

	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		client := &http.Client{Transport: ms[i%2].Transport(ts.Client().Transport, id)}
		wg.Go(func() {
			resp, err := client.Get(ts.URL + "/api")
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request = %v, want 200", err)
	}
	ts.mu.Lock()
	issued, served, refused := ts.issued, ts.served, ts.refused
	ts.mu.Unlock()
	if issued != 1 || served != n || refused != 0 {
		t.Errorf("refreshes %d, served %d, refused %d; want 1, %d, 0", issued, served, refused, n)
	}
	s, err := ms[1].Get(context.Background(), id)
	if err != nil || s.Token.Value != "issued-1" || s.Lease != (session.Lease{}) {
		t.Errorf("stored token %v, lease %+v, %v; want issued-1 and the refresh lease released", s.Token, s.Lease, err)
	}
}

// managerShortToken: a token that lives less than the refresh skew is
// refreshed halfway through its life, not on every request.
func managerShortToken(t *testing.T, e env) {
	ts := newTokenServer("initial")
	defer ts.Close()
	m := managers(t, e, 1, func(c *session.Config) {
		c.Refresh = func(ctx context.Context, r session.RefreshRequest) (session.Token, error) {
			tok, err := ts.refresher(e.clock.Now)(ctx, r)
			tok.Expires = e.clock.Now().Add(10 * time.Second) // shorter than the 30s skew
			return tok, err
		}
	})[0]
	id := newSession(t, m, session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "initial", Expires: e.clock.Now().Add(10 * time.Second)},
	})
	client := &http.Client{Transport: m.Transport(ts.Client().Transport, id)}
	// Requests at 0s, 3s, 6s, 9s and 12s; the first token is due at 5s,
	// the one refreshed at 6s (expiring at 16s) is due at 11s.
	for range 5 {
		for range 3 {
			resp, err := client.Get(ts.URL + "/api")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		e.clock.Advance(3 * time.Second)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.issued != 2 || ts.served != 15 {
		t.Errorf("refreshes %d, served %d; want 2, 15", ts.issued, ts.served)
	}
}

// gatedStore holds Acquire calls until its gate opens.
type gatedStore struct {
	session.Store
	gate    chan struct{}
	waiting chan struct{} // receives once per held Acquire
}

func (g *gatedStore) Acquire(ctx context.Context, id, holder string, ttl time.Duration) (session.Lease, error) {
	g.waiting <- struct{}{}
	<-g.gate
	return g.Store.Acquire(ctx, id, holder, ttl)
}

// managerTokenRefreshedMeanwhile: worker B reads an expired token, worker
// A refreshes it before B takes the lease; B must use A's token, not
// refresh again.
func managerTokenRefreshedMeanwhile(t *testing.T, e env) {
	ts := newTokenServer("")
	defer ts.Close()
	tweak := func(c *session.Config) {
		c.Refresh = ts.refresher(e.clock.Now)
		c.PollInterval = time.Millisecond
	}
	a := managers(t, e, 1, tweak)[0]
	gated := &gatedStore{Store: e.store, gate: make(chan struct{}), waiting: make(chan struct{}, 1)}
	e.store = gated
	b := managers(t, e, 1, tweak)[0]
	id := newSession(t, a, session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "expired", Expires: e.clock.Now().Add(-time.Second)},
	})

	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: b.Transport(ts.Client().Transport, id)}).Get(ts.URL + "/api")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	select {
	case <-gated.waiting: // B has read the expired token and wants the lease
	case err := <-done:
		t.Fatalf("worker B returned %v before taking the lease", err)
	}
	resp, err := (&http.Client{Transport: a.Transport(ts.Client().Transport, id)}).Get(ts.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(gated.gate)
	if err := <-done; err != nil {
		t.Errorf("worker B = %v, want 200", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.issued != 1 || ts.served != 2 {
		t.Errorf("refreshes %d, served %d; want 1, 2", ts.issued, ts.served)
	}
}

func managerTokenRefreshFailure(t *testing.T, e env) {
	ts := newTokenServer("")
	defer ts.Close()
	ts.fail = true
	m := managers(t, e, 1, func(c *session.Config) {
		c.Refresh = ts.refresher(e.clock.Now)
		c.PollInterval = time.Millisecond
	})[0]
	id := newSession(t, m, session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "stale-token-value", Expires: e.clock.Now().Add(-time.Second)},
	})
	client := &http.Client{Transport: m.Transport(ts.Client().Transport, id)}
	resp, err := client.Get(ts.URL + "/api")
	if err == nil {
		resp.Body.Close()
	}
	var re *session.RefreshError
	if !errors.As(err, &re) || re.ID != id {
		t.Errorf("GET with an unrefreshable expired token = %v, want *RefreshError", err)
	}
	if err != nil && strings.Contains(err.Error(), "stale-token-value") {
		t.Errorf("error %q holds the token value", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.served+ts.refused != 0 {
		t.Errorf("the server received %d requests, want 0: never send a stale token", ts.served+ts.refused)
	}
}
