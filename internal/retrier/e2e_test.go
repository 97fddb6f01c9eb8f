package retrier_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// newClient returns a client over retry → classify → a fresh
// http.Transport whose idle connections are closed when the test ends.
func newClient(t *testing.T, p retry.Policy) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: mustRetry(classifyHooks.NewTransport(base, classify.Config{}), p)}
}

func TestEndToEnd(t *testing.T) {
	var (
		mu     sync.Mutex // guards bodies and paths
		bodies []string
		paths  []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		paths = append(paths, r.URL.Path)
		n := len(paths)
		mu.Unlock()
		switch {
		case r.URL.Path == "/moved":
			http.Redirect(w, r, "/here", http.StatusFound)
		case n == 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "hello")
		}
	}))
	defer srv.Close()
	client := newClient(t, retry.Policy{MaxRetries: 3, Rand: noJitter, RetryNonIdempotent: true})

	payload := bytes.Repeat([]byte("0123456789"), 1000)
	resp, err := client.Post(srv.URL+"/submit", "application/octet-stream", bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("Post = %v", err)
	}
	if got := readClose(t, resp); resp.StatusCode != 200 || got != "hello" {
		t.Errorf("Post = %d %q, want 200 %q", resp.StatusCode, got, "hello")
	}
	if len(bodies) != 2 || bodies[0] != string(payload) || bodies[1] != string(payload) {
		t.Errorf("server received %d bodies, want the payload twice, identical", len(bodies))
	}

	// The caller's client follows the redirect; the retry layer does not.
	resp, err = client.Get(srv.URL + "/moved")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	readClose(t, resp)
	if want := []string{"/submit", "/submit", "/moved", "/here"}; !equalStrings(paths, want) {
		t.Errorf("server saw %v, want %v", paths, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEndToEndFaultServers(t *testing.T) {
	t.Run("throttle beyond cap returns the real 429", func(t *testing.T) {
		srv := egresstest.NewThrottleServer(time.Hour)
		defer srv.Close()
		resp, err := newClient(t, retry.Policy{MaxRetries: 3}).Get(srv.URL)
		if err != nil {
			t.Fatalf("Get = %v", err)
		}
		if body := readClose(t, resp); resp.StatusCode != 429 || body == "" {
			t.Errorf("Get = %d %q, want the server's 429 and body", resp.StatusCode, body)
		}
		if got := srv.Requests(); got != 1 {
			t.Errorf("requests = %d, want 1", got)
		}
	})
	t.Run("challenge is not retried", func(t *testing.T) {
		srv := egresstest.NewChallengeServer()
		defer srv.Close()
		resp, err := newClient(t, retry.Policy{MaxRetries: 3}).Get(srv.URL)
		if err != nil {
			t.Fatalf("Get = %v", err)
		}
		readClose(t, resp)
		if got := classify.Of(resp, nil).Outcome; resp.StatusCode != 403 || got != classify.Refused {
			t.Errorf("Get = %d %v, want 403 refused", resp.StatusCode, got)
		}
		if got := srv.Requests(); got != 1 {
			t.Errorf("requests = %d, want 1", got)
		}
	})
	t.Run("hung host is cut by the attempt timeout", func(t *testing.T) {
		srv := egresstest.NewHangServer()
		defer srv.Close()
		p := retry.Policy{MaxRetries: 1, Rand: noJitter, AttemptTimeout: 50 * time.Millisecond}
		_, err := newClient(t, p).Get(srv.URL)
		if !errors.Is(err, classify.ErrAttemptTimeout) {
			t.Errorf("Get = %v, want %v", err, classify.ErrAttemptTimeout)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := srv.AwaitAccepted(ctx, 2); err != nil {
			t.Errorf("AwaitAccepted(2) = %v: want one connection per attempt", err)
		}
	})
}

// mustRetry is retrier.New for a policy the test knows to be valid.
func mustRetry(next http.RoundTripper, p retry.Policy) *retrier.Transport {
	t, err := retrier.New(next, p)
	if err != nil {
		panic(err)
	}
	return t
}
