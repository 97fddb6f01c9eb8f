package classify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// The classifying transport classifies every response once; any layer
// reads the Result back with Of.
func TestTransportWalkthrough(t *testing.T) {
	var out strings.Builder
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "cloudflare") // presence only: still OK
		fmt.Fprint(w, "<html><title>Hello</title></html>")
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/blocked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "<p>ExampleBot is not welcome here.</p>")
	})
	mux.HandleFunc("/challenge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<title>Just a moment...</title><script src=\"/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1\"></script>")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := classify.New(classify.Config{AgentToken: "ExampleBot"})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: classify.NewTransport(base, c)}
	for _, path := range []string{"/page", "/busy", "/blocked", "/challenge"} {
		resp, err := client.Get(srv.URL + path)
		r := classify.Of(resp, err)
		if err == nil {
			body, _ := io.ReadAll(resp.Body) // the whole body, peeked bytes included
			resp.Body.Close()
			fmt.Fprintf(&out, "%-10s %-9s %-16s wait=%v markers=%v bytes=%d\n", path, r.Outcome, r.Reason, r.RetryAfter, r.Markers, len(body))
		}
	}
	if want := "/page      ok        status 200       wait=0s markers=[] bytes=33\n/busy      throttled retry-after      wait=30s markers=[] bytes=0\n/blocked   refused   agent named      wait=0s markers=[] bytes=38\n/challenge refused   challenge marker wait=0s markers=[cloudflare] bytes=110\n"; out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestParseRetryAfterForms(t *testing.T) {
	var out strings.Builder
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		{"Retry-After": {"120"}},
		{"Retry-After": {"Sun, 29 Nov 2026 12:01:30 GMT"}},
		{"Retry-After": {"-5"}},
		{"Ratelimit": {`"default";r=0;t=30`}},
		{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1795953720"}},
	} {
		d, ok := classify.ParseRetryAfter(h, now)
		fmt.Fprintln(&out, d, ok)
	}
	if want := "2m0s true\n1m30s true\n0s false\n30s true\n2m0s true\n"; out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
