package retrier_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// keyLog is a RoundTripper that records what KeyFrom says in each
// attempt's context before sending it on.
type keyLog struct {
	next http.RoundTripper
	mu   sync.Mutex // guards seen
	seen []string   // KeyFrom per attempt; "-" when there was none
}

func (k *keyLog) RoundTrip(r *http.Request) (*http.Response, error) {
	key, ok := firstsend.KeyFrom(r.Context())
	if !ok {
		key = "-"
	}
	k.mu.Lock()
	k.seen = append(k.seen, key)
	k.mu.Unlock()
	return k.next.RoundTrip(r)
}

// TestKeyFromEveryAttempt: the key given to RoundTripKey is found in the
// context of every attempt of the request, the retries included, and of
// no attempt of a request sent with RoundTrip or with an empty key.
func TestKeyFromEveryAttempt(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 != 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	for _, tc := range []struct {
		name string
		send func(*retrier.Transport, *http.Request) (*http.Response, error)
		want string
	}{
		{"RoundTripKey", func(rt *retrier.Transport, r *http.Request) (*http.Response, error) {
			return firstsend.RoundTripKey(rt, r, "h.test:8080")
		}, "h.test:8080"},
		{"RoundTripKey empty", func(rt *retrier.Transport, r *http.Request) (*http.Response, error) {
			return firstsend.RoundTripKey(rt, r, "")
		}, "-"},
		{"RoundTrip", (*retrier.Transport).RoundTrip, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.Store(0)
			log := &keyLog{next: base}
			rt := mustRetry(classifyHooks.NewTransport(log, classify.Config{}), retry.Policy{MaxRetries: 3, BaseDelay: time.Millisecond, Rand: noJitter})
			resp, err := tc.send(rt, newRequest(t, t.Context(), "GET", srv.URL, nil))
			if err != nil {
				t.Fatalf("send = %v", err)
			}
			if got := readClose(t, resp); resp.StatusCode != 200 || got != "ok" {
				t.Fatalf("send = %d %q, want 200 %q", resp.StatusCode, got, "ok")
			}
			if len(log.seen) != 3 {
				t.Fatalf("%d attempts, want 3 (two 503s, then the 200)", len(log.seen))
			}
			for i, got := range log.seen {
				if got != tc.want {
					t.Errorf("attempt %d: KeyFrom = %q, want %q", i+1, got, tc.want)
				}
			}
		})
	}
	if _, ok := firstsend.KeyFrom(t.Context()); ok {
		t.Error("KeyFrom of a context outside any attempt reports a key")
	}
}
