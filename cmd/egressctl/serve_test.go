package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/redistest"
)

var csrfInPage = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestServeRefuses drives the real `egressctl serve`: a start without a
// token off loopback, a weak token, DNS rebinding, a cross-origin POST, a
// stolen cookie after sign-out and a burst of wrong tokens are each
// refused.
func TestServeRefuses(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	key := haltOne(t, addr, prefix)
	g := []string{"-redis", addr, "-prefix", prefix}

	for _, tt := range []struct {
		name string
		env  []string
		args []string
		msg  string
	}{
		{"no token", nil, []string{"serve", "-addr", "127.0.0.1:0"}, "EGRESSCTL_TOKEN"},
		{"-no-token off loopback", nil, []string{"serve", "-no-token", "-addr", "0.0.0.0:0"}, "loopback"},
		{"-no-token on a name", nil, []string{"serve", "-no-token", "-addr", "example.com:0"}, "loopback"},
		{"weak token", []string{"EGRESSCTL_TOKEN=s3cret-pw"}, []string{"serve", "-addr", "127.0.0.1:0"}, "too weak"},
		{"hex token of 120 bits", []string{"EGRESSCTL_TOKEN=0123456789abcdef0123456789abcd"}, []string{"serve", "-addr", "127.0.0.1:0"}, "too weak"},
	} {
		env := append([]string{"EGRESSCTL_TOKEN="}, tt.env...)
		code, _, errs := ctl(t, env, append(g, tt.args...)...)
		if code != exitUsage || !strings.Contains(errs, tt.msg) {
			t.Errorf("%s: exit %d, %q; want 2 mentioning %q", tt.name, code, errs, tt.msg)
		}
	}

	// -no-token on loopback starts, and still checks Host.
	open := serveConsole(t, []string{"EGRESSCTL_TOKEN="}, append(g, "serve", "-no-token", "-addr", "127.0.0.1:0")...)
	if code, page := fetch(t, http.DefaultClient, "GET", open, "", nil, nil); code != 200 || !strings.Contains(page, key) {
		t.Errorf("-no-token on loopback: %d", code)
	}
	if code, page := fetch(t, http.DefaultClient, "GET", open, "rebind.attacker.example", nil, nil); code != http.StatusMisdirectedRequest || strings.Contains(page, key) {
		t.Errorf("-no-token, DNS rebinding: %d, want 421", code)
	}

	const token = "real-binary-token-5b2e8c71d9"
	base := serveConsole(t, []string{"EGRESSCTL_TOKEN=" + token}, append(g, "serve", "-addr", "127.0.0.1:0", "-name", "ops.example")...)
	bearer := http.Header{"Authorization": {"Bearer " + token}}
	u, _ := url.Parse(base)
	port := u.Port()
	for _, tt := range []struct {
		host string
		code int
	}{
		{"", 200},
		{"localhost:" + port, 200},
		{"ops.example:" + port, 200},
		{"rebind.attacker.example:" + port, http.StatusMisdirectedRequest},
		{"127.0.0.1.nip.io:" + port, http.StatusMisdirectedRequest},
	} {
		if code, page := fetch(t, http.DefaultClient, "GET", base, tt.host, bearer, nil); code != tt.code || code != 200 && strings.Contains(page, key) {
			t.Errorf("Host %q: %d, want %d", tt.host, code, tt.code)
		}
	}

	// Sign in; a cross-origin POST is refused; sign out; the stolen cookie
	// is refused.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, page := fetch(t, browser, "GET", base+"login", "", nil, nil)
	csrf := csrfInPage.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF field:\n%s", page)
	}
	if code, _ := fetch(t, browser, "POST", base+"login", "", nil, url.Values{"csrf": {csrf[1]}, "token": {token}}); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d", code)
	}
	var stolen string
	for _, c := range jar.Cookies(u) {
		if c.Name == "egresskit_console" {
			stolen = c.Value
		}
	}
	if stolen == "" || stolen == token || strings.Contains(stolen, token) {
		t.Fatalf("session cookie %q", stolen)
	}
	form := url.Values{"csrf": {csrf[1]}, "h": {key}, "by": {"ana"}, "reason": {"ok"}}
	if code, _ := fetch(t, browser, "POST", base+"resume", "", http.Header{"Origin": {"http://rebind.attacker.example:" + port}}, form); code != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d, want 403", code)
	}
	if code, _, _ := ctl(t, nil, append(g, "show", "-json", key)...); code != 0 {
		t.Errorf("show after the refused POST: exit %d", code)
	}
	cookie := http.Header{"Cookie": {"egresskit_console=" + stolen}}
	if code, page := fetch(t, http.DefaultClient, "GET", base, "", cookie, nil); code != 200 || !strings.Contains(page, key) {
		t.Errorf("the session cookie before sign-out: %d", code)
	}
	if code, _ := fetch(t, browser, "POST", base+"logout", "", nil, url.Values{"csrf": {csrf[1]}}); code != http.StatusSeeOther {
		t.Errorf("sign out: %d", code)
	}
	if code, page := fetch(t, http.DefaultClient, "GET", base, "", cookie, nil); code != http.StatusUnauthorized || strings.Contains(page, key) {
		t.Errorf("the stolen cookie after sign-out: %d, want 401", code)
	}

	// 100 wrong tokens in a burst: all refused, most without a comparison.
	counts := map[int]int{}
	for i := range 100 {
		code, page := fetch(t, http.DefaultClient, "GET", base, "", http.Header{"Authorization": {"Bearer guess-" + strings.Repeat("x", i)}}, nil)
		counts[code]++
		if strings.Contains(page, key) {
			t.Fatal("a wrong token saw the queue")
		}
	}
	if counts[200] != 0 || counts[http.StatusTooManyRequests] < 80 {
		t.Errorf("100 wrong tokens: %v, want none accepted and at least 80 limited (429)", counts)
	}
}

// fetch sends a request with an optional Host, headers and form, and
// returns the status and body.
func fetch(t *testing.T, c *http.Client, method, u, host string, hdr http.Header, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
