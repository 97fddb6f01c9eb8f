package sessiontest

import (
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

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/internal/peek"
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
	{"Manager/CrossSuffixCookie", managerCrossSuffixCookie},
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
		m, err := session.New(c)
		if err != nil {
			t.Fatalf("session.New: %v", err)
		}
		ms[i] = m
	}
	return ms
}

func newSession(t *testing.T, m *session.Manager, o session.CreateOptions) string {
	t.Helper()
	id := sessionkit.NewID()
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
	if st := peek.Stats(ja); st.BadDomain != 2 || st.Stored != 6 {
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
	if st := peek.Stats(j); st.Stored != total || st.Evicted != total-3000 {
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
	if st := peek.Stats(j); st.TooLarge != 2 || st.BadDomain != 3 || st.Stored != 1 {
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
	if st := peek.Stats(j); st.TooLarge != 3 || resp.StatusCode != http.StatusOK {
		t.Errorf("after a 64 KiB Set-Cookie: status %d, TooLarge %d; want 200, 3", resp.StatusCode, st.TooLarge)
	}

	for _, bad := range []string{"", "a\nb", "a\x00", "tab\t", "{x}", strings.Repeat("a", 128+1)} {
		_, err := m.Create(ctx, bad, session.CreateOptions{})
		wantErr(t, fmt.Sprintf("Create(%q)", bad), err, session.ErrInvalidID)
		_, err = m.Jar(ctx, bad)
		wantErr(t, fmt.Sprintf("Jar(%q)", bad), err, session.ErrInvalidID)
		_, err = m.Get(ctx, bad)
		wantErr(t, fmt.Sprintf("Get(%q)", bad), err, session.ErrInvalidID)
	}
}

// managerCrossSuffixCookie: a host under a public suffix of the list's
// private section (s3.amazonaws.com) cannot set a cookie for the suffix or
// anything above it, so no other tenant's host, and not amazonaws.com,
// receives it.
func managerCrossSuffixCookie(t *testing.T, e env) {
	ctx := context.Background()
	m := managers(t, e, 1, nil)[0]
	id := newSession(t, m, session.CreateOptions{})
	j := jar(t, ctx, m, id)
	j.SetCookies(mustURL("https://bucket.s3.amazonaws.com/"), []*http.Cookie{
		{Name: "own", Value: "1"},
		{Name: "aws", Value: "1", Domain: "amazonaws.com"},
		{Name: "s3", Value: "1", Domain: "s3.amazonaws.com"},
		{Name: "reg", Value: "1", Domain: "bucket.s3.amazonaws.com"},
	})
	if st := peek.Stats(j); st.BadDomain != 2 || st.Stored != 2 {
		t.Errorf("Stats() = %+v, want BadDomain 2, Stored 2", st)
	}
	for _, tt := range []struct{ url, want string }{
		{"https://bucket.s3.amazonaws.com/", "own=1; reg=1"},
		{"https://www.bucket.s3.amazonaws.com/", "reg=1"},
		{"https://other.s3.amazonaws.com/", ""},
		{"https://s3.amazonaws.com/", ""},
		{"https://amazonaws.com/", ""},
	} {
		if got := cookieString(j.Cookies(mustURL(tt.url))); got != tt.want {
			t.Errorf("Cookies(%s) = %q, want %q", tt.url, got, tt.want)
		}
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
