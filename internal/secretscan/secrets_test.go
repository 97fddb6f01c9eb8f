package secretscan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/telemetry"
)

// The secrets, each distinct, so that a leak names its way in.
const (
	userinfoPass = "UinfoPw-7c1d9e"
	queryToken   = "QueryTok-3b8a2f"
	bearer       = "BearerTok-5e4c1a"
	cookieVal    = "CookieVal-9d2b7e"
	proxyPass    = "ProxyPw-1f6a3c"
	sessionTok   = "SessTok-8e3d2b"
	sessionHdr   = "SessHdr-4a9c1f"
	consoleTok   = "ConsoleTok-2d7f9b4e1a6c"
)

var secrets = []string{userinfoPass, queryToken, bearer, cookieVal, proxyPass, sessionTok, sessionHdr, consoleTok}

// encodings returns v as encoding/json, fmt (%v %+v %#v %s) and slog's
// text and JSON handlers write it.
func encodings(v any) map[string]string {
	out := map[string]string{}
	js, err := json.Marshal(v)
	if err != nil {
		out["json error"] = err.Error()
	}
	out["json"] = string(js)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out[verb] = fmt.Sprintf(verb, v)
	}
	var text, jsonLog bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("m", "v", v)
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("m", "v", v)
	out["slog text"], out["slog json"] = text.String(), jsonLog.String()
	return out
}

// TestSecretsNeverShown crawls a site that refuses and echoes the
// request's credentials back in its body, through a chain with an
// observer, an audit log and an escalation hook; then encodes every value
// the crawl and its operator tools produce, and every exported type that
// holds a credential, in every encoding. No secret may appear.
func TestSecretsNeverShown(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		echo, _ := json.Marshal(map[string]any{"headers": map[string]string{
			"Authorization": r.Header.Get("Authorization"), "Cookie": r.Header.Get("Cookie")}, "password": userinfoPass})
		fmt.Fprintf(w, "<html><body>Access denied: TestBot is blocked.\nAuthorization: %s\nCookie: %s\nX-Api-Key: %s\n%s\n</body></html>",
			r.Header.Get("Authorization"), r.Header.Get("Cookie"), queryToken, echo)
	}))
	defer site.Close()

	st, err := hoststate.NewMemory(hoststate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: auditPath})
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	var mu sync.Mutex
	var events []telemetry.Event
	var escalations []egresskit.Escalation
	var logged bytes.Buffer
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tr, err := egresskit.New(egresskit.Config{Store: st, Egress: pool, IgnoreRobots: true, UserAgent: "TestBot/1.0", Audit: audit,
		Observers: []telemetry.Observer{
			telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
				mu.Lock()
				events = append(events, *e)
				mu.Unlock()
			}),
			telemetry.NewSlog(slog.New(slog.NewJSONHandler(&logged, nil)), telemetry.SlogOptions{}),
		},
		OnEscalate: func(e egresskit.Escalation) {
			mu.Lock()
			escalations = append(escalations, e)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	u.User = url.UserPassword("crawler", userinfoPass)
	u.Path, u.RawQuery = "/page", "api_key="+queryToken
	req, _ := http.NewRequest("GET", u.String(), nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Cookie", "sid="+cookieVal)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !egresskit.Halted(resp) {
		t.Fatal("the site did not halt")
	}
	// The chain's own error for a halted host. (http.Client.Do wraps it in a
	// *url.Error holding the request's URL with its query, which only
	// telemetry.Redactor.RedactError cleans: that is net/http's value.)
	_, haltedErr := tr.RoundTrip(req)
	if haltedErr == nil {
		t.Fatal("a request to the halted host succeeded")
	}
	key, _ := tr.HostKey(site.URL)
	halts, notes, herr := st.History(context.Background(), key)
	queue, qerr := st.Halts(context.Background(), 0)

	// Session values holding a header, a token and a cookie.
	now := time.Now()
	m, err := session.New(session.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	opts := session.CreateOptions{Header: http.Header{"X-Api-Key": {sessionHdr}},
		Token: session.Token{Type: "Bearer", Value: session.Secret(sessionTok), Refresh: session.Secret(sessionTok)}}
	if _, err := m.Create(context.Background(), "s1", opts); err != nil {
		t.Fatal(err)
	}
	jar, _ := m.Jar(context.Background(), "s1")
	jar.SetCookies(u, []*http.Cookie{{Name: "sid", Value: cookieVal}})
	sess, err := m.Get(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}

	ep := egress.Endpoint{ID: "paid", Proxy: "http://user:" + proxyPass + "@127.0.0.1:3128"}
	cc := console.Config{Store: st, Token: consoleTok}
	mu.Lock()
	defer mu.Unlock()
	if len(escalations) == 0 || len(events) == 0 {
		t.Fatalf("%d escalations, %d events: the chain did not report the refusal", len(escalations), len(events))
	}
	values := map[string]any{
		"escalation": escalations[0], "*escalation": &escalations[0],
		"event": events[0], "*event": &events[0], "events": events,
		"halts": halts, "notes": notes, "queue": queue,
		"session": *sess, "*session": sess, "options": opts, "token": sess.Token,
		"endpoint": ep, "*endpoint": &ep, "egress config": egress.Config{Endpoints: []egress.Endpoint{ep}},
		"console config": cc, "*console config": &cc,
		"error": haltedErr, "history error": errors.Join(herr, qerr),
		"response header": resp.Header,
	}
	found := 0
	for name, v := range values {
		for enc, out := range encodings(v) {
			for _, s := range secrets {
				if strings.Contains(out, s) {
					found++
					t.Errorf("%s as %s shows the secret %q:\n%s", name, enc, s, out)
				}
			}
		}
	}
	audit.Close()
	for what, text := range map[string]string{"slog observer": logged.String(), "audit log": readFile(t, auditPath), "body head": string(escalations[0].BodyHead)} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the secret %q:\n%s", what, s, text)
			}
		}
	}
	if !strings.Contains(string(escalations[0].BodyHead), "TestBot is blocked") {
		t.Errorf("the escalation's body head lost its text: %q", escalations[0].BodyHead)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
