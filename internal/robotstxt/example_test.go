package robotstxt_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/robots"
)

func ExampleChecker_Check() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: *\nDisallow: /\n\nUser-agent: MyBot\nDisallow: /private/\nCrawl-delay: 2\n")
	}))
	defer srv.Close()

	c := robotstxt.New(robots.Config{
		UserAgent: "MyBot/1.0 (+https://example.com/bot)", // agent token "MyBot"
		Transport: srv.Client().Transport,                 // the crawler's base transport
	})
	for _, path := range []string{"/articles/1", "/private/notes"} {
		u, _ := url.Parse(srv.URL + path)
		d, err := c.Check(context.Background(), u)
		fmt.Printf("%s: allowed=%v disallowed=%v crawl-delay=%v\n", path, d.Allowed, errors.Is(err, egresskit.ErrDisallowed), d.CrawlDelay)
	}
	// Output:
	// /articles/1: allowed=true disallowed=false crawl-delay=2s
	// /private/notes: allowed=false disallowed=true crawl-delay=2s
}

func ExampleParse() {
	r := robotstxt.Parse([]byte("User-agent: *\nDisallow: /search\nAllow: /search/about\n"), "MyBot")
	for _, raw := range []string{"https://example.com/search?q=go", "https://example.com/search/about"} {
		u, _ := url.Parse(raw)
		fmt.Println(u.Path, r.Allowed(u))
	}
	// Output:
	// /search false
	// /search/about true
}
