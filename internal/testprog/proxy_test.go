package testprog_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// get fetches target through proxyURL and returns the status and the Via
// header.
func get(t *testing.T, proxyURL, target string, p *testprog.Proxy) (int, string) {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u)}
	if p.CA != nil {
		tr.TLSClientConfig = p.TLSConfig()
	}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(httptest.NewRequest("GET", target, nil).WithContext(t.Context()))
	if err != nil {
		return 0, err.Error()
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Via")
}

// TestProxies starts each real proxy with a password and checks that it
// carries a request with the right credentials, refuses wrong ones, and
// counts what it forwarded.
func TestProxies(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer origin.Close()
	opts := testprog.ProxyOptions{User: "alice", Pass: "s3cret"}
	tests := []struct {
		name      string
		start     func(testing.TB, testprog.ProxyOptions) *testprog.Proxy
		opts      testprog.ProxyOptions
		schemes   []string
		wrongWant int // status of a wrong password, 0 for a refused connection
	}{
		{"squid", testprog.Squid, testprog.ProxyOptions{User: "alice", Pass: "s3cret", TLS: true}, []string{"http", "https"}, http.StatusProxyAuthRequired},
		{"tinyproxy", testprog.Tinyproxy, opts, []string{"http"}, http.StatusUnauthorized},
		{"microsocks", testprog.Microsocks, opts, []string{"socks5", "socks5h"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.start(t, tt.opts)
			t.Logf("%s %s on %s", p.Program, p.Version, p.Addr)
			if p.Version == "" || p.Version == "unknown" {
				t.Errorf("%s: version not found", tt.name)
			}
			for _, s := range tt.schemes {
				status, via := get(t, p.URLWith(s, "alice", "s3cret"), origin.URL, p)
				if status != http.StatusOK {
					t.Errorf("%s via %s with right password: status %d (%s), want 200", tt.name, s, status, via)
				}
				if s == "http" && !strings.Contains(via, tt.name) {
					t.Errorf("%s via %s: Via %q does not name the proxy", tt.name, s, via)
				}
				status, msg := get(t, p.URLWith(s, "alice", "wrong"), origin.URL, p)
				if status != tt.wrongWant {
					t.Errorf("%s via %s with wrong password: status %d (%s), want %d", tt.name, s, status, msg, tt.wrongWant)
				}
			}
			if got, want := p.Forwarded(), len(tt.schemes); got != want {
				t.Errorf("%s Forwarded() = %d, want %d", tt.name, got, want)
			}
			p.Kill()
			if status, _ := get(t, p.URL(), origin.URL, p); status != 0 {
				t.Errorf("%s answered after Kill: %d", tt.name, status)
			}
		})
	}
}

// TestEstablished counts the connections a keep-alive client holds to a
// server, and none after it closes them.
func TestEstablished(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tr := &http.Transport{}
	resp, err := tr.RoundTrip(httptest.NewRequest("GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	addr := srv.Listener.Addr().String()
	if n := testprog.Established(t, addr); n != 1 {
		t.Errorf("Established(%s) with one idle connection = %d, want 1", addr, n)
	}
	tr.CloseIdleConnections()
	srv.Close()
	if n := testprog.Established(t, addr); n != 0 {
		t.Errorf("Established(%s) after CloseIdleConnections = %d, want 0", addr, n)
	}
}
