package robotstxt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/egresskit/egresskit/robots"
)

var errNoResponse = errors.New("robots: transport returned no response and no error")

// fetchResult is what one fetch of robots.txt found.
type fetchResult struct {
	source robots.Source // Parsed, Unavailable or Unreachable
	rules  *Rules        // for Parsed
}

// fetch gets t's robots.txt through the configured transport and classifies
// the outcome as RFC 9309 section 2.3 says. It returns an error, wrapping
// ctx.Err(), when the caller's ctx ended the fetch, and wrapping the
// transport's error when the request failed on the egress route rather
// than at the host (see egressFailure); every other failure is an outcome.
func (c *Checker) fetch(ctx context.Context, t target) (fetchResult, error) {
	fctx, cancel := context.WithTimeout(ctx, c.cfg.FetchTimeout)
	defer cancel()
	canceled := func() (fetchResult, error) {
		return fetchResult{}, fmt.Errorf("robots: fetching robots.txt of %s: %w", t.host, ctx.Err())
	}

	next := &url.URL{Scheme: t.scheme, Host: t.host, Path: "/robots.txt"}
	for hops := 0; ; hops++ {
		resp, err := c.get(fctx, next)
		if err != nil {
			if ctx.Err() != nil {
				return canceled()
			}
			if egressFailure(err) {
				return fetchResult{}, fmt.Errorf("robots: fetching robots.txt of %s: %w", t.host, err)
			}
			return fetchResult{source: robots.Unreachable}, nil
		}
		code := resp.StatusCode
		switch {
		case code >= 200 && code <= 299:
			body, err := c.read(resp.Body)
			if err != nil {
				if ctx.Err() != nil {
					return canceled()
				}
				// A body cut short could drop rules: unreachable.
				return fetchResult{source: robots.Unreachable}, nil
			}
			return fetchResult{source: robots.Parsed, rules: Parse(body, c.cfg.AgentToken)}, nil
		case isRedirect(code):
			loc := resp.Header.Get("Location")
			discard(resp.Body)
			to, err := next.Parse(loc)
			if loc == "" || err != nil || (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" ||
				hops >= c.cfg.MaxRedirects {
				return fetchResult{source: robots.Unavailable}, nil
			}
			to.User, to.Fragment, to.RawFragment = nil, "", ""
			next = to
		case code == http.StatusTooManyRequests || code >= 500:
			discard(resp.Body)
			return fetchResult{source: robots.Unreachable}, nil
		default: // 4xx, and 1xx or 3xx that are not redirects
			discard(resp.Body)
			return fetchResult{source: robots.Unavailable}, nil
		}
	}
}

// get sends one GET for u.
func (c *Checker) get(ctx context.Context, u *url.URL) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if c.cfg.UserAgent != "" {
		req.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	resp, err := c.cfg.Transport.RoundTrip(req)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	if resp == nil {
		return nil, errNoResponse
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	return resp, nil
}

// read returns at most MaxSize bytes of body and closes it. When body is
// longer, the bytes after the last line end within the limit are dropped
// too, so that a rule cut in the middle, which could allow more than it
// says, is not applied.
func (c *Checker) read(body io.ReadCloser) ([]byte, error) {
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, c.cfg.MaxSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > c.cfg.MaxSize {
		b = b[:c.cfg.MaxSize]
		if i := bytes.LastIndexAny(b, "\r\n"); i >= 0 {
			b = b[:i+1]
		}
	}
	return b, nil
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// discard drains a little of body, so that the connection can be reused,
// and closes it.
func discard(body io.ReadCloser) {
	io.CopyN(io.Discard, body, 4<<10)
	body.Close()
}

// egressFailure reports whether err says the request failed on the way
// out — a proxy down or refusing credentials, or no usable proxy — rather
// than at the host: an error in its chain implements EndpointFault() bool
// or NotSent() bool and reports true (package egress's errors do). Such a
// failure says nothing about the host's robots.txt, so it is not cached as
// "unreachable", which would disallow the whole host.
func egressFailure(err error) bool {
	var fault interface{ EndpointFault() bool }
	if errors.As(err, &fault) && fault.EndpointFault() {
		return true
	}
	var notSent interface{ NotSent() bool }
	return errors.As(err, &notSent) && notSent.NotSent()
}
