package retrier_test

import (
	"net/http"
	"testing"

	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/retry"
)

// memTransport answers every request with the same empty 200, in memory.
type memTransport struct{}

func (memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// memSender is memTransport taking first attempts as a firstsend.Sender,
// as egresskit's chain does.
type memSender struct{ memTransport }

func (m memSender) SendFirst(a firstsend.Attempt) (*http.Response, error) { return m.RoundTrip(a.Req) }

func benchRoundTrip(b *testing.B, rt http.RoundTripper) {
	req, err := http.NewRequest("GET", "http://h.test/path", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("User-Agent", "examplebot/1.0")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchRoundTrip(b, memTransport{}) })
	b.Run("retry", func(b *testing.B) { benchRoundTrip(b, mustRetry(memTransport{}, retry.Policy{MaxRetries: 3})) })
	b.Run("retry+sender", func(b *testing.B) { benchRoundTrip(b, mustRetry(memSender{}, retry.Policy{MaxRetries: 3})) })
	b.Run("retry+timeouts", func(b *testing.B) {
		p := retry.Policy{MaxRetries: 3, AttemptTimeout: 1 << 40, Deadline: 1 << 40}
		benchRoundTrip(b, mustRetry(memTransport{}, p))
	})
}
