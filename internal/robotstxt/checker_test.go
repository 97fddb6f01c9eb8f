package robotstxt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/robots"
)

// clock is a fake time source for Config.Now.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// robotsServer serves handler at /robots.txt, counts its requests and
// answers every other path with 200.
type robotsServer struct {
	*httptest.Server
	fetches atomic.Int64
}

func newRobotsServer(t *testing.T, handler http.HandlerFunc) *robotsServer {
	t.Helper()
	s := &robotsServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			s.fetches.Add(1)
		}
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// serveText answers /robots.txt with status and body.
func serveText(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func (s *robotsServer) checker(cfg robots.Config) *robotstxt.Checker {
	cfg.Transport = s.Client().Transport
	return robotstxt.New(cfg)
}

func check(t *testing.T, c *robotstxt.Checker, raw string) (robotstxt.Decision, error) {
	t.Helper()
	return c.Check(context.Background(), mustURL(t, raw))
}

const privateRules = "User-agent: *\nDisallow: /private\n"

// TestCheckStatus covers RFC 9309 section 2.3.1: how each answer to the
// robots.txt fetch decides.
func TestCheckStatus(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		path    string
		allowed bool
		source  robots.Source
	}{
		{"200 allows unlisted path", serveText(200, privateRules), "/public", true, robots.Parsed},
		{"200 disallows listed path", serveText(200, privateRules), "/private/x", false, robots.Parsed},
		{"204 empty file", serveText(204, ""), "/private/x", true, robots.Parsed},
		{"299 is a success too", serveText(299, privateRules), "/private/x", false, robots.Parsed},
		{"404 allows all", serveText(404, privateRules), "/private/x", true, robots.Unavailable},
		{"401 allows all", serveText(401, privateRules), "/private/x", true, robots.Unavailable},
		{"403 allows all", serveText(403, privateRules), "/private/x", true, robots.Unavailable},
		{"410 allows all", serveText(410, ""), "/private/x", true, robots.Unavailable},
		{"429 disallows all", serveText(429, ""), "/public", false, robots.Unreachable},
		{"500 disallows all", serveText(500, ""), "/public", false, robots.Unreachable},
		{"503 disallows all", serveText(503, ""), "/public", false, robots.Unreachable},
		{"300 without location allows all", serveText(300, ""), "/private/x", true, robots.Unavailable},
		{"302 without location allows all", serveText(302, ""), "/private/x", true, robots.Unavailable},
		{"HTML soft 404 allows all", serveText(200, "<html><h1>Not found</h1></html>"), "/private/x", true, robots.Parsed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRobotsServer(t, tt.handler)
			d, err := check(t, srv.checker(robots.Config{}), srv.URL+tt.path)
			if d.Allowed != tt.allowed || d.Source != tt.source {
				t.Errorf("Check(%s) = allowed %v source %v, want %v %v", tt.path, d.Allowed, d.Source, tt.allowed, tt.source)
			}
			// A rule: skip the URL (ErrDisallowed); robots.txt unreachable:
			// try the host later (ErrTryLater, with when).
			want := egresskit.ErrDisallowed
			if tt.source == robots.Unreachable {
				want = egresskit.ErrTryLater
			}
			if (err == nil) != tt.allowed || (err != nil && (!errors.Is(err, want) || egresskit.RetryAt(err).IsZero() != (want == egresskit.ErrDisallowed))) {
				t.Errorf("Check(%s) error = %v, want %v iff disallowed", tt.path, err, want)
			}
			if n := srv.fetches.Load(); n != 1 {
				t.Errorf("server saw %d robots.txt fetches, want 1", n)
			}
		})
	}
}

// TestCheckUnreachable: a host that refuses connections is disallowed.
func TestCheckUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	d, err := robotstxt.New(robots.Config{}).Check(context.Background(), mustURL(t, srv.URL+"/x"))
	var de *robots.DisallowedError
	if !errors.As(err, &de) || de.Source != robots.Unreachable || d.Allowed {
		t.Fatalf("Check(closed server) = %+v, %v; want disallowed, unreachable", d, err)
	}
	if want := strings.TrimPrefix(srv.URL, "http://"); de.Host != want || de.Path != "/x" {
		t.Errorf("DisallowedError = %+v, want host %s path /x", de, want)
	}
}

// TestCheckRedirects: up to five redirects are followed, even to another
// host, and the rules found apply to the original host; more, or a bad
// target, count as unavailable.
func TestCheckRedirects(t *testing.T) {
	other := newRobotsServer(t, serveText(200, privateRules))
	tests := []struct {
		name     string
		hops     int    // redirects before the file
		final    string // Location of the last hop; "" means the file on this host
		allowed  bool
		source   robots.Source
		requests int64
	}{
		{"no redirect", 0, "", false, robots.Parsed, 1},
		{"one redirect", 1, "", false, robots.Parsed, 2},
		{"five redirects", 5, "", false, robots.Parsed, 6},
		{"six redirects", 6, "", true, robots.Unavailable, 6},
		{"loop", 1000, "", true, robots.Unavailable, 6},
		{"to another host", 1, other.URL + "/robots.txt", false, robots.Parsed, 1},
		{"to ftp", 1, "ftp://example.com/robots.txt", true, robots.Unavailable, 1},
		{"to empty host", 1, "http:///robots.txt", true, robots.Unavailable, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				var n int
				fmt.Sscanf(r.URL.Query().Get("hop"), "%d", &n)
				switch {
				case n < tt.hops-1 || n == tt.hops-1 && tt.final == "":
					// Relative redirects, as servers often send.
					http.Redirect(w, r, fmt.Sprintf("/robots.txt?hop=%d", n+1), http.StatusMovedPermanently)
				case n == tt.hops-1:
					w.Header().Set("Location", tt.final)
					w.WriteHeader(http.StatusFound)
				default:
					io.WriteString(w, privateRules)
				}
			}))
			defer srv.Close()
			c := robotstxt.New(robots.Config{Transport: srv.Client().Transport})
			d, _ := check(t, c, srv.URL+"/private/x")
			if d.Allowed != tt.allowed || d.Source != tt.source {
				t.Errorf("Check after %d redirects = allowed %v source %v, want %v %v", tt.hops, d.Allowed, d.Source, tt.allowed, tt.source)
			}
			if n := requests.Load(); n != tt.requests {
				t.Errorf("server saw %d requests, want %d", n, tt.requests)
			}
		})
	}
}

// TestCheckSizeCap: only the first 500 KiB are parsed, cut back to the last
// whole line.
func TestCheckSizeCap(t *testing.T) {
	const limit = 500 << 10
	head := "User-agent: *\nDisallow: /\nAllow: /early\n"
	filler := strings.Repeat("# "+strings.Repeat("x", 97)+"\n", (limit-len(head))/100)
	// "Allow: /late-and-long" straddles the limit: cut at it, it would read
	// "Allow: /" and allow everything.
	straddle := head + filler
	straddle += strings.Repeat("#", limit-len(straddle)-9) + "\nAllow: /late-and-long\n"
	// The same cut after a rule: the rule before the cut line applies as
	// written, "Disallow: /ab", not shortened to "Disallow: /a".
	lenient := "User-agent: *\nAllow: /early\n" + filler
	lenient += strings.Repeat("#", limit-len(lenient)-24) + "\nDisallow: /ab\nAllow: /late-and-long\n"
	tests := []struct {
		name, body, path string
		want             bool
	}{
		{"rule before the limit applies", head + filler + "Allow: /late\n", "/early", true},
		{"rule after the limit ignored", head + filler + strings.Repeat("#", 200) + "\nAllow: /late\n", "/late", false},
		{"cut line ignored", straddle, "/elsewhere", false},
		{"line before the cut kept whole", lenient, "/ax", true},
		{"line before the cut applies", lenient, "/abc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRobotsServer(t, serveText(200, tt.body))
			d, _ := check(t, srv.checker(robots.Config{MaxSize: 1}), srv.URL+tt.path) // 1 is raised to 500 KiB
			if d.Allowed != tt.want || d.Source != robots.Parsed {
				t.Errorf("Check(%s) = %+v, want allowed %v from parsed rules", tt.path, d, tt.want)
			}
		})
	}
}

// endless is a robots.txt body that never ends.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	line := "User-agent: *\nDisallow: /private\n"
	for i := range p {
		p[i] = line[(int(e.n.Load())+i)%len(line)]
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

func (e *endless) Close() error { return nil }

// TestCheckEndlessBody: a body of any size (here endless) is read only up to
// the limit.
func TestCheckEndlessBody(t *testing.T) {
	body := &endless{}
	c := robotstxt.New(robots.Config{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: body, Header: http.Header{}, Request: r}, nil
	})})
	d, err := check(t, c, "http://example.com/private")
	if d.Allowed || !errors.Is(err, egresskit.ErrDisallowed) {
		t.Errorf("Check = %+v, %v; want disallowed", d, err)
	}
	if n := body.n.Load(); n > 500<<10+64<<10 {
		t.Errorf("read %d bytes of an endless body, want about 500 KiB", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCheckCache: one fetch per host within the TTL, a new one after.
func TestCheckCache(t *testing.T) {
	var body atomic.Value
	body.Store(privateRules)
	srv := newRobotsServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body.Load().(string))
	})
	clk := newClock()
	c := srv.checker(robots.Config{Now: clk.Now})
	steps := []struct {
		advance time.Duration
		path    string
		allowed bool
		fetches int64
	}{
		{0, "/private", false, 1},
		{0, "/public", true, 1},
		{time.Hour, "/private/2", false, 1},
		{22*time.Hour + 59*time.Minute + 59*time.Second, "/private", false, 1}, // 23:59:59 after the fetch
		{time.Second, "/private", true, 2},                                     // 24:00:00: refetched, new rules
		{time.Hour, "/private", true, 2},
	}
	for i, s := range steps {
		if i == 4 {
			body.Store("User-agent: *\nDisallow: /other\n")
		}
		clk.Advance(s.advance)
		d, _ := check(t, c, srv.URL+s.path)
		if d.Allowed != s.allowed || srv.fetches.Load() != s.fetches {
			t.Errorf("step %d: Check(%s) allowed %v after %d fetches, want %v after %d", i, s.path, d.Allowed, srv.fetches.Load(), s.allowed, s.fetches)
		}
	}
}

// TestCheckBackoff: an unreachable robots.txt is fetched again after 1
// minute, then 2, 4, ... up to RetryMaxDelay, and the host recovers on success.
func TestCheckBackoff(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv := newRobotsServer(t, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, privateRules)
	})
	clk := newClock()
	c := srv.checker(robots.Config{Now: clk.Now, RetryMaxDelay: 8 * time.Minute})
	waits := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 8 * time.Minute}
	for i, wait := range waits {
		d, _ := check(t, c, srv.URL+"/public")
		if d.Allowed || d.Source != robots.Unreachable || d.Expires.Sub(clk.Now()) != wait {
			t.Fatalf("failure %d: Check = %+v, want disallowed, unreachable, retry in %v", i+1, d, wait)
		}
		clk.Advance(wait - time.Second)
		check(t, c, srv.URL+"/public")
		if n := srv.fetches.Load(); n != int64(i+1) {
			t.Fatalf("failure %d: %d fetches before the wait ended, want %d", i+1, n, i+1)
		}
		clk.Advance(time.Second)
	}
	failing.Store(false)
	d, _ := check(t, c, srv.URL+"/public")
	if !d.Allowed || d.Source != robots.Parsed {
		t.Errorf("after recovery Check = %+v, want allowed from parsed rules", d)
	}
	d, _ = check(t, c, srv.URL+"/private")
	if d.Allowed {
		t.Errorf("after recovery Check(/private) allowed, want disallowed")
	}
}

// TestCheckUnreachableLimit: a host unreachable for longer than the limit
// (30 days by default, 1 hour here) is treated as unavailable.
func TestCheckUnreachableLimit(t *testing.T) {
	srv := newRobotsServer(t, serveText(500, ""))
	clk := newClock()
	c := srv.checker(robots.Config{Now: clk.Now, UnreachableLimit: time.Hour, RetryMaxDelay: 10 * time.Minute})
	var d robotstxt.Decision
	for range 20 {
		d, _ = check(t, c, srv.URL+"/x")
		if d.Allowed {
			break
		}
		clk.Advance(d.Expires.Sub(clk.Now()))
	}
	if !d.Allowed || d.Source != robots.Unavailable {
		t.Fatalf("after more than an hour unreachable Check = %+v, want allowed, unavailable", d)
	}
	if got := clk.Now().Sub(newClock().Now()); got < time.Hour || got > time.Hour+10*time.Minute {
		t.Errorf("allowed after %v unreachable, want 1h to 1h10m", got)
	}
}

// gatedHost serves privateRules for robots.txt only once gate is closed,
// and counts the fetches. Inside a synctest bubble, a fetch blocked on
// the gate is durably blocked, so synctest.Wait returns once every check
// is either fetching or waiting for the fetch.
type gatedHost struct {
	gate    chan struct{}
	fetches atomic.Int64
}

func (g *gatedHost) RoundTrip(r *http.Request) (*http.Response, error) {
	g.fetches.Add(1)
	select {
	case <-g.gate:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(privateRules)), Request: r}, nil
}

// TestCheckSingleFlight: 50 concurrent checks of one host share one fetch.
// The fetch is held until all 50 are known to be blocked (synctest.Wait),
// so none of them can have been answered from the cache.
func TestCheckSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &gatedHost{gate: make(chan struct{})}
		c := robotstxt.New(robots.Config{Transport: h})
		var wg sync.WaitGroup
		var answered atomic.Int64
		errs := make(chan error, 50)
		for i := range 50 {
			wg.Go(func() {
				path, want := "/public", true
				if i%2 == 0 {
					path, want = "/private", false
				}
				d, _ := c.Check(context.Background(), mustURL(t, "http://one.test"+path))
				answered.Add(1)
				if d.Allowed != want {
					errs <- fmt.Errorf("Check(%s) allowed = %v, want %v", path, d.Allowed, want)
				}
			})
		}
		synctest.Wait()
		if n, a := h.fetches.Load(), answered.Load(); n != 1 || a != 0 {
			t.Fatalf("with the fetch held: %d fetches started, %d checks answered; want 1 and 0 (49 waiting)", n, a)
		}
		close(h.gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := h.fetches.Load(); n != 1 {
			t.Errorf("%d fetches for 50 concurrent checks, want 1", n)
		}
	})
}

// TestCheckWaiterCancel: a check waiting for another's fetch returns when
// its context ends, without fetching. The cancellation comes only once the
// check is known to be waiting (synctest.Wait).
func TestCheckWaiterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &gatedHost{gate: make(chan struct{})}
		c := robotstxt.New(robots.Config{Transport: h})
		leader := make(chan robotstxt.Decision)
		go func() {
			d, _ := c.Check(context.Background(), mustURL(t, "http://one.test/public"))
			leader <- d
		}()
		synctest.Wait() // the leader's fetch is held
		ctx, cancel := context.WithCancel(context.Background())
		waiter := make(chan error, 1)
		go func() {
			_, err := c.Check(ctx, mustURL(t, "http://one.test/public"))
			waiter <- err
		}()
		synctest.Wait() // the second check waits for the leader's fetch
		if len(waiter) != 0 {
			t.Fatalf("second check returned before the fetch ended: %v", <-waiter)
		}
		cancel()
		if err := <-waiter; !errors.Is(err, context.Canceled) {
			t.Errorf("waiting Check cancelled = %v, want context.Canceled", err)
		}
		close(h.gate)
		if d := <-leader; !d.Allowed {
			t.Errorf("leading Check = %+v, want allowed", d)
		}
		if n := h.fetches.Load(); n != 1 {
			t.Errorf("%d fetches, want 1", n)
		}
	})
}

// TestCheckLeaderCancel: when the check that runs the fetch is cancelled,
// the cancellation is not cached and the next check fetches again.
func TestCheckLeaderCancel(t *testing.T) {
	arrived := make(chan struct{})
	var srv *robotsServer
	srv = newRobotsServer(t, func(w http.ResponseWriter, r *http.Request) {
		if srv.fetches.Load() == 1 {
			close(arrived)
			<-r.Context().Done() // the first fetch hangs until cancelled
			return
		}
		io.WriteString(w, privateRules)
	})
	c := srv.checker(robots.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error)
	go func() {
		_, err := c.Check(ctx, mustURL(t, srv.URL+"/public"))
		leader <- err
	}()
	<-arrived
	cancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Check = %v, want context.Canceled", err)
	}
	d, err := check(t, c, srv.URL+"/private")
	if d.Allowed || d.Source != robots.Parsed || !errors.Is(err, egresskit.ErrDisallowed) {
		t.Errorf("Check after a cancelled fetch = %+v, %v; want disallowed by parsed rules", d, err)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Errorf("server saw %d fetches, want 2", n)
	}
}

// TestCheckAgent: the agent token comes from the User-Agent, which the
// fetch sends; its group applies, else the "*" group.
func TestCheckAgent(t *testing.T) {
	const file = "User-agent: *\nDisallow: /\n\nUser-agent: FooBot\nDisallow: /private\nCrawl-delay: 2\n"
	tests := []struct {
		ua, token string
		path      string
		allowed   bool
	}{
		{"FooBot/1.0 (+https://example.com/bot)", "", "/public", true},
		{"FooBot/1.0 (+https://example.com/bot)", "", "/private", false},
		{"Mozilla/5.0 (compatible; foobot/1.0)", "", "/public", true},
		{"OtherBot/2.0", "", "/public", false},
		{"", "", "/public", false},
		{"Mozilla/5.0 (X11) Safari/1", "FooBot", "/public", true},
	}
	for _, tt := range tests {
		var gotUA atomic.Value
		srv := newRobotsServer(t, func(w http.ResponseWriter, r *http.Request) {
			gotUA.Store(r.UserAgent())
			io.WriteString(w, file)
		})
		d, _ := check(t, srv.checker(robots.Config{UserAgent: tt.ua, AgentToken: tt.token}), srv.URL+tt.path)
		if d.Allowed != tt.allowed {
			t.Errorf("UserAgent %q, AgentToken %q: Check(%s) allowed = %v, want %v", tt.ua, tt.token, tt.path, d.Allowed, tt.allowed)
		}
		if ua := gotUA.Load().(string); tt.ua != "" && ua != tt.ua {
			t.Errorf("robots.txt fetched with User-Agent %q, want %q", ua, tt.ua)
		}
	}
}

// TestCheckCrawlDelay: Crawl-delay is reported, clamped to MaxCrawlDelay.
func TestCheckCrawlDelay(t *testing.T) {
	tests := []struct {
		value string
		max   time.Duration
		want  time.Duration
	}{
		{"2", 0, 2 * time.Second},
		{"2.5", 0, 2500 * time.Millisecond},
		{"-1", 0, 0},
		{"abc", 0, 0},
		{"1e9", 0, time.Minute},
		{"3600", 0, time.Minute},
		{"3600", time.Hour, time.Hour},
		{"5", -1, 0},
	}
	for _, tt := range tests {
		srv := newRobotsServer(t, serveText(200, "User-agent: *\nCrawl-delay: "+tt.value+"\nDisallow: /private\n"))
		c := srv.checker(robots.Config{MaxCrawlDelay: tt.max})
		for _, path := range []string{"/public", "/private"} {
			if d, _ := check(t, c, srv.URL+path); d.CrawlDelay != tt.want {
				t.Errorf("Crawl-delay: %s, MaxCrawlDelay %v: Check(%s).CrawlDelay = %v, want %v", tt.value, tt.max, path, d.CrawlDelay, tt.want)
			}
		}
	}
}

// TestCheckRobotsTxt: /robots.txt itself is allowed without a fetch.
func TestCheckRobotsTxt(t *testing.T) {
	srv := newRobotsServer(t, serveText(200, "User-agent: *\nDisallow: /\n"))
	c := srv.checker(robots.Config{})
	d, err := check(t, c, srv.URL+"/robots.txt")
	if !d.Allowed || d.Source != robots.Implicit || err != nil || srv.fetches.Load() != 0 {
		t.Errorf("Check(/robots.txt) = %+v, %v after %d fetches; want allowed, implicit, no fetch", d, err, srv.fetches.Load())
	}
}

// TestCheckInvalidURL: URLs that cannot be checked fail fast, without a
// fetch and without the URL in the error.
func TestCheckInvalidURL(t *testing.T) {
	var fetches atomic.Int64
	c := robotstxt.New(robots.Config{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fetches.Add(1)
		return nil, errors.New("unexpected fetch")
	})})
	for _, raw := range []string{"ftp://user:secret@example.com/x", "http:///x", "http://:8080/x", "mailto:secret@example.com", "/relative/secret"} {
		_, err := c.Check(context.Background(), mustURL(t, raw))
		if !errors.Is(err, robotstxt.ErrInvalidURL) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Check(%q) = %v, want ErrInvalidURL without the URL", raw, err)
		}
	}
	if _, err := c.Check(context.Background(), nil); !errors.Is(err, robotstxt.ErrInvalidURL) {
		t.Errorf("Check(nil) = %v, want ErrInvalidURL", err)
	}
	u := mustURL(t, "http://example.com/x")
	u.Host = "example.com:abc"
	if _, err := c.Check(context.Background(), u); !errors.Is(err, robotstxt.ErrInvalidURL) {
		t.Errorf("Check(port abc) = %v, want ErrInvalidURL", err)
	}
	if n := fetches.Load(); n != 0 {
		t.Errorf("%d fetches for invalid URLs, want 0", n)
	}
}

// TestDisallowedErrorRedacted: the error names host and path only.
func TestDisallowedErrorRedacted(t *testing.T) {
	srv := newRobotsServer(t, serveText(200, privateRules))
	raw := strings.Replace(srv.URL, "http://", "http://user:secret@", 1) + "/private/page?token=hunter2#frag"
	_, err := check(t, srv.checker(robots.Config{}), raw)
	var de *robots.DisallowedError
	if !errors.As(err, &de) {
		t.Fatalf("Check = %v, want *DisallowedError", err)
	}
	for _, leak := range []string{"user", "secret", "token", "hunter2", "frag"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q contains %q", err, leak)
		}
	}
	if want := strings.TrimPrefix(srv.URL, "http://"); de.Host != want || de.Path != "/private/page" || de.Source != robots.Parsed {
		t.Errorf("DisallowedError = %+v, want host %s, path /private/page, parsed", de, want)
	}
}

// memoryHosts is an in-memory transport serving privateRules for any host
// and counting fetches per host.
type memoryHosts struct {
	mu      sync.Mutex // guards fetches
	fetches map[string]int
}

func (m *memoryHosts) RoundTrip(r *http.Request) (*http.Response, error) {
	m.mu.Lock()
	if m.fetches == nil {
		m.fetches = make(map[string]int)
	}
	m.fetches[r.URL.Host]++
	m.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(privateRules)), Request: r}, nil
}

func (m *memoryHosts) count(host string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fetches[host]
}

// TestCheckHostKey: hosts are keyed by scheme, lower-cased host without a
// trailing dot, and port (default ports filled in).
func TestCheckHostKey(t *testing.T) {
	m := &memoryHosts{}
	c := robotstxt.New(robots.Config{Transport: m})
	for _, raw := range []string{"http://example.com/a", "http://EXAMPLE.com./b", "http://example.com:80/c", "https://example.com/d", "https://example.com:443/e", "http://example.com:8080/f"} {
		check(t, c, raw)
	}
	total := 0
	for _, h := range []string{"example.com", "EXAMPLE.com.", "example.com:80", "example.com:443", "example.com:8080"} {
		total += m.count(h)
	}
	if total != 3 {
		t.Errorf("%d fetches, want 3 (http, https, port 8080): %v", total, m.fetches)
	}
}

// TestCheckEviction: beyond MaxHosts the least recently checked host is
// dropped and fetched again when checked again.
func TestCheckEviction(t *testing.T) {
	m := &memoryHosts{}
	c := robotstxt.New(robots.Config{Transport: m, MaxHosts: 2})
	for _, h := range []string{"a.test", "b.test", "a.test", "c.test", "a.test", "b.test"} {
		check(t, c, "http://"+h+"/x")
	}
	for h, want := range map[string]int{"a.test": 1, "b.test": 2, "c.test": 1} {
		if got := m.count(h); got != want {
			t.Errorf("%s fetched %d times, want %d", h, got, want)
		}
	}
}

// TestCheckIdleEviction: a host not checked for a TTL is dropped.
func TestCheckIdleEviction(t *testing.T) {
	m := &memoryHosts{}
	clk := newClock()
	c := robotstxt.New(robots.Config{Transport: m, Now: clk.Now, TTL: time.Hour})
	check(t, c, "http://a.test/x")
	clk.Advance(2 * time.Hour)
	check(t, c, "http://b.test/x") // evicts a.test, idle for 2h
	check(t, c, "http://a.test/x")
	if got := m.count("a.test"); got != 2 {
		t.Errorf("a.test fetched %d times, want 2", got)
	}
}

// TestCheckConcurrent hammers many hosts from many goroutines with a small
// cache, for the race detector.
func TestCheckConcurrent(t *testing.T) {
	m := &memoryHosts{}
	c := robotstxt.New(robots.Config{Transport: m, MaxHosts: 100})
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				host := fmt.Sprintf("h%d.test", (g*7919+i*31)%1000)
				path := "/public"
				if i%3 == 0 {
					path = "/private"
				}
				d, err := c.Check(context.Background(), mustURL(t, "http://"+host+path))
				if d.Allowed != (path == "/public") || (err != nil) == d.Allowed {
					t.Errorf("Check(%s%s) = %+v, %v", host, path, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkCheckCached measures Check on a host whose robots.txt is cached:
// the cost every request pays.
func BenchmarkCheckCached(b *testing.B) {
	body, err := os.ReadFile("testdata/robots_100k.txt")
	if err != nil {
		b.Fatal(err)
	}
	c := robotstxt.New(robots.Config{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}, nil
	})})
	u := mustURL(b, "https://www.example.com/catalog/widget-4242/details?color=blue")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Check(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
}
