package retrier_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// directLog is a firstsend.Sender that records how each attempt reached
// it: through SendFirst ("first") or RoundTrip ("attempt"), with the
// attempt number and key it was given or found in the context.
type directLog struct {
	next http.RoundTripper
	seen []directSeen
}

type directSeen struct {
	via     string
	req     *http.Request
	attempt int
	key     string
}

func (d *directLog) RoundTrip(r *http.Request) (*http.Response, error) {
	key, _ := firstsend.KeyFrom(r.Context())
	d.seen = append(d.seen, directSeen{"attempt", r, retrier.AttemptFrom(r.Context()), key})
	return d.next.RoundTrip(r)
}

func (d *directLog) SendFirst(a firstsend.Attempt) (*http.Response, error) {
	d.seen = append(d.seen, directSeen{"first", a.Req, retrier.AttemptFrom(a.Req.Context()), a.Key})
	return d.next.RoundTrip(a.Req)
}

// TestSendFirst: a next RoundTripper that is a firstsend.Sender gets the
// first attempt as the caller's request itself, with the key, and every
// retry as before, in an attempt context numbered from 2 that carries the
// key; with an attempt timeout, or a request the engine's client would
// change, every attempt is made as before.
func TestSendFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      retry.Policy
		target string
		direct bool // the first attempt goes through SendFirst
	}{
		{"plain", retry.Policy{MaxRetries: 2, Rand: noJitter}, "http://h.test/", true},
		{"attempt timeout", retry.Policy{MaxRetries: 2, Rand: noJitter, AttemptTimeout: 1 << 40}, "http://h.test/", false},
		{"deadline", retry.Policy{MaxRetries: 2, Rand: noJitter, Deadline: 1 << 40}, "http://h.test/", false},
		{"userinfo", retry.Policy{MaxRetries: 2, Rand: noJitter}, "http://u:p@h.test/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &directLog{next: egresstest.NewScript(step{Status: 503}, step{Body: "ok"})}
				req := newRequest(t, t.Context(), "GET", tc.target, nil)
				resp, err := firstsend.RoundTripKey(mustRetry(d, tc.p), req, "h.test")
				if err != nil {
					t.Fatalf("RoundTripKey = %v", err)
				}
				if got := readClose(t, resp); got != "ok" {
					t.Fatalf("body = %q, want %q", got, "ok")
				}
				want := []directSeen{{"attempt", nil, 1, "h.test"}, {"attempt", nil, 2, "h.test"}}
				if tc.direct {
					want[0] = directSeen{"first", req, 0, "h.test"}
				}
				if len(d.seen) != len(want) {
					t.Fatalf("%d attempts, want %d", len(d.seen), len(want))
				}
				for i, got := range d.seen {
					w := want[i]
					if got.via != w.via || got.attempt != w.attempt || got.key != w.key || (w.req != nil && got.req != w.req) {
						t.Errorf("attempt %d: via %s, AttemptFrom %d, key %q, caller's request %v; want via %s, AttemptFrom %d, key %q, caller's request %v",
							i+1, got.via, got.attempt, got.key, got.req == req, w.via, w.attempt, w.key, w.req != nil)
					}
				}
			})
		})
	}
}

// bodyEcho answers 503 to a first attempt and 200 after, and keeps the
// request body each attempt sent.
type bodyEcho struct{ bodies []string }

func (b *bodyEcho) RoundTrip(r *http.Request) (*http.Response, error) {
	var s []byte
	if r.Body != nil {
		s, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	b.bodies = append(b.bodies, string(s))
	status := http.StatusOK
	if len(b.bodies) == 1 {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestSendFirstReplaysBody: a request body consumed by a first attempt
// sent as the caller's request is replayed (GetBody) for the retry, as it
// is when the first attempt goes through the engine.
func TestSendFirstReplaysBody(t *testing.T) {
	for _, direct := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			echo := &bodyEcho{}
			var next http.RoundTripper = echo
			if direct {
				next = &directLog{next: echo}
			}
			req := newRequest(t, t.Context(), http.MethodPut, "http://h.test/", []byte("payload"))
			resp, err := firstsend.RoundTripKey(mustRetry(next, retry.Policy{MaxRetries: 2, Rand: noJitter}), req, "h.test")
			if err != nil {
				t.Fatalf("direct %v: RoundTripKey = %v", direct, err)
			}
			readClose(t, resp)
			if want := []string{"payload", "payload"}; !slices.Equal(echo.bodies, want) {
				t.Errorf("direct %v: bodies sent %q, want %q", direct, echo.bodies, want)
			}
		})
	}
}
