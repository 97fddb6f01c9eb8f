package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// TestSecretsNeverShown puts one unique secret in every place a session
// keeps one — header, token, refresh token, cookie — then collects every
// string the package can produce about the session: fmt output, slog
// output, JSON, and every error along the failure paths. None may hold it.
func TestSecretsNeverShown(t *testing.T) {
	const secret = "S3cr3t-9f2c4e1a"
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var hooked []error
	store := session.NewMemoryStore(func() time.Time { return now })
	m := mustManager(session.Config{
		Store: store,
		Now:   func() time.Time { return now },
		Refresh: func(context.Context, string, session.Token) (session.Token, error) {
			return session.Token{}, errors.New("token endpoint said no")
		},
		OnError: func(err error) { hooked = append(hooked, err) },
	})
	opts := session.CreateOptions{
		Endpoint: "ep-1",
		Header:   http.Header{"Authorization": {"Basic " + secret}, "Cookie": {"c=" + secret}},
		Token:    session.Token{Type: "Bearer", Value: secret, Refresh: secret, Expires: now.Add(-time.Second)},
	}
	created, err := m.Create(ctx, "s1", opts)
	if err != nil {
		t.Fatal(err)
	}
	j, err := m.Jar(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://example.com/")
	j.SetCookies(u, []*http.Cookie{{Name: "sid", Value: secret}})
	s, err := m.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}

	// Key material holding the secret, 32 bytes.
	key := session.Key{ID: 1, Secret: session.Secret(secret + "-" + secret + "!")}
	if _, err := session.NewKeyring(key); err != nil {
		t.Fatal(err)
	}

	var out []string
	add := func(what string, v any) { out = append(out, fmt.Sprintf("%s: %v", what, v)) }
	add("created", created)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		add("session "+verb, fmt.Sprintf(verb, s))
		add("*session "+verb, fmt.Sprintf(verb, *s))
		add("token "+verb, fmt.Sprintf(verb, s.Token))
		add("*token "+verb, fmt.Sprintf(verb, &s.Token))
		add("secret "+verb, fmt.Sprintf(verb, s.Token.Value))
		add("key "+verb, fmt.Sprintf(verb, key))
		add("keys "+verb, fmt.Sprintf(verb, []session.Key{key}))
		add("options "+verb, fmt.Sprintf(verb, opts))
		add("*options "+verb, fmt.Sprintf(verb, &opts))
	}
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var logged bytes.Buffer
		logger := slog.New(h(&logged))
		logger.Info("session", "s", s, "token", s.Token, "value", s.Token.Value, "key", key)
		logger.Info("session value", "s", *s, "refresh", s.Token.Refresh, "keys", []session.Key{key})
		logger.Info("options", "o", opts, "po", &opts, "sessions", []session.Session{*s})
		add("slog", logged.String())
	}
	for _, v := range []any{s, *s, []*session.Session{s}, opts, &opts, s.Token, &s.Token, s.Token.Value, key, []session.Key{key}} {
		js, err := json.Marshal(v)
		add("json", string(js))
		if err != nil {
			t.Errorf("json.Marshal(%T) = %v", v, err)
		}
	}
	add("transport", m.Transport(nil, "s1"))

	// Failure paths.
	next := &recorder{}
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	_, err = m.Transport(next, "s1").RoundTrip(req)
	if !errors.As(err, new(*session.RefreshError)) || !strings.Contains(err.Error(), `"s1"`) {
		t.Errorf("RoundTrip with an expired token = %v, want *RefreshError", err)
	}
	add("refresh error", err)
	if err := m.SetToken(ctx, "s1", session.Token{Value: secret}); err != nil {
		t.Fatal(err)
	}
	next.err = egress.ErrBindingUnavailable
	_, err = m.Transport(next, "s1").RoundTrip(req)
	add("egress lost", err)
	l1, _ := m.Acquire(ctx, "s1", time.Second)
	_, err = m.Acquire(ctx, "s1", time.Second)
	add("lease held", err)
	now = now.Add(2 * time.Second)
	m.Acquire(ctx, "s1", time.Second)
	add("stale lease", m.SetHeader(session.WithLease(ctx, l1), "s1", "Authorization", secret))
	stale, _ := m.Jar(session.WithLease(ctx, l1), "s1")
	stale.SetCookies(u, []*http.Cookie{{Name: "sid", Value: secret}})
	add("stale jar", stale.Err())
	add("bad header", m.SetHeader(ctx, "s1", "X-Bad", secret+"\r\n"))
	raw, _ := store.Get(ctx, "s1", sessionstore.PartFields|sessionstore.PartCookies)
	for name, v := range raw.Cookies {
		bad := bytes.Clone(v)
		bad[len(bad)/2] ^= 1
		store.MergeCookies(ctx, "s1", 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: name, Value: bad}}})
	}
	_, err = m.Get(ctx, "s1")
	add("tampered", err)
	j.Cookies(u)
	add("tampered jar", j.Err())
	add("jar stats", j.Stats())
	for _, err := range hooked {
		add("hook", err)
	}
	if len(hooked) < 2 {
		t.Errorf("OnError received %d errors, want at least 2", len(hooked))
	}

	for _, line := range out {
		t.Log(line)
		if strings.Contains(line, secret) {
			t.Errorf("secret shown in %s", line)
		}
	}
}
