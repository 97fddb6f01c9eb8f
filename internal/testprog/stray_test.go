package testprog_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// TestStrayServer sends 400 requests, to 4 host names, through the
// server's Transport: every host reaches the server, a share of the
// answers near the configured one is 429 with the configured Retry-After,
// and Answers counts what was answered.
func TestStrayServer(t *testing.T) {
	for _, tt := range []struct {
		name       string
		opts       testprog.StrayOptions
		lo, hi     int    // 429s of 400 answers
		retryAfter string // of each 429
	}{
		{"default", testprog.StrayOptions{Seed: 1}, 1, 20, "1"},
		{"half, Retry-After 3", testprog.StrayOptions{Share: 0.5, RetryAfter: 3, Seed: 2}, 150, 250, "3"},
		{"no Retry-After", testprog.StrayOptions{Share: 0.5, RetryAfter: -1, Seed: 3}, 150, 250, ""},
		{"none", testprog.StrayOptions{Share: -1}, 0, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := testprog.StrayServer(t, tt.opts)
			tr := s.Transport(2)
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			var ok, refused int
			for i := range 400 {
				resp, err := c.Get(fmt.Sprintf("http://h%d.example/page/%d", i%4, i))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					ok++
				case http.StatusTooManyRequests:
					refused++
					if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
						t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
					}
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
			if refused < tt.lo || refused > tt.hi {
				t.Errorf("%d of 400 answered 429, want %d to %d", refused, tt.lo, tt.hi)
			}
			if gotOK, gotRefused := s.Answers(); gotOK != ok || gotRefused != refused {
				t.Errorf("Answers() = %d, %d; the client saw %d, %d", gotOK, gotRefused, ok, refused)
			}
		})
	}
}
