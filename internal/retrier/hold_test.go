package retrier_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// TestHoldAttemptTimer: while a layer below holds the attempt's timer (as
// the chain does while it waits for a pacing token), AttemptTimeout does
// not run; on resume it counts on with the time that was left, in fake
// time to the nanosecond. Holding twice, holding after the attempt, and
// holding outside any attempt do nothing.
func TestHoldAttemptTimer(t *testing.T) {
	const timeout = time.Second
	tests := []struct {
		name        string
		before      time.Duration // running before the hold
		held        time.Duration // held
		after       time.Duration // running after the resume
		holdTwice   bool
		wantTimeout bool
	}{
		{"hold longer than the timeout", 300 * time.Millisecond, 10 * time.Second, 600 * time.Millisecond, false, false},
		{"what is left runs out after the resume", 300 * time.Millisecond, 10 * time.Second, 800 * time.Millisecond, false, true},
		{"a second hold is a no-op", 300 * time.Millisecond, 5 * time.Second, 600 * time.Millisecond, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					ctx := r.Context()
					sleep := func(d time.Duration) error {
						select {
						case <-time.After(d):
							return nil
						case <-ctx.Done():
							return context.Cause(ctx)
						}
					}
					if err := sleep(tt.before); err != nil {
						return nil, err
					}
					resume := firstsend.HoldAttemptTimer(ctx)
					if tt.holdTwice {
						firstsend.HoldAttemptTimer(ctx)() // held already: its resume does nothing
					}
					if err := sleep(tt.held); err != nil {
						return nil, err
					}
					resume()
					resume() // a second resume does nothing
					if err := sleep(tt.after); err != nil {
						return nil, err
					}
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
				})
				tr := mustRetry(next, retry.Policy{MaxRetries: -1, AttemptTimeout: timeout})
				req := newRequest(t, t.Context(), "GET", "http://h.test/", nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				took := time.Since(start)
				if tt.wantTimeout {
					if !errors.Is(err, classify.ErrAttemptTimeout) {
						t.Fatalf("RoundTrip = %v, %v; want ErrAttemptTimeout", resp, err)
					}
					if want := tt.before + tt.held + (timeout - tt.before); took != want {
						t.Errorf("timed out after %v, want %v (the hold does not count)", took, want)
					}
					return
				}
				if err != nil {
					t.Fatalf("RoundTrip = %v; want 200 (the hold does not count against AttemptTimeout)", err)
				}
				resp.Body.Close()
			})
		})
	}
	t.Run("attempt ends while held", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				firstsend.HoldAttemptTimer(r.Context()) // never resumed
				time.Sleep(5 * time.Second)
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			tr := mustRetry(next, retry.Policy{MaxRetries: -1, AttemptTimeout: timeout})
			resp, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
			if err != nil {
				t.Fatalf("RoundTrip = %v; want 200", err)
			}
			resp.Body.Close()
		})
	})
	t.Run("outside an attempt", func(t *testing.T) {
		firstsend.HoldAttemptTimer(context.Background())()
	})
	t.Run("after the timer fired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				<-r.Context().Done() // AttemptTimeout fires
				resume := firstsend.HoldAttemptTimer(r.Context())
				resume()
				return nil, context.Cause(r.Context())
			})
			tr := mustRetry(next, retry.Policy{MaxRetries: -1, AttemptTimeout: timeout})
			start := time.Now()
			_, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
			if !errors.Is(err, classify.ErrAttemptTimeout) || time.Since(start) != timeout {
				t.Errorf("RoundTrip = %v after %v; want ErrAttemptTimeout after %v", err, time.Since(start), timeout)
			}
		})
	})
}

// TestGetBodyWithoutBodyStopsRetrying: a GetBody that returns no body and
// no error cannot replay the request either; the first answer stands.
func TestGetBodyWithoutBodyStopsRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 503, Body: "busy"}, step{Body: "ok"})
		req := newRequest(t, t.Context(), "PUT", "http://h.test/doc", []byte("v1"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, nil }
		resp, err := mustRetry(script, retry.Policy{MaxRetries: 3, Rand: noJitter}).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || readClose(t, resp) != "busy" {
			t.Fatalf("RoundTrip = %v, %v; want the first 503 with its body", resp, err)
		}
		if got := script.Requests(); got != 1 {
			t.Errorf("requests = %d, want 1", got)
		}
	})
}

// closeBody records whether it was closed.
type closeBody struct {
	io.Reader
	closed bool
}

func (b *closeBody) Close() error { b.closed = true; return nil }

// TestReplayBodyClosedWhenRetryCancelled: the body obtained from GetBody
// for a retry that never happens (the context ends during the wait) is
// closed.
func TestReplayBodyClosedWhenRetryCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 503, Header: http.Header{"Retry-After": {"5"}}}, step{Body: "ok"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(time.Second, cancel)
		req := newRequest(t, ctx, "PUT", "http://h.test/doc", []byte("v1"))
		var replays []*closeBody
		req.GetBody = func() (io.ReadCloser, error) {
			b := &closeBody{Reader: strings.NewReader("v1")}
			replays = append(replays, b)
			return b, nil
		}
		resp, err := mustRetry(script, retry.Policy{MaxRetries: 3, Rand: noJitter}).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if got := script.Requests(); got != 1 {
			t.Errorf("requests = %d, want 1 (cancelled during the wait)", got)
		}
		for i, b := range replays {
			if !b.closed {
				t.Errorf("replay body %d from GetBody never closed", i)
			}
		}
		if len(replays) == 0 {
			t.Error("GetBody never called for the retry")
		}
	})
}

// TestResponseWithErrorIsClosed: a RoundTripper that returns a response
// together with an error breaks the contract; on the first attempt and on
// a retry, the response's body is closed and only the error is returned.
func TestResponseWithErrorIsClosed(t *testing.T) {
	for _, failOn := range []int{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			body := &closeBody{Reader: strings.NewReader("x")}
			n := 0
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				n++
				if n < failOn {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: 200, Body: body, Request: r}, errReset
			})
			resp, err := mustRetry(next, retry.Policy{MaxRetries: 1, Rand: noJitter}).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
			if !errors.Is(err, errReset) || resp != nil {
				t.Errorf("attempt %d: RoundTrip = %v, %v; want only %v", failOn, resp, err, errReset)
			}
			if !body.closed {
				t.Errorf("attempt %d: the body that came with the error was not closed", failOn)
			}
		})
	}
}

// TestUnsupportedSchemeQuoted: the scheme is quoted in the error up to 32
// bytes, and cut after.
func TestUnsupportedSchemeQuoted(t *testing.T) {
	for _, tt := range []struct{ scheme, want string }{
		{strings.Repeat("s", 32), `"` + strings.Repeat("s", 32) + `"`},
		{strings.Repeat("s", 33), `"` + strings.Repeat("s", 32) + `..."`},
	} {
		req := &http.Request{Method: "GET", URL: &url.URL{Scheme: tt.scheme, Host: "h.test"}, Header: http.Header{}}
		_, err := mustRetry(http.DefaultTransport, retry.Policy{}).RoundTrip(req)
		if !errors.Is(err, retrier.ErrUnsupportedScheme) || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("scheme of %d bytes: error %v, want it to end with %s", len(tt.scheme), err, tt.want)
		}
	}
}

// TestNoBackoff: a negative BaseDelay means no backoff at all, whatever
// the jitter would draw; only Retry-After is waited for.
func TestNoBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 503}, step{Status: 502}, step{Body: "ok"})
		maxJitter := func(n int64) int64 { return n - 1 }
		tr := mustRetry(script, retry.Policy{MaxRetries: 3, BaseDelay: -1, Rand: maxJitter})
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
		if err != nil || readClose(t, resp) != "ok" {
			t.Fatalf("RoundTrip = %v, %v; want ok", resp, err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("three attempts took %v, want no wait", took)
		}
	})
}

// TestUserinfoNotTurnedIntoAuthorization: a URL with userinfo reaches the
// layers below as the caller wrote it, on the first attempt and on a
// retry, and no Authorization header is made from it.
func TestUserinfoNotTurnedIntoAuthorization(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		n := 0
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n++
			seen = append(seen, r.URL.String()+" auth="+r.Header.Get("Authorization"))
			status := 200
			if n == 1 {
				status = 503
			}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		req := newRequest(t, t.Context(), "GET", "http://u:p@h.test/x", nil)
		resp, err := mustRetry(next, retry.Policy{MaxRetries: 1, Rand: noJitter}).RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200 after a retry", resp, err)
		}
		resp.Body.Close()
		want := "http://u:p@h.test/x auth="
		if len(seen) != 2 || seen[0] != want || seen[1] != want {
			t.Errorf("attempts saw %q, want %q twice", seen, want)
		}
	})
}
