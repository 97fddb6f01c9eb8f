package testprog_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

func TestProbeSite(t *testing.T) {
	site := testprog.ProbeSite(t)
	for _, tc := range []struct {
		path, retryAfter, body string
		status                 int
	}{
		{"/ok/1", "", "hello\n", http.StatusOK},
		{"/throttle/1", "7", "", http.StatusTooManyRequests},
		{"/challenge/1", "", `<html><script>window._cf_chl_opt={};</script></html>`, http.StatusForbidden},
		{"/robots.txt", "", "404 page not found\n", http.StatusNotFound},
	} {
		resp, err := http.Get(site + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retryAfter || string(b) != tc.body {
			t.Errorf("GET %s = %d, Retry-After %q, body %q; want %d, %q, %q",
				tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), b, tc.status, tc.retryAfter, tc.body)
		}
	}
}
