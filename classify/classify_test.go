package classify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/circuits"
)

const agent = "ExampleBot"

// testNow is the fixed clock of these tests.
var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Challenge pages, shortened to their identifying parts.
const (
	cloudflarePage = `<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>` +
		`<link href="/cdn-cgi/styles/challenges.css" rel="stylesheet"></head><body></body></html>`
	cloudflareScript = `<html><script>(function(){window._cf_chl_opt={cType:'managed'};` +
		`var s=document.createElement('script');s.src='/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1';})();</script></html>`
	cloudflareJSD = `<html><head><title>Shop</title><script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script></head><body>hello</body></html>`
	awsWAFPage    = `<html><head><script>window.gokuProps = {"key":"AQID","iv":"x","context":"y"};</script></head></html>`
	pxPage        = `<html><head><title>Access to this page has been denied</title></head><body><div id="px-captcha"></div></body></html>`
	pxTitleOnly   = `<html><head><title>Access to this page has been denied.</title></head></html>`
	impervaPage   = `<html><body><iframe src="/_Incapsula_Resource?CWUDNSAI=9&incident_id=123">Request unsuccessful. Incapsula incident ID: 123-456</iframe></body></html>`
	impervaNormal = `<html><head><script src="/_Incapsula_Resource?SWJIYLWA=719d34d31c8e"></script></head><body>news</body></html>`
	dataDomePage  = `<html><script>var dd={'cid':'x','host':'geo.captcha-delivery.com'}</script><script src="https://ct.captcha-delivery.com/c.js"></script></html>`
	sucuriPage    = `<html><head><title>Sucuri WebSite Firewall - Access Denied</title></head><body><h1>Access Denied - Sucuri Website Firewall</h1></body></html>`
	f5Page        = `<html><head><title>Request Rejected</title></head><body>The requested URL was rejected. Please consult with your administrator.<br><br>Your support ID is: 1234</body></html>`
	akamaiPage    = `<HTML><HEAD><TITLE>Access Denied</TITLE></HEAD><BODY><H1>Access Denied</H1>You don't have permission to access this page on this server.<P>Reference&#32;&#35;18&#46;6f2e1002&#46;1700000000&#46;abc</BODY></HTML>`
	akamaiPlain   = `<HTML><HEAD><TITLE>Access Denied</TITLE></HEAD><BODY>Access Denied<P>Reference #18.6f2e1002.1700000000.abc</BODY></HTML>`
	plainPage     = `<!doctype html><html><head><title>Welcome</title></head><body>Hello, world.</body></html>`
	agentPage     = `<html><body>Requests from examplebot are not permitted on this site.</body></html>`
)

// hdr builds a header from name, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// randomBody returns n bytes that are deterministic for a seed.
func randomBody(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

type classifyCase struct {
	name       string
	method     string // default GET
	status     int
	header     http.Header
	body       string
	nilBody    bool
	noBody     bool // http.NoBody
	cfg        classify.Config
	want       classify.Outcome
	reason     string
	markers    []string
	retryAfter time.Duration
}

func classifyCases() []classifyCase {
	html := func(kv ...string) http.Header {
		return hdr(append([]string{"Content-Type", "text/html; charset=utf-8"}, kv...)...)
	}
	big := "<html><head><title>Just a moment...</title><link href=\"/cdn-cgi/x\"></head>" + randomBody(1<<20, 1)
	late := plainPage + strings.Repeat(" ", 5000) + cloudflarePage
	return []classifyCase{
		// 2xx and 3xx.
		{name: "200 plain", status: 200, header: html(), body: plainPage, want: classify.OK, reason: "status 200"},
		{name: "200 server cloudflare and cf-ray", status: 200, header: html("Server", "cloudflare", "Cf-Ray", "8a1b2c3d4e5f-AMS"), body: plainPage, want: classify.OK, reason: "status 200"},
		{name: "200 datadome and sucuri presence headers", status: 200, header: html("X-Datadome", "protected", "X-Sucuri-Id", "20006"), body: plainPage, want: classify.OK, reason: "status 200"},
		{name: "200 cloudflare bot script", status: 200, header: html(), body: cloudflareJSD, want: classify.OK, reason: "status 200"},
		{name: "200 incapsula resource script", status: 200, header: html(), body: impervaNormal, want: classify.OK, reason: "status 200"},
		{name: "200 just a moment without cdn-cgi", status: 200, header: html(), body: "<title>Just a moment...</title>", want: classify.OK, reason: "status 200"},
		{name: "200 nil body", status: 200, nilBody: true, want: classify.OK, reason: "status 200"},
		{name: "200 NoBody", status: 200, noBody: true, want: classify.OK, reason: "status 200"},
		{name: "204", status: 204, want: classify.OK, reason: "status 204"},
		{name: "202 plain", status: 202, body: `{"queued":true}`, header: hdr("Content-Type", "application/json"), want: classify.OK, reason: "status 202"},
		{name: "101", status: 101, want: classify.OK, reason: "status 101"},
		{name: "301", status: 301, header: hdr("Location", "/x"), body: pxPage, want: classify.OK, reason: "status 301"},
		{name: "304", status: 304, want: classify.OK, reason: "status 304"},
		{name: "302 with retry-after", status: 302, header: hdr("Retry-After", "5"), want: classify.OK, reason: "status 302"},
		{name: "200 binary body not inspected", status: 200, header: hdr("Content-Type", "image/png"), body: f5Page, want: classify.OK, reason: "status 200"},
		{name: "200 gzip body not inspected", status: 200, header: html("Content-Encoding", "gzip"), body: f5Page, want: classify.OK, reason: "status 200"},
		{name: "HEAD not inspected", method: http.MethodHead, status: 200, header: html(), body: f5Page, want: classify.OK, reason: "status 200"},
		{name: "challenge beyond the peek window", status: 200, header: html(), body: late, want: classify.OK, reason: "status 200"},
		{name: "peek disabled", status: 403, header: html(), body: pxPage, cfg: classify.Config{PeekSize: -1}, want: classify.Permanent, reason: "status 403"},

		// Challenge markers, on any status.
		{name: "200 f5 page", status: 200, header: html(), body: f5Page, want: classify.Refused, reason: "challenge marker", markers: []string{"f5-asm"}},
		{name: "200 cloudflare page", status: 200, header: html(), body: cloudflarePage, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "200 untyped challenge", status: 200, body: f5Page, want: classify.Refused, reason: "challenge marker", markers: []string{"f5-asm"}},
		{name: "200 challenge and large body", status: 200, header: html(), body: big, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "403 cf-mitigated", status: 403, header: html("Cf-Mitigated", "challenge"), body: cloudflarePage, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "403 cf-mitigated no body", status: 403, header: hdr("cf-mitigated", "Challenge"), nilBody: true, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "403 just a moment", status: 403, header: html(), body: "<title>JUST A MOMENT...</title>", want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "503 cf_chl_opt", status: 503, header: html(), body: cloudflareScript, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "200 cf orchestrate", status: 200, header: html(), body: cloudflareScript, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "429 challenge is refused", status: 429, header: html("Retry-After", "5"), body: cloudflarePage, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare"}},
		{name: "202 aws challenge", status: 202, header: hdr("X-Amzn-Waf-Action", "challenge"), body: awsWAFPage, want: classify.Refused, reason: "challenge marker", markers: []string{"aws-waf"}},
		{name: "202 aws challenge body only", status: 202, header: html(), body: awsWAFPage, want: classify.Refused, reason: "challenge marker", markers: []string{"aws-waf"}},
		{name: "405 aws captcha", status: 405, header: hdr("x-amzn-waf-action", "captcha"), body: awsWAFPage, want: classify.Refused, reason: "challenge marker", markers: []string{"aws-waf"}},
		{name: "200 gokuProps not restricted status", status: 200, header: html(), body: awsWAFPage, want: classify.OK, reason: "status 200"},
		{name: "403 perimeterx", status: 403, header: html(), body: pxPage, want: classify.Refused, reason: "challenge marker", markers: []string{"perimeterx"}},
		{name: "403 perimeterx title", status: 403, header: html(), body: pxTitleOnly, want: classify.Refused, reason: "challenge marker", markers: []string{"perimeterx"}},
		{name: "403 imperva", status: 403, header: html(), body: impervaPage, want: classify.Refused, reason: "challenge marker", markers: []string{"imperva"}},
		{name: "403 datadome", status: 403, header: html("X-Datadome", "protected"), body: dataDomePage, want: classify.Refused, reason: "challenge marker", markers: []string{"datadome"}},
		{name: "403 sucuri header", status: 403, header: html("X-Sucuri-Block", "BNP005"), body: "blocked", want: classify.Refused, reason: "challenge marker", markers: []string{"sucuri"}},
		{name: "403 sucuri page", status: 403, header: html(), body: sucuriPage, want: classify.Refused, reason: "challenge marker", markers: []string{"sucuri"}},
		{name: "403 akamai", status: 403, header: html("Server", "AkamaiGHost"), body: akamaiPlain, want: classify.Refused, reason: "challenge marker", markers: []string{"akamai"}},
		{name: "403 akamai entity-encoded", status: 403, header: html(), body: akamaiPage, want: classify.Refused, reason: "challenge marker", markers: []string{"akamai"}},
		{name: "403 access denied alone", status: 403, header: html(), body: "<h1>Access Denied</h1>", want: classify.Permanent, reason: "status 403"},
		{name: "403 two products", status: 403, header: html("Cf-Mitigated", "challenge"), body: pxPage, want: classify.Refused, reason: "challenge marker", markers: []string{"cloudflare", "perimeterx"}},
		{name: "custom header marker", status: 200, header: hdr("X-Acme-Shield", "block"), cfg: classify.Config{Markers: []classify.Marker{{Name: "acme", Header: "x-acme-shield", Value: "BLOCK"}}}, want: classify.Refused, reason: "challenge marker", markers: []string{"acme"}},
		{name: "custom body marker restricted", status: 404, header: html(), body: "acme says no", cfg: classify.Config{Markers: []classify.Marker{{Body: "ACME SAYS", Statuses: []int{403}}}}, want: classify.Permanent, reason: "status 404"},
		{name: "custom body marker unnamed", status: 403, header: html(), body: "acme says no", cfg: classify.Config{Markers: []classify.Marker{{Body: "ACME SAYS", Statuses: []int{403}}}}, want: classify.Refused, reason: "challenge marker", markers: []string{"custom"}},
		{name: "custom marker without condition ignored", status: 200, header: html(), body: plainPage, cfg: classify.Config{Markers: []classify.Marker{{Name: "all"}}}, want: classify.OK, reason: "status 200"},

		// 401 and 403.
		{name: "403 names agent", status: 403, header: html(), body: agentPage, cfg: classify.Config{AgentToken: agent}, want: classify.Refused, reason: "agent named"},
		{name: "401 names agent", status: 401, header: hdr("Content-Type", "application/json"), body: `{"error":"EXAMPLEBOT blocked"}`, cfg: classify.Config{AgentToken: " ExampleBot "}, want: classify.Refused, reason: "agent named"},
		{name: "403 without agent", status: 403, header: html(), body: plainPage, cfg: classify.Config{AgentToken: agent}, want: classify.Permanent, reason: "status 403"},
		{name: "403 no token configured", status: 403, header: html(), body: agentPage, want: classify.Permanent, reason: "status 403"},
		{name: "404 names agent", status: 404, header: html(), body: agentPage, cfg: classify.Config{AgentToken: agent}, want: classify.Permanent, reason: "status 404"},
		{name: "401", status: 401, want: classify.Permanent, reason: "status 401"},
		{name: "403 rate limit spent", status: 403, header: hdr("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "60"), body: `{}`, want: classify.Throttled, reason: "rate limit", retryAfter: time.Minute},

		// Throttling.
		{name: "429", status: 429, want: classify.Throttled, reason: "status 429"},
		{name: "429 retry-after seconds", status: 429, header: hdr("Retry-After", "7"), want: classify.Throttled, reason: "status 429", retryAfter: 7 * time.Second},
		{name: "429 retry-after date", status: 429, header: hdr("Retry-After", testNow.Add(90*time.Second).Format(http.TimeFormat)), want: classify.Throttled, reason: "status 429", retryAfter: 90 * time.Second},
		{name: "429 retry-after garbage", status: 429, header: hdr("Retry-After", "Tue, 99 Foo"), want: classify.Throttled, reason: "status 429"},
		{name: "429 ratelimit-reset alone", status: 429, header: hdr("Ratelimit-Reset", "30"), want: classify.Throttled, reason: "status 429", retryAfter: 30 * time.Second},
		{name: "503 retry-after", status: 503, header: hdr("Retry-After", "120"), want: classify.Throttled, reason: "retry-after", retryAfter: 2 * time.Minute},
		{name: "503 retry-after zero", status: 503, header: hdr("Retry-After", "0"), want: classify.Throttled, reason: "retry-after"},
		{name: "503 retry-after negative", status: 503, header: hdr("Retry-After", "-5"), want: classify.Transient, reason: "status 503"},
		{name: "503 retry-after beyond any cap", status: 503, header: hdr("Retry-After", "999999999999"), want: classify.Throttled, reason: "retry-after", retryAfter: classify.MaxRetryAfter},
		{name: "403 secondary rate limit", status: 403, header: hdr("Content-Type", "application/json"),
			body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`,
			want: classify.Throttled, reason: "secondary rate limit", retryAfter: classify.SecondaryRateLimitWait},
		{name: "403 secondary rate limit with retry-after", status: 403, header: hdr("Content-Type", "application/json", "Retry-After", "30"),
			body: `{"message":"You have exceeded a secondary rate limit."}`, want: classify.Throttled, reason: "secondary rate limit", retryAfter: 30 * time.Second},
		{name: "403 other json stays permanent", status: 403, header: hdr("Content-Type", "application/json"),
			body: `{"message":"Resource not accessible by integration"}`, want: classify.Permanent, reason: "status 403"},
		{name: "503 ratelimit structured", status: 503, header: hdr("Ratelimit", `"default";r=0;t=30`), want: classify.Throttled, reason: "rate limit", retryAfter: 30 * time.Second},
		{name: "404 retry-after", status: 404, header: hdr("Retry-After", "5"), want: classify.Throttled, reason: "retry-after", retryAfter: 5 * time.Second},
		{name: "404 quota spent stays permanent", status: 404, header: hdr("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "60"), want: classify.Permanent, reason: "status 404", retryAfter: time.Minute},
		{name: "200 retry-after ignored", status: 200, header: hdr("Retry-After", "5"), want: classify.OK, reason: "status 200"},

		// Transient and permanent statuses.
		{name: "408", status: 408, want: classify.Transient, reason: "status 408"},
		{name: "425", status: 425, want: classify.Transient, reason: "status 425"},
		{name: "500", status: 500, header: html(), body: "<h1>Internal Server Error</h1>", want: classify.Transient, reason: "status 500"},
		{name: "501", status: 501, want: classify.Transient, reason: "status 501"},
		{name: "502", status: 502, want: classify.Transient, reason: "status 502"},
		{name: "503", status: 503, want: classify.Transient, reason: "status 503"},
		{name: "504", status: 504, want: classify.Transient, reason: "status 504"},
		{name: "599", status: 599, want: classify.Transient, reason: "status 599"},
		{name: "400", status: 400, want: classify.Permanent, reason: "status 400"},
		{name: "404", status: 404, header: html(), body: "<h1>Not Found</h1>", want: classify.Permanent, reason: "status 404"},
		{name: "405 plain", status: 405, want: classify.Permanent, reason: "status 405"},
		{name: "410", status: 410, want: classify.Permanent, reason: "status 410"},
		{name: "451", status: 451, want: classify.Permanent, reason: "status 451"},
		{name: "999", status: 999, want: classify.Transient, reason: "unexpected status"},
		{name: "0", status: 0, want: classify.Transient, reason: "unexpected status"},
	}
}

func TestClassifyResponse(t *testing.T) {
	for _, tc := range classifyCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Now = func() time.Time { return testNow }
			c := classify.New(cfg)
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, "http://127.0.0.1/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp := &http.Response{StatusCode: tc.status, Header: tc.header, ContentLength: -1, Request: req}
			if resp.Header == nil {
				resp.Header = http.Header{}
			}
			switch {
			case tc.nilBody:
			case tc.noBody:
				resp.Body = http.NoBody
			default:
				resp.Body = io.NopCloser(strings.NewReader(tc.body))
			}

			got := c.Classify(resp, nil)
			if got.Outcome != tc.want || got.Reason != tc.reason || got.Status != tc.status {
				t.Errorf("Classify(%d) = %v %q status %d, want %v %q status %d", tc.status, got.Outcome, got.Reason, got.Status, tc.want, tc.reason, tc.status)
			}
			if !slices.Equal(got.Markers, tc.markers) {
				t.Errorf("Classify(%d).Markers = %q, want %q", tc.status, got.Markers, tc.markers)
			}
			if got.RetryAfter != tc.retryAfter {
				t.Errorf("Classify(%d).RetryAfter = %v, want %v", tc.status, got.RetryAfter, tc.retryAfter)
			}
			if of := classify.Of(resp, nil); !equalResult(of, got) {
				t.Errorf("Of after Classify = %+v, want %+v", of, got)
			}
			if resp.Body == nil {
				t.Fatal("Classify left a nil Body")
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading body: %v", err)
			}
			if sha256.Sum256(b) != sha256.Sum256([]byte(tc.body)) {
				t.Errorf("body after Classify: %d bytes differing from the %d sent", len(b), len(tc.body))
			}
			if err := resp.Body.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
		})
	}
}

func equalResult(a, b classify.Result) bool {
	return a.Outcome == b.Outcome && a.Status == b.Status && a.RetryAfter == b.RetryAfter &&
		a.Reason == b.Reason && slices.Equal(a.Markers, b.Markers)
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// endpointErr is an error of the egress route, as package egress returns.
type endpointErr struct{ fault bool }

func (endpointErr) Error() string         { return "proxy failed" }
func (e endpointErr) EndpointFault() bool { return e.fault }

// notSentErr is an error of a layer that did not send the request.
type notSentErr struct{}

func (notSentErr) Error() string { return "no usable endpoint" }
func (notSentErr) NotSent() bool { return true }

func TestEgressFaultIsNoHostFailure(t *testing.T) {
	r := classify.Of(nil, endpointErr{fault: true})
	if !r.Egress || !r.Retryable() || circuits.HostFailure(r) {
		t.Errorf("Of(egress fault) = %+v: want Egress, retryable, no host failure", r)
	}
	if r := classify.Of(nil, endpointErr{fault: false}); r.Egress || !circuits.HostFailure(r) {
		t.Errorf("Of(destination failure via proxy) = %+v: want a host failure", r)
	}
}

func TestClassifyError(t *testing.T) {
	refused := classify.Result{Outcome: classify.Refused, Status: 403, Reason: "challenge marker"}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "http://127.0.0.1/", Err: err} }
	tests := []struct {
		name   string
		err    error
		want   classify.Outcome
		reason string
	}{
		{"canceled", context.Canceled, classify.Canceled, "canceled"},
		{"deadline", context.DeadlineExceeded, classify.Transient, "timeout"},
		{"wrapped canceled", urlErr(fmt.Errorf("read: %w", context.Canceled)), classify.Canceled, "canceled"},
		{"client timeout", urlErr(errors.New("net/http: request canceled (Client.Timeout exceeded while awaiting headers)")), classify.Transient, "timeout"},
		{"attempt timeout", classify.ErrAttemptTimeout, classify.Transient, "attempt timeout"},
		{"wrapped attempt timeout", urlErr(fmt.Errorf("x: %w", classify.ErrAttemptTimeout)), classify.Transient, "attempt timeout"},
		{"net timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, classify.Transient, "timeout"},
		{"os deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), classify.Transient, "timeout"},
		{"connection refused", dial, classify.Transient, "network error"},
		{"unexpected eof", io.ErrUnexpectedEOF, classify.Transient, "network error"},
		{"dns", &net.DNSError{Err: "no such host", Name: "nx.invalid", IsNotFound: true}, classify.Transient, "network error"},
		{"unknown authority", x509.UnknownAuthorityError{}, classify.Permanent, "tls certificate"},
		{"hostname", urlErr(x509.HostnameError{Host: "127.0.0.1"}), classify.Permanent, "tls certificate"},
		{"invalid cert", x509.CertificateInvalidError{Reason: x509.Expired}, classify.Permanent, "tls certificate"},
		{"verification", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, classify.Permanent, "tls certificate"},
		{"redirects", urlErr(errors.New("stopped after 10 redirects")), classify.Permanent, "too many redirects"},
		{"redirects custom count", urlErr(errors.New("stopped after 3 redirects")), classify.Permanent, "too many redirects"},
		{"redirects sentinel", urlErr(fmt.Errorf("policy: %w", classify.ErrTooManyRedirects)), classify.Permanent, "too many redirects"},
		{"redirect text inside another error", errors.New("proxy said: stopped after 10 redirects, retry"), classify.Transient, "network error"},
		{"unsupported scheme", urlErr(errors.New(`unsupported protocol scheme "ftp"`)), classify.Permanent, "invalid request"},
		{"no host", errors.New("http: no Host in request URL"), classify.Permanent, "invalid request"},
		{"nil request", classify.ErrNilRequest, classify.Permanent, "invalid request"},
		{"joined", errors.Join(io.EOF, context.Canceled), classify.Canceled, "canceled"},
		{"classified", urlErr(&classify.Error{Result: refused, Err: io.EOF}), classify.Refused, "challenge marker"},
		{"egress fault", urlErr(fmt.Errorf("proxyconnect: %w", endpointErr{fault: true})), classify.Transient, "egress failure"},
		{"proxy reports destination down", endpointErr{fault: false}, classify.Transient, "network error"},
		{"not sent", fmt.Errorf("egress: %w", notSentErr{}), classify.Permanent, "not sent"},
	}
	c := classify.New(classify.Config{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []struct {
				name string
				fn   func(*http.Response, error) classify.Result
			}{{"Classify", c.Classify}, {"Of", classify.Of}} {
				got := f.fn(nil, tc.err)
				if got.Outcome != tc.want || got.Reason != tc.reason || got.Status != 0 && tc.want != classify.Refused {
					t.Errorf("%s(nil, %v) = %v %q, want %v %q", f.name, tc.err, got.Outcome, got.Reason, tc.want, tc.reason)
				}
			}
		})
	}
}

// TestClassifyErrorContext: with the request's context known, it alone
// decides between Canceled and an attempt timeout.
func TestClassifyErrorContext(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	attempt, cancelAttempt := context.WithCancelCause(context.Background())
	cancelAttempt(classify.ErrAttemptTimeout)
	deadline, cancelDeadline := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancelDeadline()
	tests := []struct {
		name   string
		ctx    context.Context
		err    error
		want   classify.Outcome
		reason string
	}{
		{"caller canceled", canceled, dial, classify.Canceled, "canceled"},
		{"caller deadline", deadline, context.DeadlineExceeded, classify.Transient, "timeout"},
		{"caller deadline, read error", deadline, dial, classify.Transient, "timeout"},
		{"attempt timeout", attempt, context.Canceled, classify.Transient, "attempt timeout"},
		{"live context, inner deadline", context.Background(), context.DeadlineExceeded, classify.Transient, "timeout"},
		{"live context, inner canceled", context.Background(), context.Canceled, classify.Transient, "network error"},
	}
	c := classify.New(classify.Config{})
	for _, tc := range tests {
		req, _ := http.NewRequestWithContext(tc.ctx, http.MethodGet, "http://127.0.0.1/", nil)
		resp := &http.Response{Request: req}
		got := c.Classify(resp, tc.err)
		if got.Outcome != tc.want || got.Reason != tc.reason {
			t.Errorf("%s: Classify(_, %v) = %v %q, want %v %q", tc.name, tc.err, got.Outcome, got.Reason, tc.want, tc.reason)
		}
	}
}

func TestClassifyNoResponse(t *testing.T) {
	var nilClassifier *classify.Classifier
	for name, got := range map[string]classify.Result{
		"Classify":     classify.New(classify.Config{}).Classify(nil, nil),
		"Of":           classify.Of(nil, nil),
		"nil receiver": nilClassifier.Classify(nil, nil),
	} {
		if got.Outcome != classify.Transient || got.Reason != "no response" {
			t.Errorf("%s(nil, nil) = %v %q, want transient %q", name, got.Outcome, got.Reason, "no response")
		}
	}
}

// errAfter yields data and then fails with err.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

func TestClassifyBodyReadError(t *testing.T) {
	reset := errors.New("connection reset by peer")
	tests := []struct {
		name    string
		status  int
		body    string
		want    classify.Outcome
		reason  string
		markers []string
	}{
		{"403 reset", 403, "<h1>Forb", classify.Transient, "body read error", nil},
		{"200 reset", 200, plainPage[:20], classify.Transient, "body read error", nil},
		{"partial challenge still refused", 403, pxPage[:80], classify.Refused, "challenge marker", []string{"perimeterx"}},
	}
	c := classify.New(classify.Config{})
	for _, tc := range tests {
		resp := &http.Response{
			StatusCode: tc.status, Header: hdr("Content-Type", "text/html"), ContentLength: -1,
			Body: io.NopCloser(&errAfter{strings.NewReader(tc.body), reset}),
		}
		got := c.Classify(resp, nil)
		if got.Outcome != tc.want || got.Reason != tc.reason || !slices.Equal(got.Markers, tc.markers) {
			t.Errorf("%s: Classify = %v %q %q, want %v %q %q", tc.name, got.Outcome, got.Reason, got.Markers, tc.want, tc.reason, tc.markers)
		}
		b, err := io.ReadAll(resp.Body)
		if string(b) != tc.body || err != reset {
			t.Errorf("%s: ReadAll = %q, %v, want %q, %v", tc.name, b, err, tc.body, reset)
		}
	}
}

// TestClassifyEndedContext: a request whose context has already ended is
// Canceled and its body is left unread.
func TestClassifyEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Request: req, ContentLength: -1, Body: io.NopCloser(strings.NewReader(plainPage))}
	got := classify.New(classify.Config{}).Classify(resp, nil)
	if got.Outcome != classify.Canceled || got.Status != 200 {
		t.Errorf("Classify(ended context) = %v status %d, want canceled status 200", got.Outcome, got.Status)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != plainPage || err != nil {
		t.Errorf("ReadAll = %q, %v, want the whole page", b, err)
	}
}

// TestBodyPreserved streams bodies of many sizes through Classify and reads
// them back with Read, io.Copy (WriteTo) and small reads.
func TestBodyPreserved(t *testing.T) {
	c := classify.New(classify.Config{PeekSize: 512})
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 100_000} {
		want := randomBody(n, uint64(n))
		sum := sha256.Sum256([]byte(want))
		for _, mode := range []string{"readall", "copy", "small"} {
			resp := &http.Response{StatusCode: 403, Header: http.Header{}, ContentLength: int64(n), Body: io.NopCloser(strings.NewReader(want))}
			c.Classify(resp, nil)
			var buf bytes.Buffer
			var err error
			switch mode {
			case "readall":
				var b []byte
				b, err = io.ReadAll(resp.Body)
				buf.Write(b)
			case "copy":
				_, err = io.Copy(&buf, resp.Body)
			case "small":
				p := make([]byte, 7)
				for {
					k, rerr := resp.Body.Read(p)
					buf.Write(p[:k])
					if rerr == io.EOF {
						break
					}
					if rerr != nil {
						err = rerr
						break
					}
				}
			}
			if err != nil || sha256.Sum256(buf.Bytes()) != sum {
				t.Errorf("%d bytes via %s: got %d bytes, err %v; want identical bytes", n, mode, buf.Len(), err)
			}
			resp.Body.Close()
		}
	}
}

// shortWriter accepts n bytes and then fails.
type shortWriter struct {
	buf bytes.Buffer
	n   int
}

var errFull = errors.New("full")

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k, _ := w.buf.Write(p[:w.n])
		w.n = 0
		return k, errFull
	}
	w.n -= len(p)
	return w.buf.Write(p)
}

// TestWriteToFailure: a failed io.Copy leaves the unwritten bytes readable.
func TestWriteToFailure(t *testing.T) {
	resp := &http.Response{StatusCode: 403, Header: http.Header{}, ContentLength: -1, Body: io.NopCloser(strings.NewReader(plainPage))}
	classify.New(classify.Config{}).Classify(resp, nil)
	w := &shortWriter{n: 10}
	if _, err := io.Copy(w, resp.Body); err != errFull {
		t.Fatalf("io.Copy = %v, want %v", err, errFull)
	}
	rest, err := io.ReadAll(resp.Body)
	if got := w.buf.String() + string(rest); got != plainPage || err != nil {
		t.Errorf("written+rest = %q, %v; want %q", got, err, plainPage)
	}
}

// TestOfOneHome: the Result lives with the response, through
// resp.Request: it survives a wrapped or replaced body, is not inherited by
// a request derived from the response's context, and a response that was
// never classified is classified without reading its body.
func TestOfOneHome(t *testing.T) {
	req := httptest.NewRequest("GET", "http://a.example/", nil)
	resp := &http.Response{StatusCode: 200, Header: hdr("Content-Type", "text/html"), Body: io.NopCloser(strings.NewReader(cloudflarePage)), Request: req}
	r := classify.New(classify.Config{}).Classify(resp, nil)
	if r.Outcome != classify.Refused {
		t.Fatalf("Classify(200 challenge) = %v, want refused", r.Outcome)
	}
	if resp.Request == req || resp.Request.URL != req.URL || req.Context() != context.Background() {
		t.Errorf("resp.Request must be a shallow copy of the caller's request, which stays unchanged")
	}
	// A layer (http.Client with a Timeout, a decompressor) wraps the body.
	resp.Body = struct{ io.ReadCloser }{resp.Body}
	if got := classify.Of(resp, nil); !equalResult(got, r) {
		t.Errorf("Of(wrapped body) = %+v, want %+v", got, r)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != cloudflarePage || err != nil {
		t.Errorf("ReadAll = %d bytes, %v; want the whole page", len(b), err)
	}
	// A response whose request context merely descends from a classified
	// one carries nothing.
	ctx, cancel := context.WithCancel(resp.Request.Context())
	defer cancel()
	derived := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req.WithContext(ctx)}
	if got := classify.Of(derived, nil); got.Outcome != classify.OK {
		t.Errorf("Of(derived) = %v, want ok (no inherited Result)", got.Outcome)
	}
	// Reclassifying replaces the Result rather than stacking contexts.
	prev := resp.Request.Context()
	resp.StatusCode = 503
	resp.Body = http.NoBody
	classify.New(classify.Config{}).Classify(resp, nil)
	if got := classify.Of(resp, nil); got.Outcome != classify.Transient || resp.Request.Context() == prev {
		t.Errorf("Of(reclassified 503) = %v, want transient", got.Outcome)
	}
	// Without a carried result Of classifies without reading the body.
	resp = &http.Response{StatusCode: 403, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(pxPage))}
	if got := classify.Of(resp, nil); got.Outcome != classify.Permanent {
		t.Errorf("Of(unclassified 403) = %v, want permanent", got.Outcome)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != pxPage {
		t.Errorf("Of consumed the body")
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[classify.Outcome]string{
		classify.OK: "ok", classify.Transient: "transient", classify.Throttled: "throttled",
		classify.Refused: "refused", classify.Permanent: "permanent", classify.Canceled: "canceled", 77: "unknown",
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, got, want)
		}
	}
}

func TestDefaultMarkersCopy(t *testing.T) {
	a := classify.DefaultMarkers()
	a[0].Name = "changed"
	a[3].Statuses[0] = 200
	b := classify.DefaultMarkers()
	if b[0].Name == "changed" || b[3].Statuses[0] == 200 {
		t.Error("DefaultMarkers returned shared data")
	}
}

// rwc is an upgraded connection.
type rwc struct {
	in  io.Reader
	out bytes.Buffer
}

func (c *rwc) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *rwc) Write(p []byte) (int, error) { return c.out.Write(p) }
func (*rwc) Close() error                  { return nil }

// TestSwitchingProtocols: a 101 body stays the upgraded connection.
func TestSwitchingProtocols(t *testing.T) {
	conn := &rwc{in: strings.NewReader("hello")}
	resp := &http.Response{StatusCode: 101, Header: hdr("Upgrade", "websocket"), Body: conn}
	r := classify.New(classify.Config{}).Classify(resp, nil)
	if r.Outcome != classify.OK || classify.Of(resp, nil).Reason != "status 101" {
		t.Errorf("Classify(101) = %v, want ok", r.Outcome)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body %T is not an io.ReadWriteCloser", resp.Body)
	}
	io.WriteString(rw, "ping")
	if b, _ := io.ReadAll(rw); string(b) != "hello" || conn.out.String() != "ping" {
		t.Errorf("upgraded connection: read %q, wrote %q; want %q, %q", b, conn.out.String(), "hello", "ping")
	}
}
