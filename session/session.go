package session

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/egresskit/egresskit/session/sessionstore"
)

// Session is a snapshot of one session, opened, as Manager.Get returns it
// to a crawler author. Its fmt output for every verb, its LogValue and its
// JSON show names and counts, never a cookie, header or token value.
type Session struct {
	// ID names the session.
	ID string
	// Version counts the changes to the session's record.
	Version uint64
	// Created is when the session was created; Expires when it ends.
	Created, Expires time.Time
	// Endpoint is the egress endpoint the session is bound to; empty when
	// unbound.
	Endpoint string
	// Header holds the headers sent with every request of the session.
	Header http.Header
	// Token is the session's token; its Value is empty when there is none.
	Token Token
	// Cookies holds every stored cookie with its attributes, expired ones
	// excluded.
	Cookies []*http.Cookie
	// Lease is the live lease, zero when none is live.
	Lease sessionstore.Lease
}

// Token is a credential sent as a header with every request of a session,
// and refreshed before it expires; a crawler author stores it with
// CreateOptions or Manager.SetToken. Its secrets are of type Secret, so
// printing a Token never shows them.
type Token struct {
	// Type prefixes Value in the header ("Bearer"); empty sends Value alone.
	Type string
	// Value is the credential.
	Value Secret
	// Refresh is an optional credential the Refresh function uses to get
	// a new Token (an OAuth 2.0 refresh token, say).
	Refresh Secret
	// Expires is when Value stops being valid; zero means never.
	Expires time.Time

	// refreshAt is when a refresh falls due; set when the token is
	// stored (see Manager.sealToken).
	refreshAt time.Time
}

// valid reports whether t holds a value that has not expired at now.
func (t Token) valid(now time.Time) bool {
	return t.Value != "" && (t.Expires.IsZero() || now.Before(t.Expires))
}

// headerValue is the header value that carries t.
func (t Token) headerValue() string {
	if t.Type == "" {
		return string(t.Value)
	}
	return t.Type + " " + string(t.Value)
}

// describe describes t without its secrets.
func (t Token) describe() string {
	if t.Value == "" {
		return "session.Token{none}"
	}
	exp := "never"
	if !t.Expires.IsZero() {
		exp = t.Expires.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("session.Token{Type:%q, Value:%s, Expires:%s}", t.Type, redacted, exp)
}

// logValue describes t without its secrets.
func (t Token) logValue() slog.Value {
	return slog.GroupValue(slog.String("type", t.Type), slog.Bool("set", t.Value != ""), slog.Time("expires", t.Expires))
}

// describe describes s by names and counts, never by value.
func (s Session) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session.Session{ID:%q, Version:%d, Created:%s, Expires:%s", s.ID, s.Version,
		s.Created.UTC().Format(time.RFC3339), s.Expires.UTC().Format(time.RFC3339))
	if s.Endpoint != "" {
		fmt.Fprintf(&b, ", Endpoint:%q", s.Endpoint)
	}
	fmt.Fprintf(&b, ", Header:%v, Token:%s, Cookies:%d", headerNames(s.Header), s.Token.describe(), len(s.Cookies))
	if s.Lease.Token != 0 {
		fmt.Fprintf(&b, ", Lease:%d", s.Lease.Token)
	}
	b.WriteString("}")
	return b.String()
}

// Format writes the session by names and counts, never by value, for
// every verb.
func (s Session) Format(f fmt.State, _ rune) { f.Write([]byte(s.describe())) }

// LogValue describes s by names and counts, never by value.
func (s Session) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", s.ID),
		slog.Uint64("version", s.Version),
		slog.Time("expires", s.Expires),
		slog.String("endpoint", s.Endpoint),
		slog.Any("headers", headerNames(s.Header)),
		slog.Attr{Key: "token", Value: s.Token.logValue()},
		slog.Int("cookies", len(s.Cookies)),
	)
}

func headerNames(h http.Header) []string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// sessionJSON is a Session as MarshalJSON writes it: names and counts.
type sessionJSON struct {
	ID       string    `json:"id"`
	Version  uint64    `json:"version"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Endpoint string    `json:"endpoint,omitempty"`
	Headers  []string  `json:"headers"`
	Token    tokenJSON `json:"token"`
	Cookies  []string  `json:"cookies"`
	Lease    uint64    `json:"lease,omitempty"`
}

// tokenJSON is a Token without its secrets.
type tokenJSON struct {
	Type    string    `json:"type,omitempty"`
	Set     bool      `json:"set"`
	Expires time.Time `json:"expires,omitzero"`
}

func (t Token) json() tokenJSON {
	return tokenJSON{Type: t.Type, Set: t.Value != "", Expires: t.Expires}
}

// MarshalJSON writes the session by names and counts: header names,
// cookie names, whether a token is set; never a header, cookie or token
// value, so that encoders working by reflection (encoding/json, slog's
// JSON handler, zap, zerolog) show no credential.
func (s Session) MarshalJSON() ([]byte, error) {
	cookies := make([]string, 0, len(s.Cookies))
	for _, c := range s.Cookies {
		if c != nil {
			cookies = append(cookies, c.Name)
		}
	}
	return json.Marshal(sessionJSON{ID: s.ID, Version: s.Version, Created: s.Created, Expires: s.Expires,
		Endpoint: s.Endpoint, Headers: headerNames(s.Header), Token: s.Token.json(), Cookies: cookies,
		Lease: s.Lease.Token})
}

// Format writes the options by names, never by value, for every verb.
func (o CreateOptions) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "session.CreateOptions{TTL:%s, Endpoint:%q, Header:%v, Token:%s}", o.TTL, o.Endpoint,
		headerNames(o.Header), o.Token.describe())
}

// MarshalJSON writes the options by names: header names and whether a
// token is set, never a value.
func (o CreateOptions) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		TTL      time.Duration `json:"ttl"`
		Endpoint string        `json:"endpoint,omitempty"`
		Headers  []string      `json:"headers"`
		Token    tokenJSON     `json:"token"`
	}{o.TTL, o.Endpoint, headerNames(o.Header), o.Token.json()})
}
