package egresstest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/egresstest"
)

func get(t *testing.T, rt http.RoundTripper, method, url string, body io.Reader) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatalf("NewRequest(%q, %q) = %v", method, url, err)
	}
	return rt.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("ReadAll(body) = %v", err)
	}
	return string(b)
}

func TestScriptReplaysStepsThenRepeatsLast(t *testing.T) {
	s := egresstest.NewScript(
		egresstest.Step{Status: 503, Body: "busy"},
		egresstest.Step{Status: 429, Header: http.Header{"Retry-After": {"5"}}},
		egresstest.Step{Body: "ok"},
	)
	tests := []struct {
		url        string
		status     int
		body       string
		retryAfter string
	}{
		{"http://a.test/1", 503, "busy", ""},
		{"http://a.test/2", 429, "", "5"},
		{"http://b.test/3", 200, "ok", ""},
		{"http://b.test/4", 200, "ok", ""},
		{"http://b.test:8080/5", 200, "ok", ""},
	}
	for i, tt := range tests {
		resp, err := get(t, s, "GET", tt.url, nil)
		if err != nil {
			t.Fatalf("request %d: RoundTrip(%s) = %v", i, tt.url, err)
		}
		if resp.StatusCode != tt.status {
			t.Errorf("request %d: status = %d, want %d", i, resp.StatusCode, tt.status)
		}
		if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
			t.Errorf("request %d: Retry-After = %q, want %q", i, got, tt.retryAfter)
		}
		if got := readAll(t, resp); got != tt.body {
			t.Errorf("request %d: body = %q, want %q", i, got, tt.body)
		}
		if resp.ContentLength != int64(len(tt.body)) {
			t.Errorf("request %d: ContentLength = %d, want %d", i, resp.ContentLength, len(tt.body))
		}
	}
	if got := s.Requests(); got != len(tests) {
		t.Errorf("Requests() = %d, want %d", got, len(tests))
	}
	for host, want := range map[string]int{"a.test": 2, "b.test": 2, "b.test:8080": 1, "c.test": 0} {
		if got := hostRequests(s.Calls(), host); got != want {
			t.Errorf("requests to %q = %d, want %d", host, got, want)
		}
	}
	if got := s.OpenBodies(); got != 0 {
		t.Errorf("OpenBodies() = %d, want 0", got)
	}
}

func TestScriptErrors(t *testing.T) {
	errReset := errors.New("connection reset by peer")
	errLost := errors.New("lost mid-body")
	s := egresstest.NewScript(
		egresstest.Step{Err: errReset},
		egresstest.Step{Body: "partial", BodyErr: errLost},
	)
	if _, err := get(t, s, "GET", "http://a.test/", nil); !errors.Is(err, errReset) {
		t.Errorf("RoundTrip #1 error = %v, want %v", err, errReset)
	}
	resp, err := get(t, s, "GET", "http://a.test/", nil)
	if err != nil {
		t.Fatalf("RoundTrip #2 = %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if string(b) != "partial" || !errors.Is(err, errLost) {
		t.Errorf("ReadAll(body) = %q, %v; want %q, %v", b, err, "partial", errLost)
	}
	if got := s.OpenBodies(); got != 1 {
		t.Errorf("OpenBodies() before Close = %d, want 1", got)
	}
	resp.Body.Close()
	resp.Body.Close()
	if got := s.OpenBodies(); got != 0 {
		t.Errorf("OpenBodies() after Close = %d, want 0", got)
	}
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, egresstest.ErrBodyClosed) {
		t.Errorf("Read after Close = %v, want %v", err, egresstest.ErrBodyClosed)
	}
}

func TestScriptInvalidRequests(t *testing.T) {
	s := egresstest.NewScript()
	if _, err := s.RoundTrip(nil); !errors.Is(err, egresstest.ErrInvalidRequest) {
		t.Errorf("RoundTrip(nil) = %v, want %v", err, egresstest.ErrInvalidRequest)
	}
	body := &closeCounter{Reader: strings.NewReader("x")}
	if _, err := s.RoundTrip(&http.Request{Method: "GET", Body: body}); !errors.Is(err, egresstest.ErrInvalidRequest) {
		t.Errorf("RoundTrip(nil URL) = %v, want %v", err, egresstest.ErrInvalidRequest)
	}
	if body.closes != 1 {
		t.Errorf("request body closed %d times, want 1", body.closes)
	}
	if got := s.Requests(); got != 0 {
		t.Errorf("Requests() = %d, want 0", got)
	}
}

type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

func TestScriptRecordsCalls(t *testing.T) {
	s := egresstest.NewScript()
	req, _ := http.NewRequest("POST", "http://user:pw@a.test/p?q=1", strings.NewReader("payload"))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := s.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip = %v", err)
	}
	resp.Body.Close()
	req.Header.Set("Idempotency-Key", "changed")
	calls := s.Calls()
	if len(calls) != 1 {
		t.Fatalf("len(Calls()) = %d, want 1", len(calls))
	}
	c := calls[0]
	if c.Method != "POST" || c.URL.Path != "/p" || c.URL.RawQuery != "q=1" || string(c.Body) != "payload" {
		t.Errorf("Calls()[0] = %s %s body %q, want POST /p?q=1 body %q", c.Method, c.URL, c.Body, "payload")
	}
	if got := c.Header.Get("Idempotency-Key"); got != "k1" {
		t.Errorf("recorded Idempotency-Key = %q, want %q (a copy)", got, "k1")
	}
	if resp, _ := get(t, s, "HEAD", "http://a.test/", nil); resp.Body != http.NoBody {
		t.Errorf("HEAD response body = %T, want http.NoBody", resp.Body)
	}
	if resp, _ := get(t, s, "", "http://a.test/", nil); readAll(t, resp) != "" || s.Calls()[2].Method != "GET" {
		t.Errorf("empty method recorded as %q, want GET", s.Calls()[2].Method)
	}
}

func TestScriptDelayUsesFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := egresstest.NewScript(egresstest.Step{Delay: 15 * time.Second, Body: "late"})

		start := time.Now()
		resp, err := get(t, s, "GET", "http://slow.test/", nil)
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		readAll(t, resp)
		if got := time.Since(start); got != 15*time.Second {
			t.Errorf("slow step took %v, want 15s", got)
		}

		cause := errors.New("attempt budget spent")
		ctx, cancel := context.WithTimeoutCause(t.Context(), 2*time.Second, cause)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://slow.test/", nil)
		start = time.Now()
		if _, err := s.RoundTrip(req); !errors.Is(err, cause) {
			t.Errorf("RoundTrip with 2s deadline = %v, want %v", err, cause)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("cut after %v, want 2s", got)
		}
	})
}

func TestScriptConcurrentUse(t *testing.T) {
	s := egresstest.NewScript(egresstest.Step{Status: 500}, egresstest.Step{Status: 200})
	client := &http.Client{Transport: s}
	const n = 64
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			resp, err := client.Get("http://a.test/")
			if err != nil {
				t.Errorf("Get = %v", err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[500] != 1 || count[200] != n-1 {
		t.Errorf("status counts = %v, want one 500 and %d 200", count, n-1)
	}
	if got := s.Requests(); got != n {
		t.Errorf("Requests() = %d, want %d", got, n)
	}
}

func TestScriptStepHeadersAreCopies(t *testing.T) {
	h := http.Header{"X-A": {"1"}}
	s := egresstest.NewScript(egresstest.Step{Header: h})
	h.Set("X-A", "mutated")
	r1, _ := get(t, s, "GET", "http://a.test/", nil)
	r1.Body.Close()
	r1.Header.Set("X-A", "mutated by caller")
	r2, _ := get(t, s, "GET", "http://a.test/", nil)
	r2.Body.Close()
	if got := r2.Header.Get("X-A"); got != "1" {
		t.Errorf("second response X-A = %q, want %q", got, "1")
	}
}

func TestScriptEndedContextSendsNothing(t *testing.T) {
	s := egresstest.NewScript(egresstest.Step{Status: 503}, egresstest.Step{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://a.test/", body)
	if _, err := s.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip(canceled) = %v, want context.Canceled", err)
	}
	if s.Requests() != 0 || body.closes != 1 {
		t.Errorf("Requests, body closes = %d, %d; want 0, 1", s.Requests(), body.closes)
	}
	resp, _ := get(t, s, "GET", "http://a.test/", nil)
	if readAll(t, resp); resp.StatusCode != 503 {
		t.Errorf("first recorded request got %d, want the first step's 503", resp.StatusCode)
	}
}

// hostRequests counts the calls whose URL host (host or host:port, exactly
// as in the URL) is host.
func hostRequests(calls []egresstest.Call, host string) int {
	n := 0
	for _, c := range calls {
		if c.URL.Host == host {
			n++
		}
	}
	return n
}
