package classify_test

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range [][4]string{
		{"120", "", "", ""},
		{"2.0", "", "", ""},
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
		if q := classify.ParseQuota(h, testNow); q < 0 || math.IsNaN(q) || math.IsInf(q, 0) {
			t.Errorf("ParseQuota(%v) = %v, want a finite rate >= 0", h, q)
		}
	})
}

// FuzzRetryAfterMonotonic checks that a longer Retry-After is never
// honoured less: for delay-seconds a <= b (with or without a fraction),
// the wait of b is at least the wait of a, both parse, and a whole number
// of seconds below MaxRetryAfter is read exactly.
func FuzzRetryAfterMonotonic(f *testing.F) {
	f.Add(uint64(120), uint64(86400), uint16(0))
	f.Add(uint64(86400), uint64(86401), uint16(5))
	f.Add(uint64(86401), uint64(99999999999), uint16(0))
	f.Add(uint64(1), uint64(1<<63), uint16(999))
	f.Fuzz(func(t *testing.T, a, b uint64, frac uint16) {
		if a > b {
			a, b = b, a
		}
		fa := strconv.FormatUint(a, 10)
		if frac > 0 {
			fa += "." + strconv.Itoa(int(frac))
		}
		fb := strconv.FormatUint(b, 10)
		da, oka := classify.ParseRetryAfter(http.Header{"Retry-After": {fa}}, testNow)
		db, okb := classify.ParseRetryAfter(http.Header{"Retry-After": {fb}}, testNow)
		if !oka || !okb {
			t.Fatalf("ParseRetryAfter(%q) ok=%v, (%q) ok=%v; want both parsed", fa, oka, fb, okb)
		}
		if b > a && db < da || b == a && frac == 0 && db != da {
			t.Errorf("Retry-After %q waits %v, longer %q waits %v", fa, da, fb, db)
		}
		if a < uint64(classify.MaxRetryAfter/time.Second) && frac == 0 && da != time.Duration(a)*time.Second {
			t.Errorf("Retry-After %q = %v, want %ds", fa, da, a)
		}
		if frac > 0 && da <= time.Duration(min(a, uint64(classify.MaxRetryAfter/time.Second)-1))*time.Second {
			t.Errorf("Retry-After %q = %v, want rounded up above %ds", fa, da, a)
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
