package robotstxt_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/robots"
)

// hang is a transport whose requests never answer until their context ends.
var hang = roundTripFunc(func(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
})

// TestCheckFetchTimeout: a robots.txt that never answers makes the host
// unreachable after FetchTimeout, not an unbounded wait.
func TestCheckFetchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := robotstxt.New(robots.Config{Transport: hang})
		start := time.Now()
		d, err := check(t, c, "http://example.com/x")
		if d.Allowed || d.Source != robots.Unreachable || !errors.Is(err, egresskit.ErrTryLater) || errors.Is(err, egresskit.ErrDisallowed) {
			t.Errorf("Check(hanging host) = %+v, %v; want disallowed, unreachable, ErrTryLater and not ErrDisallowed", d, err)
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("Check waited %v, want the 30s default FetchTimeout", waited)
		}
	})
}

// TestCheckCallerDeadline: the caller's deadline bounds the fetch, and a
// fetch it ends is not cached as a failure of the host.
func TestCheckCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hung bool
		c := robotstxt.New(robots.Config{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !hung {
				hung = true
				return hang(r)
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(privateRules))}, nil
		})})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Check(ctx, mustURL(t, "http://example.com/x"))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Errorf("Check with a 5s deadline = %v after %v, want DeadlineExceeded after 5s", err, time.Since(start))
		}
		d, err := check(t, c, "http://example.com/x")
		if !d.Allowed || d.Source != robots.Parsed || err != nil {
			t.Errorf("next Check = %+v, %v; want a fresh fetch and allowed", d, err)
		}
	})
}

// TestCheckTransportPanic: a transport that panics does not leave the host
// marked as being fetched, which would block later checks.
func TestCheckTransportPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		c := robotstxt.New(robots.Config{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				panic("transport bug")
			}
			return &http.Response{StatusCode: 404, Header: http.Header{}, Body: http.NoBody}, nil
		})})
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Check did not pass on the transport's panic")
				}
			}()
			check(t, c, "http://example.com/x")
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d, err := c.Check(ctx, mustURL(t, "http://example.com/x"))
		if !d.Allowed || d.Source != robots.Unavailable || err != nil || calls != 2 {
			t.Errorf("Check after a panic = %+v, %v after %d calls; want a new fetch, allowed", d, err, calls)
		}
	})
}
