package telemetry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/telemetry"
)

func TestRedactURL(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"https://example.com/a/b", "https://example.com/a/b"},
		{"https://example.com/", "https://example.com/"},
		{"https://user:s3cr3t@example.com/x", "https://example.com/x"},
		{"https://user@example.com/x", "https://example.com/x"},
		{"http://u:p%40ss@proxy.example:8080", "http://proxy.example:8080"},
		{"socks5://u:pw@127.0.0.1:1080", "socks5://127.0.0.1:1080"},
		{"https://example.com/?q=go&page=2", "https://example.com/?q=go&page=2"},
		{"https://example.com/?token=abc&q=go", "https://example.com/?token=REDACTED&q=go"},
		{"https://example.com/?Access_Token=abc", "https://example.com/?Access_Token=REDACTED"},
		{"https://example.com/?apiKey=1&api_key=2&apikey=3&key=4", "https://example.com/?apiKey=REDACTED&api_key=REDACTED&apikey=REDACTED&key=REDACTED"},
		{"https://s3.example/o?X-Amz-Credential=c&X-Amz-Signature=s&X-Amz-Date=d", "https://s3.example/o?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Date=d"},
		{"https://blob.example/c?sv=2020&sig=abc%2Bdef", "https://blob.example/c?sv=2020&sig=REDACTED"},
		{"https://example.com/cb?code=xyz&state=s", "https://example.com/cb?code=REDACTED&state=s"},
		{"https://example.com/?password=a&passwd=b&pass=c&pwd=d", "https://example.com/?password=REDACTED&passwd=REDACTED&pass=REDACTED&pwd=REDACTED"},
		{"https://example.com/?session=a&sessionid=b&PHPSESSID=c&sid=d", "https://example.com/?session=REDACTED&sessionid=REDACTED&PHPSESSID=REDACTED&sid=REDACTED"},
		{"https://example.com/?auth=a&secret=b&client_secret=c&refresh_token=d", "https://example.com/?auth=REDACTED&secret=REDACTED&client_secret=REDACTED&refresh_token=REDACTED"},
		{"https://example.com/?keyword=go&author=me&zipcode=1&monkey=2", "https://example.com/?keyword=go&author=me&zipcode=1&monkey=2"},
		{"https://example.com/?api%5Fkey=x", "https://example.com/?api%5Fkey=REDACTED"},
		{"https://example.com/?a=1;token=x", "https://example.com/?a=1;token=REDACTED"},
		{"https://example.com/?token", "https://example.com/?token"},
		{"https://example.com/?token=", "https://example.com/?token="},
		{"https://example.com/app;jsessionid=ABC123?x=1", "https://example.com/app;jsessionid=REDACTED?x=1"},
		{"https://example.com/cb#access_token=abc&type=bearer", "https://example.com/cb#access_token=REDACTED&type=bearer"},
		{"https://u:p@example.com/?token=t#sig=s", "https://example.com/?token=REDACTED#sig=REDACTED"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", tt.in, err)
		}
		if got := (telemetry.Redactor{}).RedactURL(u); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := (telemetry.Redactor{}).RedactURLString(tt.in); got != tt.want {
			t.Errorf("RedactURLString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := (telemetry.Redactor{}).RedactURL(nil); got != "" {
		t.Errorf("RedactURL(nil) = %q, want \"\"", got)
	}
}

func TestRedactURLDoesNotChangeInput(t *testing.T) {
	u, _ := url.Parse("https://user:pw@example.com/?token=x")
	before := u.String()
	(telemetry.Redactor{}).RedactURL(u)
	if u.String() != before || u.User == nil {
		t.Errorf("RedactURL changed its argument to %q", u.String())
	}
}

func TestRedactorSecretParams(t *testing.T) {
	r := telemetry.Redactor{SecretParams: []string{"Tenant"}, SecretHeaders: []string{"X-Internal"}}
	u, _ := url.Parse("https://example.com/?tenant_id=acme&q=1&token=t")
	if got, want := r.RedactURL(u), "https://example.com/?tenant_id=REDACTED&q=1&token=REDACTED"; got != want {
		t.Errorf("RedactURL(%v) = %q, want %q", u, got, want)
	}
	h := http.Header{"X-Internal": {"v"}}
	if got := r.RedactHeader(h).Get("X-Internal"); got != telemetry.Redacted {
		t.Errorf("RedactHeader(X-Internal) = %q, want %q", got, telemetry.Redacted)
	}
}

func TestRedactHeader(t *testing.T) {
	in := http.Header{
		"Authorization":        {"Bearer abc"},
		"Proxy-Authorization":  {"Basic dXNlcjpwYXNz"},
		"Cookie":               {"session=1; theme=dark"},
		"Set-Cookie":           {"id=2; Path=/", "t=3"},
		"X-Api-Key":            {"k"},
		"X-Auth-Token":         {"t"},
		"X-Amz-Security-Token": {"s"},
		"Accept":               {"text/html"},
		"Referer":              {"https://u:p@example.com/?token=x&q=1"},
		"Www-Authenticate":     {`Bearer realm="api"`},
	}
	want := http.Header{
		"Authorization":        {"REDACTED"},
		"Proxy-Authorization":  {"REDACTED"},
		"Cookie":               {"REDACTED"},
		"Set-Cookie":           {"REDACTED", "REDACTED"},
		"X-Api-Key":            {"REDACTED"},
		"X-Auth-Token":         {"REDACTED"},
		"X-Amz-Security-Token": {"REDACTED"},
		"Accept":               {"text/html"},
		"Referer":              {"https://example.com/?token=REDACTED&q=1"},
		"Www-Authenticate":     {`Bearer realm="api"`},
	}
	got := (telemetry.Redactor{}).RedactHeader(in)
	for k, vs := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(vs) {
			t.Errorf("RedactHeader()[%s] = %q, want %q", k, got[k], vs)
		}
	}
	if len(got) != len(want) {
		t.Errorf("RedactHeader() has %d keys, want %d", len(got), len(want))
	}
	if in.Get("Authorization") != "Bearer abc" {
		t.Errorf("RedactHeader changed its argument")
	}
	if (telemetry.Redactor{}).RedactHeader(nil) != nil {
		t.Errorf("RedactHeader(nil) != nil")
	}
}

func TestRedactError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("connection refused"), "connection refused"},
		{"url.Error userinfo", &url.Error{Op: "Get", URL: "https://bob:hunter2@example.com/x", Err: errors.New("EOF")},
			`Get "https://example.com/x": EOF`},
		{"url.Error query", &url.Error{Op: "Get", URL: "https://example.com/?api_key=hunter2", Err: errors.New("timeout")},
			`Get "https://example.com/?api_key=REDACTED": timeout`},
		{"wrapped proxy", fmt.Errorf("egress: proxy http://u:hunter2@127.0.0.1:3128 failed: %w", errors.New("dial")),
			"egress: proxy http://127.0.0.1:3128 failed: dial"},
		{"bearer", errors.New("upstream said: Authorization: Bearer hunter2 rejected"),
			"upstream said: Authorization: Bearer REDACTED rejected"},
		{"pair in text", errors.New("bad request token=hunter2, retry"),
			"bad request token=REDACTED retry"},
	}
	for _, tt := range tests {
		if got := (telemetry.Redactor{}).RedactError(tt.err); got != tt.want {
			t.Errorf("%s: RedactError(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestRedactString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"nothing to see", "nothing to see"},
		{"a=1 b=2", "a=1 b=2"},
		{"see https://u:p@h.example/p and ftp://x:y@z/", "see https://h.example/p and ftp://z/"},
		{"mail me at bob@example.com", "mail me at bob@example.com"},
		{"https://medium.example/@bob", "https://medium.example/@bob"},
		{"Basic dXNlcjpwYXNzd29yZA==", "Basic REDACTED"},
		{"basic auth failed", "basic auth failed"},
		{"token=REDACTED", "token=REDACTED"},
		{`{"url":"https://h/?sig=abc"}`, `{"url":"https://h/?sig=REDACTED"}`},
	}
	for _, tt := range tests {
		if got := (telemetry.Redactor{}).RedactString(tt.in); got != tt.want {
			t.Errorf("RedactString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzRedactString checks that redaction never panics, is idempotent, and
// that no userinfo survives RedactURL or RedactURLString: whatever user and
// password a URL carries, the redacted text is exactly that of the same URL
// without userinfo, and it parses back without userinfo.
func FuzzRedactString(f *testing.F) {
	f.Add("https://u:p@h/?token=x&q=1", "user", "pa55word")
	f.Add("Bearer abc token=1;sig=2#code=3", "", "")
	f.Add("://@=&;", "u", "")
	f.Add("http://h.example/p?q=1", "u", "p")
	f.Add("mailto:bob@example.com", "x", "y")
	f.Fuzz(func(t *testing.T, s, user, pass string) {
		once := (telemetry.Redactor{}).RedactString(s)
		if twice := (telemetry.Redactor{}).RedactString(once); twice != once {
			t.Errorf("RedactString not idempotent: %q -> %q -> %q", s, once, twice)
		}
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		bare := *u
		bare.User = nil
		want := (telemetry.Redactor{}).RedactURL(&bare)
		for _, ui := range []*url.Userinfo{u.User, url.User(user), url.UserPassword(user, pass)} {
			withUser := *u
			withUser.User = ui
			if got := (telemetry.Redactor{}).RedactURL(&withUser); got != want {
				t.Fatalf("RedactURL(%q) = %q, want %q (the same URL without userinfo)", withUser.String(), got, want)
			}
			raw := withUser.String()
			got := (telemetry.Redactor{}).RedactURLString(raw)
			if back, err := url.Parse(got); err == nil && back.User != nil {
				t.Fatalf("RedactURLString(%q) = %q keeps userinfo %q", raw, got, back.User.String())
			}
		}
	})
}

func TestRedactFreeTextForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{"X-Api-Key: v4lueS3cret", "X-Api-Key: REDACTED"},
		{"GET / HTTP/1.1\r\nX-Auth-Token: abc def\r\nAccept: */*\r\n", "GET / HTTP/1.1\r\nX-Auth-Token: REDACTED\r\nAccept: */*\r\n"},
		{"Cookie: prefs=v4lue; theme=dark", "Cookie: REDACTED"},
		{"set-cookie: sid=abc; Path=/; HttpOnly", "set-cookie: REDACTED"},
		{"Authorization: Token abc123", "Authorization: REDACTED"},
		{`Authorization: Digest username="u", realm="r", response="6629fae49393a05397450978507c4ef1"`, "Authorization: REDACTED"},
		{"upstream said: Authorization: Bearer hunter2 rejected", "upstream said: Authorization: Bearer REDACTED rejected"},
		{"password = hunter2 and more", "password = REDACTED and more"},
		{"password: hunter2", "password: REDACTED"},
		{`{"password":"hunter2","user":"bob"}`, `{"password":"REDACTED","user":"bob"}`},
		{`{"user": "bob", "api_key" : "k\"ey", "n": 1}`, `{"user": "bob", "api_key" : "REDACTED", "n": 1}`},
		{`{"pin": 1234}`, `{"pin": "REDACTED"}`},
		{`{"token": null, "session": {"id": 1}}`, `{"token": null, "session": {"id": 1}}`},
		{`{"msg":"X-Api-Key: abc","n":1}`, `{"msg":"X-Api-Key: REDACTED","n":1}`},
		{"session: lease lost", "session: lease lost"},
		{"token: expired, refresh it", "token: expired, refresh it"},
		{`Get "https://example.com/?q=1": timeout`, `Get "https://example.com/?q=1": timeout`},
		{"time: 12:30:00", "time: 12:30:00"},
	}
	for _, tt := range tests {
		got := (telemetry.Redactor{}).RedactString(tt.in)
		if got != tt.want {
			t.Errorf("RedactString(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := (telemetry.Redactor{}).RedactString(got); again != got {
			t.Errorf("RedactString(%q) not idempotent: %q", got, again)
		}
	}
}

// FuzzRedactForms: a secret value in a header line, a cookie, an
// Authorization of any scheme, a JSON member, a form body or a
// "name = value" setting never survives RedactString.
func FuzzRedactForms(f *testing.F) {
	f.Add("hunter2hunter2", uint8(0))
	f.Add("a\"b\\c<d>e&f g", uint8(3))
	f.Add("dXNlcjpwYXNz==", uint8(7))
	f.Fuzz(func(t *testing.T, raw string, pick uint8) {
		// v is a credential-like value: token68 characters, long enough to
		// be told apart from the text around it.
		var b strings.Builder
		for _, c := range []byte(raw) {
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0 {
				b.WriteByte(c)
			}
		}
		v := "Zq" + b.String() + "9x"
		keys := []string{"password", "api_key", "client_secret", "sessionId", "access_token", "X-Api-Key", "pin"}
		key := keys[int(pick)%len(keys)]
		jsonVal, _ := json.Marshal(raw + "Zq9x")
		jv := strings.Trim(string(jsonVal), `"`)
		body, _ := json.Marshal(map[string]any{"user": "bob", key: raw + "Zq9x", "n": 1})
		forms := []struct{ text, secret string }{
			{"X-Api-Key: " + v, v},
			{"GET / HTTP/1.1\r\nHost: h.example\r\nCookie: prefs=" + v + "; theme=dark\r\n\r\n", v},
			{"Authorization: Token " + v, v},
			{"Proxy-Authorization: Bearer " + v, v},
			{`Authorization: Digest username="u", realm="r", response="` + v + `"`, v},
			{string(body), jv},
			{url.Values{"user": {"bob"}, key: {v}}.Encode(), url.QueryEscape(v)},
			{key + " = " + v, v},
			{"config: " + key + "=" + v + "; next", v},
		}
		for _, fm := range forms {
			if len(fm.secret) < 4 {
				continue
			}
			got := (telemetry.Redactor{}).RedactString(fm.text)
			if strings.Contains(got, fm.secret) {
				t.Errorf("RedactString(%q) = %q keeps the secret %q", fm.text, got, fm.secret)
			}
			if again := (telemetry.Redactor{}).RedactString(got); again != got {
				t.Errorf("RedactString not idempotent: %q -> %q", got, again)
			}
		}
	})
}
