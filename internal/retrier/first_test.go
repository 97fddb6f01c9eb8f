package retrier_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/retry"
)

// TestFirstAttemptAsEngineClient: the first attempt, sent without the
// engine's http.Client, ends as it would have through that client, and is
// retried (or not) the same way: a redirect is returned as it is, a
// redirect that http.Client cannot follow because its Location does not
// parse is an error retried like any other, and a 307 answering a request
// with a body is returned.
func TestFirstAttemptAsEngineClient(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/found":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		case "/bad-location":
			w.Header().Set("Location", "http://[::1")
			w.WriteHeader(http.StatusFound)
		case "/bad-location-307":
			w.Header().Set("Location", "http://[::1")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/no-location":
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()

	cases := []struct {
		name     string
		method   string
		path     string
		body     string
		wantCode int    // 0: an error
		wantErr  string // a substring of the error
		wantHits int32
	}{
		{"ok", "GET", "/page", "", 200, "", 1},
		{"redirect returned", "GET", "/found", "", 302, "", 1},
		{"no location returned", "GET", "/no-location", "", 301, "", 1},
		{"unparsable location is an error, retried", "GET", "/bad-location", "", 0, "failed to parse Location header", 3},
		{"unparsable location of a 307 after a body is returned", "PUT", "/bad-location-307", "data", 307, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			rt := mustRetry(classifyHooks.NewTransport(base, classify.Config{}), retry.Policy{MaxRetries: 2, BaseDelay: -1, Rand: noJitter})
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				req.GetBody = nil // a body that cannot be replayed: sent once
			}
			resp, err := rt.RoundTrip(req)
			switch {
			case tc.wantCode == 0:
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("RoundTrip(%s) = %v, %v; want an error containing %q", tc.path, resp, err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("RoundTrip(%s) = %v, want status %d", tc.path, err, tc.wantCode)
			default:
				resp.Body.Close()
				if resp.StatusCode != tc.wantCode {
					t.Errorf("RoundTrip(%s) status = %d, want %d", tc.path, resp.StatusCode, tc.wantCode)
				}
			}
			if got := hits.Load(); got != tc.wantHits {
				t.Errorf("RoundTrip(%s) sent %d requests, want %d", tc.path, got, tc.wantHits)
			}
		})
	}
}

// nilBodyTransport answers with a response whose Body is nil.
type nilBodyTransport struct{ length int64 }

func (n nilBodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: n.length, Request: r}, nil
}

// TestFirstAttemptNilBody: a RoundTripper below that returns no body gets
// an empty one, as http.Client gives it, unless it announced content,
// which is an error.
func TestFirstAttemptNilBody(t *testing.T) {
	for _, tc := range []struct {
		length  int64
		wantErr bool
	}{{0, false}, {-1, false}, {5, true}} {
		rt := mustRetry(nilBodyTransport{tc.length}, retry.Policy{MaxRetries: -1})
		req, _ := http.NewRequest("GET", "http://h.test/", nil)
		resp, err := rt.RoundTrip(req)
		if tc.wantErr {
			if err == nil {
				t.Errorf("content length %d, nil body: RoundTrip = %v, want an error", tc.length, resp.StatusCode)
			}
			continue
		}
		if err != nil {
			t.Fatalf("content length %d: RoundTrip = %v", tc.length, err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 {
			t.Errorf("content length %d: body = %q, %v; want empty", tc.length, b, err)
		}
		resp.Body.Close()
	}
}
