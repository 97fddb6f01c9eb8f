package classify_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// resettable is a body that can be re-armed between iterations.
type resettable struct{ bytes.Reader }

func (*resettable) Close() error { return nil }

func BenchmarkClassify(b *testing.B) {
	c := classify.New(classify.Config{AgentToken: agent})
	challenge := []byte(cloudflarePage + strings.Repeat("<!-- padding -->", (4096-len(cloudflarePage))/16))
	plain := []byte(plainPage + strings.Repeat("<p>lorem ipsum</p>", (4096-len(plainPage))/18))
	b.Run("no-peek/200-binary", func(b *testing.B) {
		body := io.NopCloser(strings.NewReader("\x89PNG"))
		resp := &http.Response{StatusCode: 200, Header: hdr("Content-Type", "image/png", "Server", "cloudflare", "Cf-Ray", "x"), ContentLength: 4, Body: body}
		b.ReportAllocs()
		for b.Loop() {
			resp.Body = body
			c.Classify(resp, nil)
		}
	})
	b.Run("no-peek/404-json", func(b *testing.B) {
		body := io.NopCloser(strings.NewReader("{}"))
		resp := &http.Response{StatusCode: 404, Header: hdr("Content-Type", "application/json"), ContentLength: 2, Body: body}
		b.ReportAllocs()
		for b.Loop() {
			resp.Body = body
			c.Classify(resp, nil)
		}
	})
	b.Run("no-peek/429-retry-after", func(b *testing.B) {
		resp := &http.Response{StatusCode: 429, Header: hdr("Retry-After", "30"), Body: http.NoBody}
		b.ReportAllocs()
		for b.Loop() {
			resp.Body = http.NoBody
			c.Classify(resp, nil)
		}
	})
	for _, bc := range []struct {
		name   string
		status int
		page   []byte
	}{{"peek-4KiB/403-challenge", 403, challenge}, {"peek-4KiB/200-html", 200, plain}} {
		b.Run(bc.name, func(b *testing.B) {
			body := &resettable{}
			resp := &http.Response{StatusCode: bc.status, Header: hdr("Content-Type", "text/html"), ContentLength: int64(len(bc.page))}
			b.SetBytes(int64(len(bc.page)))
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(bc.page)
				resp.Body = body
				c.Classify(resp, nil)
				resp.Body.Close()
			}
		})
	}
	b.Run("error", func(b *testing.B) {
		err := io.ErrUnexpectedEOF
		b.ReportAllocs()
		for b.Loop() {
			c.Classify(nil, err)
		}
	})
}

func BenchmarkParseRetryAfter(b *testing.B) {
	now := testNow
	for _, bc := range []struct {
		name string
		h    http.Header
	}{
		{"seconds", hdr("Retry-After", "120")},
		{"http-date", hdr("Retry-After", now.Add(time.Minute).Format(http.TimeFormat))},
		{"ratelimit", hdr("RateLimit", `"burst";r=0;t=5, "day";r=90;t=3600`)},
		{"x-ratelimit", hdr("X-RateLimit-Reset", "1795953720", "X-RateLimit-Remaining", "0")},
		{"absent", hdr("Content-Type", "text/html")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				classify.ParseRetryAfter(bc.h, now)
			}
		})
	}
}
