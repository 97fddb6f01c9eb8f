package robotstxt_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/robots"
)

// FuzzCheck drives the whole Checker with arbitrary status codes, redirect
// targets, bodies and URLs: it must never panic, and it must answer either
// with a decision or with one of its documented errors.
func FuzzCheck(f *testing.F) {
	f.Add(200, "", "User-agent: *\nDisallow: /private\n", "/private/x?q=1")
	f.Add(301, "/elsewhere", "", "/x")
	f.Add(302, "ftp://x/", "", "/x")
	f.Add(503, "", "", "/")
	f.Add(404, "", "User-agent: *\nDisallow: /\n", "/robots.txt")
	f.Add(200, "", "\xEF\xBB\xBFUser-agent: *\rDisallow: /\rCrawl-delay: 1e9\r", "/%zz")
	f.Fuzz(func(t *testing.T, status int, location, body, path string) {
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("Location", location)
			return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		c := robotstxt.New(robots.Config{Transport: transport, UserAgent: "FooBot/1.0"})
		u, err := url.Parse("http://example.com/" + strings.TrimPrefix(path, "/"))
		if err != nil {
			return
		}
		d, err := c.Check(context.Background(), u)
		switch {
		case err == nil && !d.Allowed:
			t.Fatalf("Check(%q) = disallowed without an error", path)
		case err != nil && d.Allowed:
			t.Fatalf("Check(%q) = allowed with error %v", path, err)
		case err != nil && !errors.Is(err, egresskit.ErrDisallowed) && !errors.Is(err, egresskit.ErrTryLater):
			t.Fatalf("Check(%q) error %v, want ErrDisallowed or ErrTryLater", path, err)
		case err != nil && errors.Is(err, egresskit.ErrTryLater) != (d.Source == robots.Unreachable):
			t.Fatalf("Check(%q) error %v with source %v: ErrTryLater iff robots.txt unreachable", path, err, d.Source)
		}
		if d.CrawlDelay < 0 || d.CrawlDelay > robotstxt.DefaultConfig().MaxCrawlDelay {
			t.Fatalf("CrawlDelay = %v out of bounds", d.CrawlDelay)
		}
	})
}
