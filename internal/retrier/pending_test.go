package retrier_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/retry"
)

// TestPendingNotForced: the retry decision does not judge a 2xx page the
// classifier left pending (its Result settles as the caller reads it, OK
// or Refused, neither retried): the page is sent once and returned unread,
// its Result still pending, with every byte for the caller.
func TestPendingNotForced(t *testing.T) {
	const page = `<html><head><script src="/sucuri_cloudproxy_js"></script></head></html>`
	var sent atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, ContentLength: -1,
			Body: io.NopCloser(strings.NewReader(page)), Request: r}, nil
	})
	for _, p := range []retry.Policy{{MaxRetries: 3}, {MaxRetries: 3, AttemptTimeout: 1 << 40, Deadline: 1 << 40}} {
		sent.Store(0)
		tr := mustRetry(classifyHooks.NewTransport(base, classify.Config{}), p)
		req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, settled := classifyHooks.OnSettle(resp, nil); settled || sent.Load() != 1 {
			t.Errorf("%+v: settled %v after %d attempts, want pending after 1", p, settled, sent.Load())
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != page {
			t.Errorf("%+v: ReadAll = %q, %v; want the page", p, b, err)
		}
		if r := classify.Of(resp, nil); r.Outcome != classify.Refused {
			t.Errorf("%+v: Of after reading = %v, want refused", p, r.Outcome)
		}
	}
}
