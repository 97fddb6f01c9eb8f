package classify_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// TestResetWithoutRemaining: a RateLimit reset without a remaining count is
// a wait only on a 429 or a 503, whose status already says the quota is
// spent; on any other status it describes a window, not a wait.
func TestResetWithoutRemaining(t *testing.T) {
	c := classify.New(classify.Config{})
	for _, tt := range []struct {
		status int
		want   time.Duration
	}{
		{429, 30 * time.Second},
		{503, 30 * time.Second},
		{500, 0},
		{403, 0},
	} {
		h := http.Header{"Ratelimit": {`"default";t=30`}}
		r, _ := classifyBody(t, c, tt.status, h, nil)
		if r.RetryAfter != tt.want {
			t.Errorf("Classify(%d, RateLimit without r) RetryAfter = %v, want %v", tt.status, r.RetryAfter, tt.want)
		}
	}
}

// closeCounter is a response body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// TestClassifiedBodyClosesOriginal: closing the body Classify leaves in
// the response closes the original body, whether the classifier peeked at
// it or not.
func TestClassifiedBodyClosesOriginal(t *testing.T) {
	c := classify.New(classify.Config{})
	for _, tt := range []struct {
		name        string
		status      int
		contentType string
	}{
		{"peeked page", 403, "text/html"},
		{"unpeeked image", 200, "image/png"},
		{"unpeeked ok page", 200, "text/html"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := &closeCounter{Reader: bytes.NewReader([]byte("<html><p>hello</p></html>"))}
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{"Content-Type": {tt.contentType}},
				ContentLength: -1, Request: req, Body: body}
			c.Classify(resp, nil)
			io.ReadAll(resp.Body)
			resp.Body.Close()
			if body.closes != 1 {
				t.Errorf("original body closed %d times, want 1", body.closes)
			}
		})
	}
}

// TestJSONMediaType: a media type counts as JSON by its "+json" suffix
// only when something stands before the suffix.
func TestJSONMediaType(t *testing.T) {
	pxJSON := `{"appId":"PXabc","blockScript":"/abc/captcha/captcha.js?a=c"}`
	for _, tt := range []struct {
		ctype string
		want  classify.Outcome
	}{
		{"application/vnd.api+json", classify.Refused},
		{"a+json", classify.Refused},
		{"+json", classify.Permanent},
	} {
		r, _ := classifyBody(t, classify.New(classify.Config{}), 403, http.Header{"Content-Type": {tt.ctype}}, []byte(pxJSON))
		if r.Outcome != tt.want {
			t.Errorf("403 %s with a PerimeterX JSON body = %v %v, want %v", tt.ctype, r.Outcome, r.Markers, tt.want)
		}
	}
}

// TestRateLimitFieldSyntax: a quoted policy name may hold escaped quotes,
// commas and semicolons; of several exhausted policies the longest reset
// wins, in any order.
func TestRateLimitFieldSyntax(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		field string
		want  time.Duration
	}{
		{`"a\",b";r=0;t=8`, 8 * time.Second},
		{`"a\";b";r=0;t=9`, 9 * time.Second},
		{`"day";r=0;t=60, "burst";r=0;t=5`, time.Minute},
		{`"burst";r=0;t=5, "day";r=0;t=60`, time.Minute},
	} {
		got, ok := classify.ParseRetryAfter(http.Header{"Ratelimit": {tt.field}}, now)
		if !ok || got != tt.want {
			t.Errorf("ParseRetryAfter(RateLimit: %s) = %v, %v; want %v", tt.field, got, ok, tt.want)
		}
	}
}

// TestErrorTimeout: an Error is a timeout exactly when the error it wraps
// says so.
func TestErrorTimeout(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{errors.New("plain"), false},
		{timeoutSays{true}, true},
		{timeoutSays{false}, false},
		{nil, false},
	} {
		if got := (&classify.Error{Err: tt.err}).Timeout(); got != tt.want {
			t.Errorf("Error{%v}.Timeout() = %v, want %v", tt.err, got, tt.want)
		}
	}
}

type timeoutSays struct{ timeout bool }

func (e timeoutSays) Error() string   { return "timeout?" }
func (e timeoutSays) Timeout() bool   { return e.timeout }
func (e timeoutSays) Temporary() bool { return false }

// TestPeekOneByteAtATime: a body that arrives one byte per Read is peeked
// and classified as a whole one would be, and the caller reads every byte.
func TestPeekOneByteAtATime(t *testing.T) {
	page := `<html><head><title>Just a moment...</title></head><body><script>window._cf_chl_opt={cvId:"3"};</script>` +
		strings.Repeat("<p>filler</p>", 300) + `</body></html>`
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
	resp := &http.Response{StatusCode: 403, Header: http.Header{"Content-Type": {"text/html"}}, ContentLength: -1, Request: req,
		Body: io.NopCloser(iotest.OneByteReader(strings.NewReader(page)))}
	r := classify.New(classify.Config{}).Classify(resp, nil)
	if r.Outcome != classify.Refused {
		t.Errorf("Classify(one byte per Read) = %v %q %v, want Refused", r.Outcome, r.Reason, r.Markers)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != page {
		t.Errorf("body read = %d bytes, %v; want the %d sent", len(got), err, len(page))
	}
}

// TestRateLimitFieldBothReaders: ParseRetryAfter and ParseQuota read the
// policies of the IETF RateLimit field the same way — quoted names with
// escapes, several field lines, a dictionary spread over lines or mixed with
// structured members — one taking the longest reset of a spent policy, the
// other the tightest rate of any policy (a spent one is a request at its
// reset; requests left are spread over the reset less half a second, the
// delay-seconds being rounded up).
func TestRateLimitFieldBothReaders(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	left := func(rem, reset float64) float64 { return rem * 60 / (reset - 0.5) }
	for _, tt := range []struct {
		name   string
		fields []string
		wait   time.Duration
		waitOK bool
		quota  float64 // requests a minute
	}{
		{"escaped name, spent", []string{`"a\",b";r=0;t=8`}, 8 * time.Second, true, 60.0 / 8},
		{"escaped name, left", []string{`"a\",b";r=4;t=8`}, 0, false, left(4, 8)},
		{"two lines", []string{`"burst";r=3;t=5`, `"day";r=0;t=60`}, time.Minute, true, 1},
		{"two lines, both left", []string{`"burst";r=30;t=5`, `"day";r=10;t=60`}, 0, false, left(10, 60)},
		{"dictionary over two lines, spent", []string{`remaining=0`, `reset=30`}, 30 * time.Second, true, 2},
		{"dictionary over two lines, left", []string{`remaining=6`, `reset=30`}, 0, false, left(6, 30)},
		{"structured and dictionary, dictionary longest", []string{`"p";r=0;t=5, remaining=0, reset=30`}, 30 * time.Second, true, 2},
		{"structured and dictionary, dictionary tightest", []string{`"p";r=10;t=60, remaining=2, reset=60`}, 0, false, left(2, 60)},
		{"structured and dictionary, structured tightest", []string{`remaining=20, reset=60, "p";r=1;t=60`}, 0, false, left(1, 60)},
		{"parameter without a value", []string{`"p";r;t=5`}, 0, false, 0},
		{"later parameter wins", []string{`"p";r=9;t=60;r=0`}, time.Minute, true, 1},
	} {
		h := http.Header{"Ratelimit": tt.fields}
		if got, ok := classify.ParseRetryAfter(h, now); got != tt.wait || ok != tt.waitOK {
			t.Errorf("%s: ParseRetryAfter(RateLimit: %q) = %v, %v; want %v, %v", tt.name, tt.fields, got, ok, tt.wait, tt.waitOK)
		}
		if got := classify.ParseQuota(h, now); math.Abs(got-tt.quota) > 1e-9*tt.quota {
			t.Errorf("%s: ParseQuota(RateLimit: %q) = %v; want %v", tt.name, tt.fields, got, tt.quota)
		}
	}
}

// TestStatusRange: Retry-After is read on 4xx and 5xx answers only; a
// status past 599 is an unexpected one.
func TestStatusRange(t *testing.T) {
	c := classify.New(classify.Config{})
	for _, tt := range []struct {
		status int
		wait   time.Duration
		reason string
	}{
		{599, 5 * time.Second, "retry-after"},
		{600, 0, "unexpected status"},
	} {
		r, _ := classifyBody(t, c, tt.status, http.Header{"Retry-After": {"5"}}, nil)
		if r.RetryAfter != tt.wait || r.Reason != tt.reason {
			t.Errorf("Classify(%d, Retry-After: 5) = %v %q %v; want wait %v, reason %q", tt.status, r.Outcome, r.Reason, r.RetryAfter, tt.wait, tt.reason)
		}
	}
}

// TestRateLimitDictionaryAndList: the dictionary form and the policy list
// compete like policies: the longest reset wins, either way round.
func TestRateLimitDictionaryAndList(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		fields []string
		want   time.Duration
	}{
		{[]string{`"day";r=0;t=60`, `limit=10, remaining=0, reset=5`}, time.Minute},
		{[]string{`"burst";r=0;t=5`, `limit=10, remaining=0, reset=60`}, time.Minute},
		{[]string{`limit=10, remaining=0, reset=7`}, 7 * time.Second},
	} {
		got, ok := classify.ParseRetryAfter(http.Header{"Ratelimit": tt.fields}, now)
		if !ok || got != tt.want {
			t.Errorf("ParseRetryAfter(RateLimit: %q) = %v, %v; want %v", tt.fields, got, ok, tt.want)
		}
	}
}

// TestUntypedJSONBody: a body without Content-Type that starts with '{' or
// '[' is read as JSON, so JSON-only markers apply to it.
func TestUntypedJSONBody(t *testing.T) {
	pxJSON := `{"appId":"PXabc","blockScript":"/abc/captcha/captcha.js?a=c"}`
	for _, body := range []string{pxJSON, "[" + pxJSON + "]", "\n\t" + pxJSON} {
		r, _ := classifyBody(t, classify.New(classify.Config{}), 403, http.Header{}, []byte(body))
		if r.Outcome != classify.Refused {
			t.Errorf("untyped 403 %.20q… = %v %v, want Refused by the PerimeterX JSON marker", body, r.Outcome, r.Markers)
		}
	}
}

// TestHeaderMarkerValues: a header marker matches only when its header is
// present and holds its value, ignoring ASCII case (the letters A and Z
// included).
func TestHeaderMarkerValues(t *testing.T) {
	for _, tt := range []struct {
		value  string            // the marker's value
		header map[string]string // the response's headers
		want   classify.Outcome
	}{
		{"block", map[string]string{"X-Acme-Shield": "BLOCK"}, classify.Refused},
		{"block", map[string]string{"X-Acme-Shield": "allow"}, classify.OK},
		{"block", map[string]string{"X-Other": "block"}, classify.OK},
		{"ZAP", map[string]string{"X-Acme-Shield": "zap"}, classify.Refused},
		{"zap", map[string]string{"X-Acme-Shield": "ZAP"}, classify.Refused},
	} {
		c := classify.New(classify.Config{Markers: []classify.Marker{{Name: "acme", Header: "x-acme-shield", Value: tt.value}}})
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		r, _ := classifyBody(t, c, 200, h, nil)
		if r.Outcome != tt.want {
			t.Errorf("marker value %q, headers %v: %v %v, want %v", tt.value, tt.header, r.Outcome, r.Markers, tt.want)
		}
	}
}

// TestResetAtEpochThreshold: a reset of exactly 1e9 is still a delay in
// seconds (capped), not a Unix time in 2001.
func TestResetAtEpochThreshold(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1000000000"}}
	if got, ok := classify.ParseRetryAfter(h, now); !ok || got != classify.MaxRetryAfter {
		t.Errorf("ParseRetryAfter(reset 1e9) = %v, %v; want %v (capped delay)", got, ok, classify.MaxRetryAfter)
	}
}

// TestAgentNamedOnlyInText: a 403 naming the agent refuses the crawler in a
// page or text, not in an image or other binary body.
func TestAgentNamedOnlyInText(t *testing.T) {
	c := classify.New(classify.Config{AgentToken: "TestBot"})
	for _, tt := range []struct {
		ctype string
		want  classify.Outcome
	}{
		{"text/plain", classify.Refused},
		{"image/png", classify.Permanent},
	} {
		r, _ := classifyBody(t, c, 403, http.Header{"Content-Type": {tt.ctype}}, []byte("TestBot is not welcome"))
		if r.Outcome != tt.want {
			t.Errorf("403 %s naming the agent = %v %q, want %v", tt.ctype, r.Outcome, r.Reason, tt.want)
		}
	}
}

// TestAttemptTimeoutIsDeadline: ErrAttemptTimeout is a deadline, for
// callers that test errors.Is(err, context.DeadlineExceeded).
func TestAttemptTimeoutIsDeadline(t *testing.T) {
	if !errors.Is(classify.ErrAttemptTimeout, context.DeadlineExceeded) {
		t.Error("errors.Is(ErrAttemptTimeout, context.DeadlineExceeded) = false")
	}
	if errors.Is(classify.ErrAttemptTimeout, context.Canceled) {
		t.Error("errors.Is(ErrAttemptTimeout, context.Canceled) = true")
	}
}
