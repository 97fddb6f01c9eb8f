package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/hoststate"
)

const strongToken = "9f2c41d07b3e8a65c1d4f09e7a2b3c48"

// fakeClock is a settable clock for the sessions and the guess limit.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func tokenConsole(t *testing.T, cfg console.Config) (*client, *fakeClock) {
	t.Helper()
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	console.SetNow(h, clk.now)
	return newClient(t, h), clk
}

// signIn signs c in and returns the session cookie's value.
func signIn(t *testing.T, c *client) string {
	t.Helper()
	_, page, _ := c.do("GET", "login", nil, nil)
	code, _, hdr := c.do("POST", "login", url.Values{"csrf": {csrfOf(t, page)}, "token": {strongToken}}, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("sign in: %d", code)
	}
	for _, ck := range (&http.Response{Header: hdr}).Cookies() {
		if ck.Name == "egresskit_console" {
			if ck.Path != "/halts/" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
				t.Errorf("session cookie %+v: want Path=/halts/, HttpOnly, SameSite=Strict", ck)
			}
			return ck.Value
		}
	}
	t.Fatal("sign in set no session cookie")
	return ""
}

func TestWeakToken(t *testing.T) {
	st, _ := hoststate.NewMemory(hoststate.Config{})
	for _, tok := range []string{"s3cret", "t0ken-for-tests", "0123456789abcdef0123456789abcde", strings.Repeat("ab", 40)} {
		if _, err := console.New(console.Config{Store: st, Token: tok}); !errors.Is(err, console.ErrWeakToken) {
			t.Errorf("New(Token %q) = %v, want ErrWeakToken", tok, err)
		}
	}
	for _, tok := range []string{strongToken, "7Jq2vX9pLw4sKd8RmT3yNc6B", "correct horse battery staple!"} {
		if _, err := console.New(console.Config{Store: st, Token: tok}); err != nil {
			t.Errorf("New(Token %q) = %v", tok, err)
		}
	}
}

// TestHostAndOrigin: a request for a name the console was not given
// (DNS rebinding) is refused; a POST from another origin is refused.
func TestHostAndOrigin(t *testing.T) {
	st, key := halted(t)
	c, _ := tokenConsole(t, console.Config{Store: st, Hosts: []string{"ops.example:8443"}})
	for _, tt := range []struct {
		host string
		code int
	}{
		{"", 200}, // the test server's IP address
		{"localhost:1234", 200},
		{"[::1]:80", 200},
		{"ops.example:8443", 200},
		{"OPS.example:8443", 200},
		{"ops.example:9999", 421},
		{"rebind.attacker.example:8080", 421},
		{"rebind.attacker.example", 421},
	} {
		req, _ := http.NewRequest("GET", c.url, nil)
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := c.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("Host %q: %d, want %d", tt.host, resp.StatusCode, tt.code)
		}
	}
	_, page, _ := c.do("GET", "host?h="+key, nil, nil)
	form := url.Values{"csrf": {csrfOf(t, page)}, "h": {key}, "by": {"ana"}, "reason": {"ok"}}
	for _, origin := range []string{"http://attacker.example", "null", "http://ops.example:8443"} {
		if code, _, _ := c.do("POST", "resume", form, http.Header{"Origin": {origin}}); code != http.StatusForbidden {
			t.Errorf("POST from Origin %s: %d, want 403", origin, code)
		}
	}
	if s, _ := st.Status(context.Background(), key); !s.Halted {
		t.Fatal("a cross-origin POST resumed the host")
	}
	u, _ := url.Parse(c.url)
	if code, _, _ := c.do("POST", "resume", form, http.Header{"Origin": {"http://" + u.Host}}); code != http.StatusSeeOther {
		t.Errorf("POST from its own origin: %d, want 303", code)
	}
}

// TestSessions: a sign-in is a session the console keeps: its cookie
// stops working at sign-out and at expiry; a proxy's Basic header does
// not hide it.
func TestSessions(t *testing.T) {
	st, key := halted(t)
	c, clk := tokenConsole(t, console.Config{Store: st, Token: strongToken, SessionTTL: time.Hour})
	stolen := signIn(t, c)
	cookie := http.Header{"Cookie": {"egresskit_console=" + stolen}}
	if code, page, _ := c.do("GET", "", nil, http.Header{"Authorization": {"Basic cHJveHk6dXNlcg=="}}); code != 200 || !strings.Contains(page, key) || !strings.Contains(page, `action="logout"`) {
		t.Errorf("signed in, with a proxy's Basic header: %d", code)
	}
	_, page, _ := c.do("GET", "", nil, nil)
	if code, _, hdr := c.do("POST", "logout", url.Values{"csrf": {csrfOf(t, page)}}, nil); code != http.StatusSeeOther || !strings.Contains(hdr.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("sign out: %d, %q", code, hdr.Get("Set-Cookie"))
	}
	if code, page, _ := c.do("GET", "", nil, cookie); code != http.StatusUnauthorized || strings.Contains(page, key) {
		t.Errorf("the cookie after sign-out: %d, want 401", code)
	}

	stolen = signIn(t, c)
	cookie = http.Header{"Cookie": {"egresskit_console=" + stolen}}
	clk.advance(59 * time.Minute)
	if code, _, _ := c.do("GET", "", nil, cookie); code != 200 {
		t.Errorf("the cookie within its hour: %d, want 200", code)
	}
	clk.advance(time.Minute)
	if code, page, _ := c.do("GET", "", nil, cookie); code != http.StatusUnauthorized || strings.Contains(page, key) {
		t.Errorf("the cookie after expiry: %d, want 401", code)
	}
	if code, _, _ := c.do("GET", "", nil, http.Header{"Cookie": {"egresskit_console=" + strings.Repeat("0", 64)}}); code != http.StatusUnauthorized {
		t.Errorf("a made-up cookie: %d, want 401", code)
	}
}

// TestGuessLimit: a burst of wrong tokens is refused, most with 429, and
// while the limit is spent even the right token is not compared.
func TestGuessLimit(t *testing.T) {
	st, key := halted(t)
	c, clk := tokenConsole(t, console.Config{Store: st, Token: strongToken})
	counts := map[int]int{}
	for i := range 100 {
		code, page, _ := c.do("GET", "", nil, http.Header{"Authorization": {"Bearer wrong-" + strings.Repeat("x", i%7)}})
		counts[code]++
		if strings.Contains(page, key) {
			t.Fatal("a wrong token saw the queue")
		}
	}
	if counts[http.StatusUnauthorized] != 10 || counts[http.StatusTooManyRequests] != 90 {
		t.Errorf("100 wrong tokens: %v, want 10 401s and 90 429s", counts)
	}
	_, page, _ := c.do("GET", "login", nil, nil)
	if code, _, _ := c.do("POST", "login", url.Values{"csrf": {csrfOf(t, page)}, "token": {strongToken}}, nil); code != http.StatusTooManyRequests {
		t.Errorf("the right token while the limit is spent: %d, want 429", code)
	}
	clk.advance(time.Second)
	if code, _, _ := c.do("GET", "", nil, http.Header{"Authorization": {"Bearer " + strongToken}}); code != 200 {
		t.Errorf("the right token a second later: %d, want 200", code)
	}
}

// TestKeepAndReasonRules: keep-halted needs a halted host; a reason and a
// name are one line of printable text with something visible.
func TestKeepAndReasonRules(t *testing.T) {
	st, key := halted(t)
	c, _ := tokenConsole(t, console.Config{Store: st})
	_, page, _ := c.do("GET", "host?h="+key, nil, nil)
	tok := csrfOf(t, page)
	if code, _, _ := c.do("POST", "keep", url.Values{"csrf": {tok}, "h": {"never-halted.example"}, "by": {"ana"}, "reason": {"x"}}, nil); code != http.StatusConflict {
		t.Errorf("keep on a host never halted: %d, want 409", code)
	}
	if _, notes, _ := st.History(context.Background(), "never-halted.example"); len(notes) != 0 {
		t.Errorf("keep on a host never halted left %d notes", len(notes))
	}
	for _, f := range []url.Values{
		{"by": {"ana"}, "reason": {"\u200b"}},
		{"by": {"ana"}, "reason": {"ok\nby=root"}},
		{"by": {"ana"}, "reason": {"ok \x1b[2J"}},
		{"by": {"ana"}, "reason": {"\u202eevil"}},
		{"by": {"\u200b\u200b"}, "reason": {"ok"}},
		{"by": {"a\nb"}, "reason": {"ok"}},
	} {
		f.Set("csrf", tok)
		f.Set("h", key)
		if code, _, _ := c.do("POST", "resume", f, nil); code != http.StatusBadRequest {
			t.Errorf("resume with by %q reason %q: %d, want 400", f.Get("by"), f.Get("reason"), code)
		}
	}
	if s, _ := st.Status(context.Background(), key); !s.Halted {
		t.Error("a refused reason resumed the host")
	}
}

// TestSecureCookies: behind a TLS proxy (SecureCookies) every cookie is
// Secure; without it, on plain HTTP, none is.
func TestSecureCookies(t *testing.T) {
	st, _ := halted(t)
	for _, secure := range []bool{false, true} {
		c, _ := tokenConsole(t, console.Config{Store: st, Token: strongToken, SecureCookies: secure})
		_, page, hdr := c.do("GET", "login", nil, nil)
		_, _, hdr2 := c.do("POST", "login", url.Values{"csrf": {csrfOf(t, page)}, "token": {strongToken}}, nil)
		cookies := append((&http.Response{Header: hdr}).Cookies(), (&http.Response{Header: hdr2}).Cookies()...)
		if len(cookies) != 2 {
			t.Fatalf("SecureCookies %v: %d cookies set, want the CSRF and the session cookie", secure, len(cookies))
		}
		for _, ck := range cookies {
			if ck.Secure != secure {
				t.Errorf("SecureCookies %v: cookie %s Secure=%v", secure, ck.Name, ck.Secure)
			}
		}
	}
}
