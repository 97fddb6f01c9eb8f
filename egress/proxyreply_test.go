package egress

import (
	"fmt"
	"net/http"
	"testing"
)

// TestForwardedFailure checks, response by response, which answers to an
// absolute-form request are the proxy's own failures. The headers are
// those squid 5.7 and tinyproxy 1.11.1 send (see TestRealAuthRefused and
// TestRealDeadTarget for the real programs).
func TestForwardedFailure(t *testing.T) {
	tests := []struct {
		name   string
		status string
		header http.Header
		creds  bool
		want   string // "" = the target's answer
		cause  error
	}{
		{"target 200 through squid", "200 OK", http.Header{"Via": {"1.1 vm (squid/5.7)"}}, true, "", nil},
		{"target 401 through squid", "401 Unauthorized", http.Header{"Via": {"1.1 vm (squid/5.7)"}, "Www-Authenticate": {`Basic realm="site"`}}, true, "", nil},
		{"target 401 through tinyproxy", "401 Unauthorized", http.Header{"Via": {"1.1 vm (tinyproxy/1.11.1)"}, "Www-Authenticate": {`Basic realm="site"`}}, true, "", nil},
		{"target 403", "403 Forbidden", http.Header{"Server": {"nginx"}}, true, "", nil},
		{"squid 407, wrong password", "407 Proxy Authentication Required", http.Header{"X-Squid-Error": {"ERR_CACHE_ACCESS_DENIED 0"}, "Proxy-Authenticate": {`Basic realm="x"`}}, true, failAuth, ErrProxyAuthRejected},
		{"squid 407, none sent", "407 Proxy Authentication Required", http.Header{"X-Squid-Error": {"ERR_CACHE_ACCESS_DENIED 0"}}, false, failAuth, ErrProxyAuthRequired},
		{"tinyproxy 401, wrong password", "401 Unauthorized", http.Header{"Server": {"tinyproxy/1.11.1"}, "Www-Authenticate": {`Basic realm="Tinyproxy"`}}, true, failAuth, ErrProxyAuthRejected},
		{"401 with only Proxy-Authenticate", "401 Unauthorized", http.Header{"Proxy-Authenticate": {`Basic realm="x"`}}, true, failAuth, ErrProxyAuthRejected},
		{"squid dead target", "503 Service Unavailable", http.Header{"X-Squid-Error": {"ERR_CONNECT_FAIL 111"}, "Via": {"1.1 vm (squid/5.7)"}}, true, "", nil},
		{"squid DNS failure", "503 Service Unavailable", http.Header{"X-Squid-Error": {"ERR_DNS_FAIL 0"}}, true, "", nil},
		{"squid access denied", "403 Forbidden", http.Header{"X-Squid-Error": {"ERR_ACCESS_DENIED 0"}}, true, failProxy, nil},
		{"squid unknown code", "400 Bad Request", http.Header{"X-Squid-Error": {"ERR_INVALID_URL 0"}}, true, failProxy, nil},
		{"tinyproxy dead target", "500 Unable to connect", http.Header{"Server": {"tinyproxy/1.11.1"}}, true, "", nil},
		{"tinyproxy access violation", "403 Access violation", http.Header{"Server": {"tinyproxy/1.11.1"}}, true, failProxy, nil},
		{"target calling itself tinyproxy, forwarded", "500 Internal Server Error", http.Header{"Server": {"tinyproxy/1.11.1"}, "Via": {"1.1 vm (tinyproxy/1.11.1)"}}, true, "", nil},
	}
	for _, tt := range tests {
		resp := &http.Response{Status: tt.status, Header: tt.header}
		if _, err := fmt.Sscan(tt.status, &resp.StatusCode); err != nil {
			t.Fatal(err)
		}
		pe := forwardedFailure("e", resp, tt.creds)
		switch {
		case tt.want == "" && pe != nil:
			t.Errorf("%s: forwardedFailure = %v, want the target's answer", tt.name, pe)
		case tt.want != "" && (pe == nil || pe.Kind != tt.want || pe.Err != tt.cause):
			t.Errorf("%s: forwardedFailure = %v, want kind %q cause %v", tt.name, pe, tt.want, tt.cause)
		}
	}
}

// BenchmarkForwardedFailure is the cost of checking an ordinary target
// response that came through an HTTP proxy.
func BenchmarkForwardedFailure(b *testing.B) {
	resp := &http.Response{Status: "200 OK", StatusCode: 200, Header: http.Header{
		"Via": {"1.1 vm (squid/5.7)"}, "Server": {"nginx"}, "Content-Type": {"text/html"}}}
	b.ReportAllocs()
	for b.Loop() {
		if forwardedFailure("e", resp, true) != nil {
			b.Fatal("a target's 200 taken for the proxy's failure")
		}
	}
}
