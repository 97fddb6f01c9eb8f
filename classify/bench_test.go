package classify_test

import (
	"bytes"
	"fmt"
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

// BenchmarkTransport measures a Transport over an in-memory answer whose
// 4 KiB HTML body the caller reads to the end and closes: a 200 page,
// judged on its first KiB inside the caller's first Read, against a 403,
// peeked in RoundTrip by a goroutine bounded by PeekTimeout.
func BenchmarkTransport(b *testing.B) {
	page := []byte(plainPage + strings.Repeat("<p>lorem ipsum</p>", (4096-len(plainPage))/18))
	for _, status := range []int{200, 403} {
		b.Run(fmt.Sprintf("html-4KiB/%d", status), func(b *testing.B) {
			h := hdr("Content-Type", "text/html")
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: status, Header: h, ContentLength: int64(len(page)),
					Body: io.NopCloser(bytes.NewReader(page)), Request: r}, nil
			})
			tr := classify.NewTransport(next, classify.New(classify.Config{AgentToken: agent}))
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/p", nil)
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
