package egresstest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egresstest"
)

// newClient returns an HTTP client with its own transport, whose idle
// connections are closed when the test ends.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// stuck starts a request to url in a goroutine, waits until srv has
// accepted the connection, cancels the request and returns its error.
func stuck(t *testing.T, srv *egresstest.Server, url string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := newClient(t).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := srv.AwaitAccepted(t.Context(), 1); err != nil {
		t.Fatalf("AwaitAccepted = %v", err)
	}
	cancel()
	return <-errc
}

func TestHangServerNeverAnswers(t *testing.T) {
	srv := egresstest.NewHangServer()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want http://127.0.0.1:port", srv.URL)
	}
	if err := stuck(t, srv, srv.URL+"/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("request to hang server: err = %v, want context.Canceled", err)
	}
	if got := srv.Accepted(); got != 1 {
		t.Errorf("Accepted() = %d, want 1", got)
	}
	if got := srv.Requests(); got > 1 {
		t.Errorf("Requests() = %d, want at most 1", got)
	}
}

func TestHangServerCloseReleasesClients(t *testing.T) {
	srv := egresstest.NewHangServer()
	errc := make(chan error, 1)
	go func() {
		resp, err := newClient(t).Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := srv.AwaitAccepted(t.Context(), 1); err != nil {
		t.Fatalf("AwaitAccepted = %v", err)
	}
	srv.Close()
	srv.Close() // idempotent
	if err := <-errc; err == nil {
		t.Error("request to a closed hang server succeeded, want an error")
	}
}

func TestTLSStallServerNeverCompletesHandshake(t *testing.T) {
	srv := egresstest.NewTLSStallServer()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Errorf("URL = %q, want https://127.0.0.1:port", srv.URL)
	}
	if err := stuck(t, srv, srv.URL); !errors.Is(err, context.Canceled) {
		t.Errorf("request to TLS stall server: err = %v, want context.Canceled", err)
	}
	if got, want := srv.Requests(), 0; got != want {
		t.Errorf("Requests() = %d, want %d", got, want)
	}
}

func TestTrickleServer(t *testing.T) {
	srv := egresstest.NewTrickleServer(10, 3, time.Millisecond)
	defer srv.Close()
	resp, err := newClient(t).Get(srv.URL)
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if got := readAll(t, resp); got != strings.Repeat("x", 10) {
		t.Errorf("body = %q, want 10 bytes", got)
	}
	if resp.ContentLength != 10 {
		t.Errorf("ContentLength = %d, want 10", resp.ContentLength)
	}
	if srv.Requests() != 1 || srv.Accepted() != 1 {
		t.Errorf("Requests, Accepted = %d, %d; want 1, 1", srv.Requests(), srv.Accepted())
	}
}

func TestTrickleServerIsCutByContext(t *testing.T) {
	srv := egresstest.NewTrickleServer(100, 4, time.Hour)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	defer resp.Body.Close()
	first := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("reading the first chunk: %v", err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("reading after cancel: err = %v, want context.Canceled", err)
	}
}

func TestTrickleServerCloseWhileSending(t *testing.T) {
	srv := egresstest.NewTrickleServer(100, 4, time.Hour)
	resp, err := newClient(t).Get(srv.URL)
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	defer resp.Body.Close()
	srv.Close() // must not wait an hour for the handler
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("reading from a closed trickle server: err = nil, want an error")
	}
}

func TestResetServerResetsMidBody(t *testing.T) {
	srv := egresstest.NewResetServer(100)
	defer srv.Close()
	client := newClient(t)
	for i := range 20 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("request %d: Get = %v, want headers before the reset", i, err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("request %d: status = %d, want 200", i, resp.StatusCode)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(b) > 100 {
			t.Errorf("request %d: read %d bytes, err %v; want at most 100 bytes and an error", i, len(b), err)
		}
	}
	if got := srv.Requests(); got != 20 {
		t.Errorf("Requests() = %d, want 20", got)
	}
}

func TestThrottleServers(t *testing.T) {
	client := newClient(t)

	secs := egresstest.NewThrottleServer(1500 * time.Millisecond)
	defer secs.Close()
	resp, err := client.Get(secs.URL)
	if err != nil {
		t.Fatalf("Get(throttle) = %v", err)
	}
	readAll(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("throttle server: %d Retry-After=%q, want 429 Retry-After=%q",
			resp.StatusCode, resp.Header.Get("Retry-After"), "2")
	}

	date := egresstest.NewThrottleDateServer(time.Minute)
	defer date.Close()
	before := time.Now()
	resp, err = client.Get(date.URL)
	if err != nil {
		t.Fatalf("Get(throttle date) = %v", err)
	}
	after := time.Now()
	readAll(t, resp)
	at, err := http.ParseTime(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || err != nil {
		t.Fatalf("throttle date server: %d Retry-After=%q (%v), want 429 and an HTTP date",
			resp.StatusCode, resp.Header.Get("Retry-After"), err)
	}
	lo, hi := before.Add(time.Minute).Truncate(time.Second), after.Add(time.Minute+time.Second)
	if at.Before(lo) || at.After(hi) {
		t.Errorf("Retry-After date = %v, want within [%v, %v]", at, lo, hi)
	}
}

func TestChallengeServer(t *testing.T) {
	srv := egresstest.NewChallengeServer()
	defer srv.Close()
	resp, err := newClient(t).Get(srv.URL + "/page")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 403 || resp.Header.Get("cf-mitigated") != "challenge" {
		t.Errorf("challenge: %d cf-mitigated=%q, want 403 challenge", resp.StatusCode, resp.Header.Get("cf-mitigated"))
	}
	for _, marker := range []string{"<title>Just a moment...</title>", "/cdn-cgi/challenge-platform/", "_cf_chl_opt"} {
		if !strings.Contains(body, marker) {
			t.Errorf("challenge body lacks %q", marker)
		}
	}
	if srv.Requests() != 1 {
		t.Errorf("Requests() = %d, want 1", srv.Requests())
	}
}

func TestAwaitAcceptedHonoursContext(t *testing.T) {
	srv := egresstest.NewHangServer()
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := srv.AwaitAccepted(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitAccepted(canceled ctx) = %v, want context.Canceled", err)
	}
	if err := srv.AwaitAccepted(ctx, 0); err != nil {
		t.Errorf("AwaitAccepted(ctx, 0) = %v, want nil", err)
	}
}
