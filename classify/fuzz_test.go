package classify_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range [][4]string{
		{"120", "", "", ""},
		{"Sun, 29 Nov 2026 12:01:30 GMT", "", "", ""},
		{"Sunday, 29-Nov-26 12:01:30 GMT", "", "", ""},
		{"Sun Nov 29 12:01:30 2026", "", "", ""},
		{"-5", "", "", ""},
		{"999999999999", "", "", ""},
		{"Tue, 99 Foo", "", "", ""},
		{"", `"default";r=0;t=30`, "", ""},
		{"", `"a,b";r=0;t=5, "day";r=0;t=3600`, "", ""},
		{"", "limit=10, remaining=0, reset=30", "", ""},
		{"", "", "1795953690.5", "0"},
		{"", "", "60", "0"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, retryAfter, rateLimit, xReset, xRemaining string) {
		h := http.Header{}
		for k, v := range map[string]string{"Retry-After": retryAfter, "Ratelimit": rateLimit, "X-Ratelimit-Reset": xReset, "X-Ratelimit-Remaining": xRemaining, "Ratelimit-Reset": xReset, "Ratelimit-Remaining": xRemaining} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		d, ok := classify.ParseRetryAfter(h, testNow)
		if !ok && d != 0 {
			t.Errorf("ParseRetryAfter(%v) = %v, false; want 0 when not ok", h, d)
		}
		if d < 0 || d > classify.MaxRetryAfter {
			t.Errorf("ParseRetryAfter(%v) = %v, outside [0, %v]", h, d, classify.MaxRetryAfter)
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add(200, "Content-Type", "text/html", []byte(plainPage), int8(0))
	f.Add(403, "Cf-Mitigated", "challenge", []byte(cloudflarePage), int8(0))
	f.Add(202, "X-Amzn-Waf-Action", "captcha", []byte(awsWAFPage), int8(1))
	f.Add(429, "Retry-After", "Tue, 99 Foo", []byte{}, int8(0))
	f.Add(503, "Ratelimit", `"d";r=0;t=3`, []byte(f5Page), int8(-1))
	f.Add(-1, "", "", []byte(nil), int8(3))
	f.Fuzz(func(t *testing.T, status int, name, value string, body []byte, peek int8) {
		c := classify.New(classify.Config{AgentToken: agent, PeekSize: int(peek) * 16, Now: func() time.Time { return testNow }})
		h := http.Header{}
		if name != "" {
			h[name] = []string{value}
		}
		resp := &http.Response{StatusCode: status, Header: h, ContentLength: -1, Body: io.NopCloser(bytes.NewReader(body))}
		r := c.Classify(resp, nil)
		if r.Outcome > classify.Canceled || r.Reason == "" || r.Status != status {
			t.Errorf("Classify(%d, %q: %q) = %+v: invalid result", status, name, value, r)
		}
		if r.RetryAfter < 0 || r.RetryAfter > classify.MaxRetryAfter {
			t.Errorf("Classify(%d, %q: %q).RetryAfter = %v", status, name, value, r.RetryAfter)
		}
		if (r.Outcome == classify.Refused) != (len(r.Markers) > 0 || r.Reason == "agent named") {
			t.Errorf("Classify(%d) = %v with markers %q", status, r.Outcome, r.Markers)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("body after Classify = %d bytes, %v; want the %d bytes given", len(got), err, len(body))
		}
		resp.Body.Close()
	})
}
