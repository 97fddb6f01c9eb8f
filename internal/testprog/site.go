package testprog

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// ProbeSite starts an httptest server that answers by the first segment of
// the path: /ok/... with 200 "hello", /throttle/... with 429 and
// Retry-After: 7, /challenge/... with a 403 challenge page, and anything
// else (robots.txt included) with 404. It returns the server's URL; the
// server is closed when the test ends.
func ProbeSite(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")[0] {
		case "ok":
			io.WriteString(w, "hello\n")
		case "throttle":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		case "challenge":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<html><script>window._cf_chl_opt={};</script></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
