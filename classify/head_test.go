package classify_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// stalledResponse returns a response whose body sends first and then
// nothing more until the returned writer is written to or closed.
func stalledResponse(status int, contentType, first string) (*http.Response, *io.PipeWriter) {
	pr, pw := io.Pipe()
	go io.WriteString(pw, first)
	req := httptest.NewRequest(http.MethodGet, "http://h.test/", nil)
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {contentType}}, Body: pr, Request: req}, pw
}

// TestHead: Head returns a body's first bytes without waiting past the
// peek's time budget for a body that stalls, and the body still yields
// every byte, in order.
func TestHead(t *testing.T) {
	for _, tt := range []struct {
		name        string
		contentType string // text/html is peeked by the classifier, text/plain is not
		classify    bool
		n           int
		want        string
	}{
		{"peeked by the classifier", "text/html", true, 1024, "<html>TestBot is not welcome"},
		{"peeked, fewer bytes asked", "text/html", true, 6, "<html>"},
		{"not peeked: Head peeks", "text/plain", true, 1024, "<html>TestBot is not welcome"},
		{"not classified at all", "text/plain", false, 1024, "<html>TestBot is not welcome"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := classify.New(classify.Config{AgentToken: "TestBot", PeekTimeout: time.Second})
				resp, pw := stalledResponse(http.StatusForbidden, tt.contentType, "<html>TestBot is not welcome")
				if tt.classify {
					c.Classify(resp, nil)
				}
				// Were Head to wait for more of the body, every goroutine of
				// the bubble would block and synctest would fail the test.
				if got := string(c.Head(context.Background(), resp, tt.n)); got != tt.want {
					t.Errorf("Head = %q, want %q", got, tt.want)
				}
				go func() {
					io.WriteString(pw, " here.</html>")
					pw.Close()
				}()
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := "<html>TestBot is not welcome here.</html>"; string(body) != want || err != nil {
					t.Errorf("body = %q, %v; want %q", body, err, want)
				}
			})
		})
	}
}

func TestHeadNoBody(t *testing.T) {
	c := classify.New(classify.Config{})
	for _, resp := range []*http.Response{nil, {Body: nil}, {Body: http.NoBody}} {
		if got := c.Head(context.Background(), resp, 10); got != nil {
			t.Errorf("Head(%+v) = %q, want nil", resp, got)
		}
	}
	resp := &http.Response{Body: io.NopCloser(strings.NewReader("abc"))}
	if got := c.Head(context.Background(), resp, 0); got != nil {
		t.Errorf("Head(n=0) = %q, want nil", got)
	}
	if got := classify.New(classify.Config{PeekSize: -1}).Head(context.Background(), resp, 10); got != nil {
		t.Errorf("Head with peeking off = %q, want nil", got)
	}
	if got := (*classify.Classifier)(nil).Head(context.Background(), resp, 2); string(got) != "ab" {
		t.Errorf("nil Classifier Head = %q, want %q", got, "ab")
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "abc" {
		t.Errorf("body after Head = %q, want %q", b, "abc")
	}
}
