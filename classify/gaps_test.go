package classify_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
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
