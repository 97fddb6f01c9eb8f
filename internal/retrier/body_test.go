package retrier_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// countingBody counts the bytes read from it and its Close calls.
type countingBody struct {
	r      io.Reader
	read   int
	closes int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { b.closes++; return nil }

// TestRetriedBodiesAreDrainedAndClosed: a retried response's body is
// drained up to 64 KiB (unless it is known to be longer) and closed once;
// the final response's body is left to the caller.
func TestRetriedBodiesAreDrainedAndClosed(t *testing.T) {
	tests := []struct {
		name          string
		size          int
		contentLength int64
		wantRead      int
	}{
		{"small body drained", 40 << 10, 40 << 10, 40 << 10},
		{"unknown length drained up to 64 KiB", 100 << 10, -1, 64 << 10},
		{"known long body closed undrained", 1 << 20, 1 << 20, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var bodies []*countingBody
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					status, data := 503, bytes.Repeat([]byte{'x'}, tt.size)
					if len(bodies) > 0 {
						status, data = 200, []byte("ok")
					}
					b := &countingBody{r: bytes.NewReader(data)}
					bodies = append(bodies, b)
					return &http.Response{StatusCode: status, Header: http.Header{}, Body: b,
						ContentLength: tt.contentLength, Request: r}, nil
				})
				resp, err := mustRetry(base, retry.Policy{MaxRetries: 3, Rand: noJitter}).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
				if err != nil {
					t.Fatalf("RoundTrip = %v", err)
				}
				if len(bodies) != 2 {
					t.Fatalf("attempts = %d, want 2", len(bodies))
				}
				if got := bodies[0].read; got != tt.wantRead {
					t.Errorf("retried body: read %d bytes, want %d", got, tt.wantRead)
				}
				if got := bodies[0].closes; got != 1 {
					t.Errorf("retried body closed %d times, want 1", got)
				}
				if got := bodies[1].closes; got != 0 {
					t.Errorf("final body closed %d times before the caller closed it, want 0", got)
				}
				if got := readClose(t, resp); got != "ok" {
					t.Errorf("final body = %q, want %q", got, "ok")
				}
				if got := bodies[1].closes; got != 1 {
					t.Errorf("final body closed %d times after the caller closed it, want 1", got)
				}
			})
		})
	}
}

// TestGetBodyReachesLowerLayers: each attempt's request keeps GetBody, so
// http.Transport can rewind a body on a dead keep-alive connection.
func TestGetBodyReachesLowerLayers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent [][]byte
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.GetBody == nil {
				t.Errorf("attempt %d: GetBody is nil below the retry layer", retrier.AttemptFrom(r.Context()))
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.ContentLength != int64(len(b)) {
				t.Errorf("attempt %d: ContentLength = %d, body %d bytes", retrier.AttemptFrom(r.Context()), r.ContentLength, len(b))
			}
			sent = append(sent, b)
			status := 503
			if len(sent) == 3 {
				status = 200
			}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		p := retry.Policy{MaxRetries: 3, Rand: noJitter, RetryNonIdempotent: true}
		resp, err := mustRetry(base, p).RoundTrip(newRequest(t, t.Context(), "POST", "http://h.test/", []byte("payload")))
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		resp.Body.Close()
		for i, b := range sent {
			if string(b) != "payload" {
				t.Errorf("attempt %d sent %q, want %q", i+1, b, "payload")
			}
		}
	})
}
