package retrier_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/retry"
)

// FuzzRetryAfter: whatever a server puts in Retry-After, RoundTrip waits
// exactly what the policy says, in fake time. The wait before the retry is
// the jittered backoff with the Retry-After that the classifier reads
// (Result.RetryAfter of the 429) as its floor; a Retry-After above MaxDelay is not waited for: the
// 429 comes back at once. No other outcome is allowed.
func FuzzRetryAfter(f *testing.F) {
	for _, v := range []string{"5", "0", "-5", "999999999999", "Tue, 99 Foo", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "3601", "1e3", " 7 ", "", "30", "31",
		"Sat, 01 Jan 2000 00:00:10 GMT", "Saturday, 01-Jan-00 00:00:40 GMT", "Sat Jan  1 00:00:20 2000"} {
		f.Add(v, uint16(0))
		f.Add(v, uint16(499))
	}
	const (
		maxDelay  = 30 * time.Second
		baseDelay = 500 * time.Millisecond
	)
	f.Fuzz(func(t *testing.T, v string, jitterMS uint16) {
		synctest.Test(t, func(t *testing.T) {
			header := http.Header{"Retry-After": {v}}
			script := egresstest.NewScript(
				egresstest.Step{Status: 429, Header: header},
				egresstest.Step{Body: "ok"},
			)
			jitter := time.Duration(jitterMS) * time.Millisecond
			tr := mustRetry(script, retry.Policy{
				MaxRetries: 3,
				MaxDelay:   maxDelay,
				BaseDelay:  baseDelay,
				Rand:       func(n int64) int64 { return int64(jitter) % n },
			})
			req, err := http.NewRequestWithContext(t.Context(), "GET", "http://h.test/", nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// The wait the 429 asks for, as the classifier reads it: a wait
			// that parses as 0 (a past date) means none.
			ra := classify.Of(&http.Response{StatusCode: 429, Header: header}, nil).RetryAfter
			ok := ra > 0
			// The first retry's backoff is drawn below BaseDelay.
			backoff := jitter % baseDelay
			wantStatus, wantWait := 200, backoff
			switch {
			case ok && ra > maxDelay:
				wantStatus, wantWait = 429, 0
			case ok:
				wantWait = max(backoff, ra)
			}

			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("Retry-After %q: RoundTrip = %v", v, err)
			}
			resp.Body.Close()
			got := time.Since(start)
			if resp.StatusCode != wantStatus || got != wantWait {
				t.Errorf("Retry-After %q (parsed %v, %v), jitter %v: status %d after %v, want %d after %v",
					v, ra, ok, jitter, resp.StatusCode, got, wantStatus, wantWait)
			}
			if n := script.Requests(); n != 1+btoi(wantStatus == 200) {
				t.Errorf("Retry-After %q: %d attempts, want %d", v, n, 1+btoi(wantStatus == 200))
			}
		})
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
