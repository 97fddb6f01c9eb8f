package retrier_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// noJitter draws the lowest wait, so waits are exactly Retry-After.
func noJitter(int64) int64 { return 0 }

// fullJitter draws the highest wait below the ceiling.
func fullJitter(n int64) int64 { return n - 1 }

type step = egresstest.Step

var errReset = errors.New("connection reset by peer")

func newRequest(t *testing.T, ctx context.Context, method, target string, body []byte) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body) // sets GetBody
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		t.Fatalf("NewRequest(%s %s) = %v", method, target, err)
	}
	return req
}

func readClose(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

// TestScenarios runs the seed scenarios against a Script, in fake time.
func TestScenarios(t *testing.T) {
	const host = "h.test"
	date := func(d time.Duration) string {
		// Inside a bubble the clock starts at a whole second.
		return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(d).Format(http.TimeFormat)
	}
	tests := []struct {
		name     string
		policy   retry.Policy
		method   string
		body     []byte
		header   http.Header
		steps    []step
		status   int           // final status, 0 when an error is expected
		wantErr  error         // matched with errors.Is
		body2    string        // final body
		requests int           // requests the script received
		elapsed  time.Duration // fake time RoundTrip took
	}{
		{
			name:   "transient 503 recovers on the second attempt",
			policy: retry.Policy{MaxRetries: 3, Rand: fullJitter},
			steps:  []step{{Status: 503, Body: "busy"}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2,
			elapsed: 500*time.Millisecond - 1,
		},
		{
			name:   "network error recovers on the second attempt",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{{Err: errReset}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2,
		},
		{
			name:   "429 Retry-After seconds is waited for",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"5"}}}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2, elapsed: 5 * time.Second,
		},
		{
			name:   "429 Retry-After HTTP-date is waited for",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {date(7 * time.Second)}}}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2, elapsed: 7 * time.Second,
		},
		{
			name:   "Retry-After is a floor under the jittered backoff",
			policy: retry.Policy{MaxRetries: 3, Rand: fullJitter, BaseDelay: 4 * time.Second},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"1"}}}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2, elapsed: 4*time.Second - 1,
		},
		{
			name:   "Retry-After beyond the cap returns the real 429 at once",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter, MaxDelay: 30 * time.Second},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"3600"}}, Body: "slow down"}, {Body: "ok"}},
			status: 429, body2: "slow down", requests: 1,
		},
		{
			name:   "Retry-After past the deadline returns the real 429 at once",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter, Deadline: 5 * time.Second},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"10"}}}, {Body: "ok"}},
			status: 429, requests: 1,
		},
		{
			name:   "challenge page is Refused and not retried",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{egresstest.ChallengeStep(), {Body: "ok"}},
			status: 403, body2: egresstest.ChallengeStep().Body, requests: 1,
		},
		{
			name:   "404 is Permanent and not retried",
			steps:  []step{{Status: 404}, {Body: "ok"}},
			status: 404, requests: 1,
		},
		{
			name:   "retries run out: the last real 503 is returned",
			policy: retry.Policy{MaxRetries: 2, Rand: noJitter},
			steps:  []step{{Status: 503, Body: "busy"}},
			status: 503, body2: "busy", requests: 3,
		},
		{
			name:   "negative MaxRetries sends once",
			policy: retry.Policy{MaxRetries: -1},
			steps:  []step{{Status: 503}, {Body: "ok"}},
			status: 503, requests: 1,
		},
		{
			name:    "the last real error is returned",
			policy:  retry.Policy{MaxRetries: 1, Rand: noJitter},
			steps:   []step{{Err: errReset}},
			wantErr: errReset, requests: 2,
		},
		{
			name:   "redirects are returned, not followed",
			steps:  []step{{Status: 302, Header: http.Header{"Location": {"/elsewhere"}}}},
			status: 302, requests: 1,
		},
		{
			name:   "POST is not retried by default",
			method: "POST", body: []byte("form"),
			steps:  []step{{Status: 503}, {Body: "ok"}},
			status: 503, requests: 1,
		},
		{
			name:   "POST is retried when the policy opts in",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter, RetryNonIdempotent: true},
			method: "POST", body: []byte("form"),
			steps:  []step{{Status: 503}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2,
		},
		{
			name:   "POST with an Idempotency-Key is retried",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			method: "POST", body: []byte("form"),
			header: http.Header{"Idempotency-Key": {"8e03978e"}},
			steps:  []step{{Status: 503}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2,
		},
		{
			name:   "garbage Retry-After -5 is ignored, not honoured",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"-5"}}}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2,
		},
		{
			name:   "Retry-After 999999999999 beyond MaxDelay returns the response",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"999999999999"}}}, {Body: "ok"}},
			status: 429, requests: 1,
		},
		{
			name:   "garbage Retry-After date is ignored, not honoured",
			policy: retry.Policy{MaxRetries: 3, Rand: noJitter},
			steps:  []step{{Status: 429, Header: http.Header{"Retry-After": {"Tue, 99 Foo"}}}, {Body: "ok"}},
			status: 200, body2: "ok", requests: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				script := egresstest.NewScript(tt.steps...)
				tr := mustRetry(script, tt.policy)
				method := tt.method
				if method == "" {
					method = "GET"
				}
				req := newRequest(t, t.Context(), method, "https://"+host+"/path", tt.body)
				for k, v := range tt.header {
					req.Header[k] = v
				}
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				elapsed := time.Since(start)
				switch {
				case tt.wantErr != nil:
					if !errors.Is(err, tt.wantErr) || resp != nil {
						t.Fatalf("RoundTrip = %v, %v; want error %v", resp, err, tt.wantErr)
					}
					var ue *url.Error
					if errors.As(err, &ue) {
						t.Errorf("RoundTrip error %v is wrapped in *url.Error", err)
					}
				case err != nil:
					t.Fatalf("RoundTrip = %v, want status %d", err, tt.status)
				default:
					if resp.StatusCode != tt.status {
						t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
					}
					if resp.Request == nil || resp.Request.URL != req.URL || resp.Request.Method != req.Method {
						t.Errorf("resp.Request is not a request for the caller's URL and method")
					}
					if got := readClose(t, resp); got != tt.body2 {
						t.Errorf("body = %q, want %q", got, tt.body2)
					}
				}
				sent := 0
				for _, c := range script.Calls() {
					if c.URL.Host == host {
						sent++
					}
				}
				if got := sent; got != tt.requests {
					t.Errorf("requests sent = %d, want %d", got, tt.requests)
				}
				if elapsed != tt.elapsed {
					t.Errorf("RoundTrip took %v of fake time, want %v", elapsed, tt.elapsed)
				}
				if got := script.OpenBodies(); got != 0 {
					t.Errorf("%d response bodies left open", got)
				}
				for i, c := range script.Calls() {
					if !bytes.Equal(c.Body, tt.body) {
						t.Errorf("attempt %d sent body %q, want %q", i+1, c.Body, tt.body)
					}
				}
			})
		})
	}
}

// TestRefusedAgentThroughClassifier runs a 403 naming the agent through a
// the classifying transport, which reads the body head: Refused, one attempt.
// With timeouts the body is wrapped, and classify.Of must still find the
// Result, which lives with the response, not its body.
func TestRefusedAgentThroughClassifier(t *testing.T) {
	for _, p := range []retry.Policy{
		{MaxRetries: 3, Rand: noJitter},
		{MaxRetries: 3, Rand: noJitter, AttemptTimeout: time.Minute, Deadline: time.Hour},
	} {
		synctest.Test(t, func(t *testing.T) { refusedAgent(t, p) })
	}
}

func refusedAgent(t *testing.T, p retry.Policy) {
	page := "<html>Requests from examplebot are not permitted on this site.</html>"
	script := egresstest.NewScript(step{Status: 403, Body: page}, step{Body: "ok"})
	cl := classifyHooks.NewTransport(script, classify.Config{AgentToken: "ExampleBot"})
	resp, err := mustRetry(cl, p).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
	if err != nil {
		t.Fatalf("RoundTrip = %v", err)
	}
	if got := classify.Of(resp, nil); got.Outcome != classify.Refused {
		t.Errorf("classify.Of(resp) = %v, want refused", got.Outcome)
	}
	if got := readClose(t, resp); resp.StatusCode != 403 || got != page {
		t.Errorf("response = %d %q, want 403 and the page intact", resp.StatusCode, got)
	}
	if got := script.Requests(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}

// TestSlowHost: a host answering 200 after 15s is cut by the per-attempt
// timeout (and retried), and by the overall deadline.
func TestSlowHost(t *testing.T) {
	tests := []struct {
		name     string
		policy   retry.Policy
		wantErr  error
		requests int
		elapsed  time.Duration
	}{
		{
			name:     "attempt timeout, retried until retries run out",
			policy:   retry.Policy{MaxRetries: 3, Rand: noJitter, AttemptTimeout: 2 * time.Second},
			wantErr:  classify.ErrAttemptTimeout,
			requests: 4, elapsed: 8 * time.Second,
		},
		{
			name:     "attempt timeout and overall deadline",
			policy:   retry.Policy{MaxRetries: 3, Rand: noJitter, AttemptTimeout: 2 * time.Second, Deadline: 5 * time.Second},
			wantErr:  context.DeadlineExceeded,
			requests: 3, elapsed: 5 * time.Second,
		},
		{
			name:     "overall deadline alone",
			policy:   retry.Policy{MaxRetries: 3, Rand: noJitter, Deadline: 5 * time.Second},
			wantErr:  context.DeadlineExceeded,
			requests: 1, elapsed: 5 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				script := egresstest.NewScript(step{Delay: 15 * time.Second, Body: "late"})
				tr := mustRetry(classifyHooks.NewTransport(script, classify.Config{}), tt.policy)
				start := time.Now()
				resp, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://slow.test/", nil))
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("RoundTrip = %v, %v; want error %v", resp, err, tt.wantErr)
				}
				if got := time.Since(start); got != tt.elapsed {
					t.Errorf("cut after %v, want %v", got, tt.elapsed)
				}
				if got := script.Requests(); got != tt.requests {
					t.Errorf("requests = %d, want %d", got, tt.requests)
				}
			})
		})
	}
}

// slowBody is a transport whose 200 arrives at once but whose body never
// ends: reading it waits until the request context ends.
type slowBody struct{}

func (slowBody) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Header: http.Header{}, ContentLength: -1, Request: req,
		Body: io.NopCloser(ctxReader{req.Context()}),
	}, nil
}

type ctxReader struct{ ctx context.Context }

func (r ctxReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, context.Cause(r.ctx)
}

func TestAttemptTimeoutCoversTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := mustRetry(slowBody{}, retry.Policy{MaxRetries: 3, AttemptTimeout: 3 * time.Second})
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://slow.test/", nil))
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		defer resp.Body.Close()
		start := time.Now()
		_, err = io.ReadAll(resp.Body)
		if !errors.Is(err, classify.ErrAttemptTimeout) {
			t.Errorf("reading the body: %v, want %v", err, classify.ErrAttemptTimeout)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("body read cut after %v, want 3s", got)
		}
	})
}

// onceBody is a request body with no GetBody that counts its Close calls.
type onceBody struct {
	io.Reader
	closes int
}

func (b *onceBody) Close() error { b.closes++; return nil }

func TestNonReplayableBodyIsSentOnce(t *testing.T) {
	for _, first := range []step{{Status: 503, Body: "busy"}, {Err: errReset}} {
		synctest.Test(t, func(t *testing.T) {
			script := egresstest.NewScript(first, step{Body: "ok"})
			req := newRequest(t, t.Context(), "PUT", "http://h.test/doc", nil)
			body := &onceBody{Reader: strings.NewReader("v1")}
			req.Body, req.ContentLength = body, 2
			resp, err := mustRetry(script, retry.Policy{MaxRetries: 3, Rand: noJitter}).RoundTrip(req)
			if first.Err != nil {
				if !errors.Is(err, errReset) {
					t.Errorf("RoundTrip = %v, %v; want the first error %v", resp, err, errReset)
				}
			} else if err != nil || resp.StatusCode != 503 || readClose(t, resp) != "busy" {
				t.Errorf("RoundTrip = %v, %v; want the first 503", resp, err)
			}
			if got := script.Requests(); got != 1 {
				t.Errorf("requests = %d, want 1", got)
			}
			if body.closes == 0 {
				t.Error("request body never closed")
			}
		})
	}
}

func TestGetBodyFailureStopsRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 503, Body: "busy"}, step{Body: "ok"})
		req := newRequest(t, t.Context(), "PUT", "http://h.test/doc", []byte("v1"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("cannot rewind") }
		resp, err := mustRetry(script, retry.Policy{MaxRetries: 3, Rand: noJitter}).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || readClose(t, resp) != "busy" {
			t.Fatalf("RoundTrip = %v, %v; want the first 503 with its body", resp, err)
		}
		if got := script.Requests(); got != 1 {
			t.Errorf("requests = %d, want 1", got)
		}
	})
}

func TestAttemptNumberIsVisibleBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []int
		script := egresstest.NewScript(step{Status: 502}, step{Status: 504}, step{Body: "ok"})
		spy := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen = append(seen, retrier.AttemptFrom(r.Context()))
			return script.RoundTrip(r)
		})
		resp, err := mustRetry(spy, retry.Policy{MaxRetries: 3, Rand: noJitter}).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		resp.Body.Close()
		if want := []int{1, 2, 3}; !equal(seen, want) {
			t.Errorf("AttemptFrom per attempt = %v, want %v", seen, want)
		}
		if got := retrier.AttemptFrom(t.Context()); got != 0 {
			t.Errorf("AttemptFrom(unrelated ctx) = %d, want 0", got)
		}
	})
}

func equal(a, b []int) bool {
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCallerCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 429, Header: http.Header{"Retry-After": {"20"}}, Body: "wait"})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()
		_, err := mustRetry(script, retry.Policy{MaxRetries: 3}).RoundTrip(newRequest(t, ctx, "GET", "http://h.test/", nil))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("returned after %v, want 3s", got)
		}
		if script.OpenBodies() != 0 || script.Requests() != 1 {
			t.Errorf("open bodies, requests = %d, %d; want 0, 1", script.OpenBodies(), script.Requests())
		}
	})
}

// idleCounter counts CloseIdleConnections calls.
type idleCounter struct {
	http.RoundTripper
	n int
}

func (c *idleCounter) CloseIdleConnections() { c.n++ }

func TestFailuresDoNotCloseIdleConnectionsBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &idleCounter{RoundTripper: egresstest.NewScript(step{Err: errReset})}
		tr := mustRetry(base, retry.Policy{MaxRetries: 3, Rand: noJitter})
		if _, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil)); !errors.Is(err, errReset) {
			t.Fatalf("RoundTrip = %v, want %v", err, errReset)
		}
		if base.n != 0 {
			t.Errorf("a failed request closed the base's idle connections %d times, want 0", base.n)
		}
		tr.CloseIdleConnections()
		if base.n != 1 {
			t.Errorf("Transport.CloseIdleConnections reached the base %d times, want 1", base.n)
		}
	})
}

func TestBadInput(t *testing.T) {
	script := egresstest.NewScript()
	tr := mustRetry(script, retry.Policy{MaxRetries: 3})
	withBody := func(u *url.URL) (*http.Request, *onceBody) {
		b := &onceBody{Reader: strings.NewReader("x")}
		return &http.Request{Method: "GET", URL: u, Header: http.Header{}, Body: b}, b
	}
	mustParse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := []struct {
		name string
		url  *url.URL
		want error
	}{
		{"nil URL", nil, retrier.ErrNoHost},
		{"no host", mustParse("/relative/path"), retrier.ErrNoHost},
		{"ftp scheme", mustParse("ftp://h.test/file"), retrier.ErrUnsupportedScheme},
		{"no scheme", &url.URL{Host: "h.test", Path: "/"}, retrier.ErrUnsupportedScheme},
	}
	for _, tt := range tests {
		req, body := withBody(tt.url)
		resp, err := tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, tt.want) {
			t.Errorf("%s: RoundTrip = %v, %v; want %v", tt.name, resp, err, tt.want)
		}
		if got := classify.Of(nil, err); got.Outcome != classify.Permanent {
			t.Errorf("%s: classify.Of(err) = %v, want permanent", tt.name, got.Outcome)
		}
		if body.closes != 1 {
			t.Errorf("%s: request body closed %d times, want 1", tt.name, body.closes)
		}
	}
	if resp, err := tr.RoundTrip(nil); resp != nil || !errors.Is(err, retrier.ErrNilRequest) {
		t.Errorf("RoundTrip(nil) = %v, %v; want %v", resp, err, retrier.ErrNilRequest)
	}
	if got := script.Requests(); got != 0 {
		t.Errorf("requests sent = %d, want 0", got)
	}
	u := mustParse("https://user:hunter2@h.test/")
	u.Scheme = "gopher"
	req, _ := withBody(u)
	if _, err := tr.RoundTrip(req); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q reveals the URL password", err)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 503})
		var last time.Time
		var waits []time.Duration
		spy := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !last.IsZero() {
				waits = append(waits, time.Since(last))
			}
			last = time.Now()
			return script.RoundTrip(r)
		})
		p := retry.Policy{MaxRetries: 6, BaseDelay: time.Second, MaxDelay: 10 * time.Second, Rand: fullJitter, Budget: -1}
		resp, err := mustRetry(spy, p).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		resp.Body.Close()
		want := []time.Duration{1, 2, 4, 8, 10, 10}
		for i := range want {
			want[i] = want[i]*time.Second - 1
		}
		if len(waits) != len(want) {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
		for i := range want {
			if waits[i] != want[i] {
				t.Errorf("wait before retry %d = %v, want %v", i+1, waits[i], want[i])
			}
		}
	})
}

func TestMisbehavingRandIsClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, r := range []func(int64) int64{
			func(int64) int64 { return -7 },
			func(n int64) int64 { return n * 100 },
		} {
			script := egresstest.NewScript(step{Status: 503}, step{})
			start := time.Now()
			resp, err := mustRetry(script, retry.Policy{MaxRetries: 3, Rand: r}).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
			if err != nil {
				t.Fatalf("RoundTrip = %v", err)
			}
			resp.Body.Close()
			if got := time.Since(start); got < 0 || got > 500*time.Millisecond {
				t.Errorf("wait = %v, want within [0, 500ms]", got)
			}
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript(step{Status: 503}, step{Status: 500}, step{Body: "ok"})
		tr := mustRetry(script, retry.Policy{MaxRetries: 3})
		const n = 32
		done := make(chan int, n)
		for range n {
			go func() {
				resp, err := tr.RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
				if err != nil {
					t.Errorf("RoundTrip = %v", err)
					done <- 0
					return
				}
				resp.Body.Close()
				done <- resp.StatusCode
			}()
		}
		for range n {
			if got := <-done; got != 200 {
				t.Errorf("status = %d, want 200", got)
			}
		}
		if got := script.Requests(); got != n+2 {
			t.Errorf("requests = %d, want %d", got, n+2)
		}
	})
}

func TestZeroTransport(t *testing.T) {
	var zero retrier.Transport
	if _, err := zero.RoundTrip(nil); !errors.Is(err, retrier.ErrNilRequest) {
		t.Errorf("zero Transport: RoundTrip(nil) = %v, want %v", err, retrier.ErrNilRequest)
	}
	var nilT *retrier.Transport
	if _, err := nilT.RoundTrip(&http.Request{URL: &url.URL{Scheme: "ftp", Host: "h.test"}}); !errors.Is(err, retrier.ErrUnsupportedScheme) {
		t.Errorf("nil Transport: RoundTrip(ftp) = %v, want %v", err, retrier.ErrUnsupportedScheme)
	}
	nilT.CloseIdleConnections()
	zero.CloseIdleConnections()
}

// TestRequestReachesBaseUnchanged: the engine's http.Client adds nothing
// (no Authorization from URL userinfo) and the base sees the caller's URL,
// header and body.
func TestRequestReachesBaseUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := egresstest.NewScript()
		req := newRequest(t, t.Context(), "GET", "http://user:pw@h.test/p?q=1", nil)
		req.Header.Set("X-Custom", "1")
		resp, err := mustRetry(script, retry.Policy{MaxRetries: 3}).RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		resp.Body.Close()
		c := script.Calls()[0]
		if got := c.Header.Get("Authorization"); got != "" {
			t.Errorf("base saw Authorization %q, want none", got)
		}
		if c.URL.String() != req.URL.String() || c.Header.Get("X-Custom") != "1" {
			t.Errorf("base saw %v %v, want %v with X-Custom", c.URL, c.Header, req.URL)
		}
		if req.URL.User == nil {
			t.Error("the caller's URL was modified")
		}
	})
}

// TestZeroMeansDefault: the zero Policy is the recommended one (3
// retries), as DefaultPolicy prints it; a negative MaxRetries says none.
func TestZeroMeansDefault(t *testing.T) {
	for _, tt := range []struct {
		name     string
		policy   retry.Policy
		requests int
	}{
		{"zero policy", retry.Policy{}, 4},
		{"MaxRetries 0", retry.Policy{MaxRetries: 0, BaseDelay: time.Second}, 4},
		{"negative", retry.Policy{MaxRetries: -1}, 1},
		{"one", retry.Policy{MaxRetries: 1}, 2},
		{"DefaultPolicy", retrier.DefaultPolicy(), 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				script := egresstest.NewScript(step{Status: 503}, step{Status: 503}, step{Status: 503}, step{Status: 503})
				resp, err := mustRetry(script, tt.policy).RoundTrip(newRequest(t, t.Context(), "GET", "http://h.test/", nil))
				if err != nil {
					t.Fatal(err)
				}
				readClose(t, resp)
				if got := script.Requests(); got != tt.requests {
					t.Errorf("requests = %d, want %d", got, tt.requests)
				}
			})
		})
	}
}

// TestNewRefusesInvalidPolicy: a Policy that cannot be honoured is refused
// at New, naming the field, and never first seen at RoundTrip.
func TestNewRefusesInvalidPolicy(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy retry.Policy
		field  string
	}{
		{"negative MaxDelay", retry.Policy{MaxDelay: -1}, "MaxDelay"},
		{"BaseDelay above MaxDelay", retry.Policy{BaseDelay: 2 * time.Second, MaxDelay: time.Second}, "BaseDelay"},
		{"BaseDelay above the default MaxDelay", retry.Policy{BaseDelay: time.Minute}, "BaseDelay"},
		{"Budget NaN", retry.Policy{Budget: math.NaN()}, "Budget"},
		{"Budget infinite", retry.Policy{Budget: math.Inf(1)}, "Budget"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := retrier.New(nil, tt.policy)
			if !errors.Is(err, egresskit.ErrInvalidConfig) || tr != nil {
				t.Fatalf("New(%+v) = %v, %v; want nil, ErrInvalidConfig", tt.policy, tr, err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("New(%+v) error %q does not name %s", tt.policy, err, tt.field)
			}
		})
	}
}
