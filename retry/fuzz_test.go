package retry_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/retry"
)

// FuzzRetryAfter: whatever a server puts in Retry-After, RoundTrip never
// panics, never waits longer than MaxDelay, and returns either the 429 or
// the recovered 200.
func FuzzRetryAfter(f *testing.F) {
	for _, v := range []string{"5", "0", "-5", "999999999999", "Tue, 99 Foo", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "3601", "1e3", " 7 ", ""} {
		f.Add(v)
	}
	const maxDelay = 30 * time.Second
	f.Fuzz(func(t *testing.T, v string) {
		synctest.Test(t, func(t *testing.T) {
			script := egresstest.NewScript(
				egresstest.Step{Status: 429, Header: http.Header{"Retry-After": {v}}},
				egresstest.Step{Body: "ok"},
			)
			tr := retry.New(script, retry.Policy{MaxDelay: maxDelay})
			req, err := http.NewRequestWithContext(t.Context(), "GET", "http://h.test/", nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip = %v", err)
			}
			resp.Body.Close()
			if got := time.Since(start); got > maxDelay {
				t.Errorf("Retry-After %q: waited %v, above MaxDelay %v", v, got, maxDelay)
			}
			if resp.StatusCode != 200 && resp.StatusCode != 429 {
				t.Errorf("Retry-After %q: status %d, want 200 or 429", v, resp.StatusCode)
			}
		})
	})
}
