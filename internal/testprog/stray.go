package testprog

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// StrayOptions configures StrayServer.
type StrayOptions struct {
	// Share is the share of requests answered 429, at random. Zero: 0.02;
	// negative: none.
	Share float64
	// RetryAfter is the Retry-After of every 429, in seconds. Zero: 1;
	// negative: none sent.
	RetryAfter int
	// Seed seeds the random choice, so that a run can be repeated.
	Seed uint64
}

// Stray is a running server of many hosts that refuses a share of their
// requests at random (see StrayServer). Its methods are safe for
// concurrent use.
type Stray struct {
	// URL is "http://127.0.0.1:PORT".
	URL string
	srv *httptest.Server

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	ok, refused atomic.Int64
}

// StrayServer starts an httptest server that answers every path 200 with a
// small page, except a share of requests, chosen at random, which it
// answers 429 with a Retry-After: a loaded shard or a busy CDN node, not a
// rate limit — nothing the client does makes a refusal more or less likely.
// It answers whatever the Host: with Transport, every host name is a host
// of its own to the client (its own host key) and all reach this server.
// The server is closed when the test ends.
func StrayServer(t testing.TB, opts StrayOptions) *Stray {
	t.Helper()
	if opts.Share == 0 {
		opts.Share = 0.02
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 1
	}
	s := &Stray{rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	retryAfter := ""
	if opts.RetryAfter > 0 {
		retryAfter = strconv.Itoa(opts.RetryAfter)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		refuse := s.rng.Float64() < opts.Share
		s.mu.Unlock()
		if refuse {
			s.refused.Add(1)
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			http.Error(w, "busy, try again", http.StatusTooManyRequests)
			return
		}
		s.ok.Add(1)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>page</title><p>a page")
	}))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	return s
}

// Transport returns a new http.Transport that sends every request to the
// server, whatever host its URL names ("http://h17.example/page"), keeping
// up to idle idle connections per host name.
func (s *Stray) Transport(idle int) *http.Transport {
	addr := s.srv.Listener.Addr().String()
	return &http.Transport{
		MaxIdleConnsPerHost: idle,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// Answers returns how many requests the server answered 200 and how many
// 429.
func (s *Stray) Answers() (ok, refused int) {
	return int(s.ok.Load()), int(s.refused.Load())
}
