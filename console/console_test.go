package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/telemetry"
)

const (
	secretQuery = "Qs3cretQueryValue"
	secretPass  = "Pr0xyPassw0rd"
)

// halted returns a store in which a real chain halted a refusing site,
// the site's host key, and the site.
func halted(t *testing.T) (hoststate.Store, string) {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><body>Access denied: TestBot is blocked. password="+secretPass+"</body></html>")
	}))
	t.Cleanup(site.Close)
	st, err := hoststate.NewMemory(hoststate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := egresskit.New(egresskit.Config{Store: st, IgnoreRobots: true, UserAgent: "TestBot/1.0"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	u.User = url.UserPassword("crawler", secretPass)
	u.Path, u.RawQuery = "/page", "api_key="+secretQuery
	resp, err := (&http.Client{Transport: tr}).Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !egresskit.Halted(resp) {
		t.Fatal("the site did not halt")
	}
	key, _ := tr.HostKey(site.URL)
	return st, key
}

type client struct {
	t   *testing.T
	c   *http.Client
	url string
}

func newClient(t *testing.T, h http.Handler) *client {
	srv := httptest.NewServer(http.StripPrefix("/halts", h))
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &client{t: t, url: srv.URL + "/halts/",
		c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path string, form url.Values, hdr http.Header) (int, string, http.Header) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, c.url+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if strings.Contains(page, secretPass) || strings.Contains(page, secretQuery) {
		c.t.Errorf("%s %s shows a secret:\n%s", method, path, page)
	}
	return resp.StatusCode, page, resp.Header
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	return m[1]
}

// TestResumeWithReason: the queue shows the halted host and its evidence;
// its page offers Resume; resuming needs the CSRF token, a name and a
// reason, lifts the halt, and writes a resume line the audit log's
// verifier accepts.
func TestResumeWithReason(t *testing.T) {
	st, key := halted(t)
	logPath := filepath.Join(t.TempDir(), "console.audit")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: logPath})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{Store: st, Audit: audit, AuditFiles: []string{logPath}})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, h)
	code, page, hdr := c.do("GET", "", nil, nil)
	if code != 200 || !strings.Contains(page, key) || !strings.Contains(page, "403") ||
		!strings.Contains(page, "TestBot is blocked") || !strings.Contains(page, "api_key=REDACTED") {
		t.Fatalf("queue: %d\n%s", code, page)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	code, page, _ = c.do("GET", "host?h="+url.QueryEscape("http://"+key+"/x"), nil, nil)
	if code != 200 || !strings.Contains(page, `action="resume"`) {
		t.Fatalf("host page: %d\n%s", code, page)
	}
	tok := csrfOf(t, page)
	form := url.Values{"h": {key}, "by": {"Ana"}, "reason": {"contract signed"}}

	if code, _, _ := c.do("POST", "resume", form, nil); code != http.StatusForbidden {
		t.Errorf("resume without the CSRF token: %d, want 403", code)
	}
	form.Set("csrf", tok)
	if code, _, _ := c.do("POST", "resume", form, http.Header{"Sec-Fetch-Site": {"cross-site"}}); code != http.StatusForbidden {
		t.Errorf("resume from another site: %d, want 403", code)
	}
	if s, _ := st.Status(context.Background(), key); !s.Halted {
		t.Fatal("a refused resume lifted the halt")
	}
	form.Set("reason", " ")
	if code, _, _ := c.do("POST", "resume", form, nil); code != http.StatusBadRequest {
		t.Errorf("resume without a reason: %d, want 400", code)
	}
	form.Set("reason", "contract signed")
	code, _, hdr = c.do("POST", "resume", form, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "host?") {
		t.Fatalf("resume: %d, Location %q", code, hdr.Get("Location"))
	}
	if s, _ := st.Status(context.Background(), key); s.Halted {
		t.Error("resume did not lift the halt")
	}
	code, page, _ = c.do("GET", hdr.Get("Location"), nil, nil)
	if code != 200 || !strings.Contains(page, "Resumed") || !strings.Contains(page, "contract signed") ||
		strings.Contains(page, `action="resume"`) || !strings.Contains(page, "by=&#34;Ana&#34;") {
		t.Errorf("host page after resume: %d\n%s", code, page)
	}
	if code, _, _ := c.do("POST", "resume", form, nil); code != http.StatusConflict {
		t.Errorf("resume of a host no longer halted: %d, want 409", code)
	}
	if code, page, _ := c.do("GET", "", nil, nil); code != 200 || strings.Contains(page, "host?h=") {
		t.Errorf("queue after resume still lists a host:\n%s", page)
	}
	audit.Close()
	if _, err := (telemetry.Verifier{}).VerifyFiles(logPath); err != nil {
		t.Errorf("audit log: %v", err)
	}
	b, _ := os.ReadFile(logPath)
	if !strings.Contains(string(b), `"kind":"resume","host":"`+key+`","by":"Ana","reason":"contract signed"`) {
		t.Errorf("audit log has no resume line:\n%s", b)
	}
}

// TestKeepHalted records a note and leaves the host halted.
func TestKeepHalted(t *testing.T) {
	st, key := halted(t)
	h, _ := console.New(console.Config{Store: st})
	c := newClient(t, h)
	_, page, _ := c.do("GET", "host?h="+key, nil, nil)
	form := url.Values{"csrf": {csrfOf(t, page)}, "h": {key}, "by": {"Bo"}, "reason": {"ask legal first"}}
	if code, _, _ := c.do("POST", "keep", form, nil); code != http.StatusSeeOther {
		t.Fatalf("keep: %d", code)
	}
	if s, _ := st.Status(context.Background(), key); !s.Halted {
		t.Error("keep halted lifted the halt")
	}
	if _, page, _ := c.do("GET", "host?h="+key, nil, nil); !strings.Contains(page, "ask legal first") {
		t.Errorf("host page without the note:\n%s", page)
	}
}

// TestReadOnly: no form on any page, and every POST is refused.
func TestReadOnly(t *testing.T) {
	st, key := halted(t)
	h, _ := console.New(console.Config{Store: st, ReadOnly: true})
	c := newClient(t, h)
	for _, p := range []string{"", "host?h=" + key} {
		if code, page, _ := c.do("GET", p, nil, nil); code != 200 || strings.Contains(page, "<form") || !strings.Contains(page, key) {
			t.Errorf("read-only %q: %d, a form or no host:\n%s", p, code, page)
		}
	}
	if code, _, _ := c.do("POST", "resume", url.Values{"h": {key}, "by": {"x"}, "reason": {"y"}}, nil); code != http.StatusForbidden {
		t.Errorf("read-only POST: %d, want 403", code)
	}
	if s, _ := st.Status(context.Background(), key); !s.Halted {
		t.Error("read-only console lifted the halt")
	}
}

// TestToken: without the token nothing is shown; a bearer header or the
// sign-in form's cookie opens the console; a wrong token does not.
func TestToken(t *testing.T) {
	st, key := halted(t)
	h, _ := console.New(console.Config{Store: st, Token: "t0ken-for-tests-0123456789abcdef"})
	c := newClient(t, h)
	code, page, _ := c.do("GET", "", nil, nil)
	if code != http.StatusUnauthorized || strings.Contains(page, key) || !strings.Contains(page, `name="token"`) {
		t.Fatalf("no token: %d\n%s", code, page)
	}
	if code, page, _ := c.do("GET", "", nil, http.Header{"Authorization": {"Bearer wrong"}}); code != http.StatusUnauthorized || strings.Contains(page, key) {
		t.Errorf("wrong bearer: %d", code)
	}
	if code, page, _ := c.do("GET", "", nil, http.Header{"Authorization": {"Bearer t0ken-for-tests-0123456789abcdef"}}); code != 200 || !strings.Contains(page, key) {
		t.Errorf("bearer: %d", code)
	}
	tok := csrfOf(t, page)
	if code, _, _ := c.do("POST", "login", url.Values{"csrf": {tok}, "token": {"nope"}}, nil); code != http.StatusUnauthorized {
		t.Errorf("sign in with a wrong token: %d", code)
	}
	if code, _, _ := c.do("POST", "login", url.Values{"token": {"t0ken-for-tests-0123456789abcdef"}}, nil); code != http.StatusForbidden {
		t.Errorf("sign in without CSRF: %d, want 403", code)
	}
	if code, _, _ := c.do("POST", "login", url.Values{"csrf": {tok}, "token": {"t0ken-for-tests-0123456789abcdef"}}, nil); code != http.StatusSeeOther {
		t.Errorf("sign in: %d", code)
	}
	code, page, _ = c.do("GET", "", nil, nil)
	if code != 200 || !strings.Contains(page, key) || strings.Contains(page, "t0ken-for-tests-0123456789abcdef") {
		t.Errorf("after sign in: %d\n%s", code, page)
	}
}

func TestNewNeedsStore(t *testing.T) {
	if _, err := console.New(console.Config{}); err == nil {
		t.Error("New without a Store succeeded")
	}
}
