package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/telemetry"
)

const (
	userAgent = "LoginDemoBot/1.0 (+https://example.org/bot)"
	// leaseTTL bounds a login: a worker that dies mid-login loses the
	// lease after it, and another worker logs in.
	leaseTTL = 30 * time.Second
	// leasePoll is how often a worker waiting for the login checks again.
	leasePoll = 10 * time.Millisecond
)

// credentials are what the crawler's operator was given for the site.
type credentials struct{ user, password string }

// worker is one crawler process of the fleet: its own chain, egress pool,
// session Manager and http.Client, sharing only the session store (and
// the per-host state) with the others.
type worker struct {
	name string
	id   string // the shared session
	m    *session.Manager
	pool *egress.Pool

	// chain is the full egresskit chain; client sends through the
	// session's Transport over it, with the session's Jar.
	chain  *egresskit.Transport
	client *http.Client

	mu      sync.Mutex // guards the fields below
	note    string     // what the worker did about the login
	fetches []fetch
	egress  map[string]int // attempts per egress endpoint
}

// fetch is one request a worker made and what became of it.
type fetch struct {
	Worker, Method, Path string
	Status               int
	Egress, Reason       string // the endpoint of the last attempt and why it was chosen
	Attempts             int
	Err                  error
}

type fetchKey struct{}

func newWorker(name, id string, m *session.Manager, state hoststate.Store, base http.RoundTripper) (*worker, error) {
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{
		{ID: "exit-a", Proxy: "direct"},
		{ID: "exit-b", Proxy: "direct"},
	}})
	if err != nil {
		return nil, err
	}
	w := &worker{name: name, id: id, m: m, pool: pool, egress: map[string]int{}}
	w.chain, err = egresskit.New(egresskit.Config{
		Base:      base, // robots.txt
		Egress:    pool, // everything else
		UserAgent: userAgent,
		Store:     state,
		Observers: []telemetry.Observer{telemetry.ObserverFunc(w.observe)},
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// observe notes which endpoint each attempt used, and the last attempt's
// result for the request in flight.
func (w *worker) observe(ctx context.Context, e *telemetry.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.Egress != "" {
		w.egress[e.Egress]++
	}
	if f, ok := ctx.Value(fetchKey{}).(*fetch); ok {
		f.Attempts++
		f.Egress, f.Reason = e.Egress, e.EgressReason
	}
}

// start opens the worker's session client: the session's Jar, and its
// Transport over the chain, which adds the session's headers and binds
// every request to the session's egress endpoint.
func (w *worker) start(ctx context.Context) error {
	jar, err := w.m.Jar(ctx, w.id)
	if err != nil {
		return err
	}
	w.client = &http.Client{Jar: jar, Transport: w.m.Transport(w.chain, w.id)}
	return nil
}

// login makes sure the session is logged in, exactly once across the
// fleet: the worker that takes the session's lease checks whether another
// one logged in already; if not, it binds the session to an egress
// endpoint and logs in, its cookie writes fenced by the lease. The others
// wait for the lease.
func (w *worker) login(ctx context.Context, site string, cred credentials, endpoint string) error {
	waited := false
	for {
		l, err := w.m.Acquire(ctx, w.id, leaseTTL)
		if errors.Is(err, session.ErrLeaseHeld) {
			waited = true
			if err := pause(ctx, leasePoll); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		did, err := w.loginUnder(session.WithLease(ctx, l), site, cred, endpoint)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if rerr := w.m.Release(rctx, l); err == nil {
			err = rerr
		}
		cancel()
		if err != nil {
			return err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case did:
			w.note = fmt.Sprintf("took the lease (token %d), bound the session to %s, logged in with the form's CSRF token", l.Token, endpoint)
		case waited:
			w.note = fmt.Sprintf("waited for the lease (token %d), found the session logged in", l.Token)
		default:
			w.note = fmt.Sprintf("took the lease (token %d), found the session logged in", l.Token)
		}
		return nil
	}
}

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	hrefAttr  = regexp.MustCompile(`href="([^"]+)"`)
)

// loginUnder logs in under the lease ctx carries, unless the session is
// logged in already; it reports whether it did.
func (w *worker) loginUnder(ctx context.Context, site string, cred credentials, endpoint string) (bool, error) {
	s, err := w.m.Get(ctx, w.id)
	if err != nil {
		return false, err
	}
	for _, c := range s.Cookies {
		if c.Name == "sid" {
			return false, nil
		}
	}
	// One address for the whole session: a site may tie a login to it.
	if err := w.m.Bind(ctx, w.id, endpoint); err != nil {
		return false, err
	}
	jar, err := w.m.Jar(ctx, w.id) // fenced by the lease
	if err != nil {
		return false, err
	}
	c := &http.Client{Jar: jar, Transport: w.m.Transport(w.chain, w.id)}
	form, f := w.do(ctx, c, http.MethodGet, site+"/login", nil)
	if f.Err != nil {
		return false, f.Err
	}
	m := csrfField.FindStringSubmatch(form)
	if m == nil {
		return false, errors.New("login form without a CSRF token")
	}
	vals := url.Values{"user": {cred.user}, "password": {cred.password}, "csrf": {m[1]}}
	if _, f := w.do(ctx, c, http.MethodPost, site+"/login", vals); f.Err != nil {
		return false, f.Err
	}
	// A Jar cannot return errors from SetCookies: check that the session
	// cookie reached the store.
	return true, jar.Err()
}

// do sends one request with client c and records it.
func (w *worker) do(ctx context.Context, c *http.Client, method, rawURL string, form url.Values) (string, *fetch) {
	f := &fetch{Worker: w.name, Method: method}
	if u, err := url.Parse(rawURL); err == nil {
		f.Path = u.RequestURI()
	}
	defer func() {
		w.mu.Lock()
		w.fetches = append(w.fetches, *f)
		w.mu.Unlock()
	}()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, fetchKey{}, f), method, rawURL, body)
	if err != nil {
		f.Err = err
		return "", f
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		f.Err = err
		return "", f
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	f.Status = resp.StatusCode
	switch {
	case err != nil:
		f.Err = err
	case resp.StatusCode != http.StatusOK:
		f.Err = fmt.Errorf("%s %s: status %d", method, f.Path, resp.StatusCode)
	}
	return string(b), f
}

// crawl fetches URLs from the frontier with the session client until the
// frontier is exhausted, adding the links of every page it fetches.
func (w *worker) crawl(ctx context.Context, fr *frontier) {
	for u := range fr.queue {
		body, f := w.do(ctx, w.client, http.MethodGet, u, nil)
		if f.Err == nil {
			base, _ := url.Parse(u)
			for _, m := range hrefAttr.FindAllStringSubmatch(body, -1) {
				if ref, err := base.Parse(m[1]); err == nil && ref.Host == base.Host {
					fr.add(ref.String())
				}
			}
		}
		fr.done()
	}
}

// result returns what the worker did.
func (w *worker) result() (note string, fetches []fetch, egress map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	eg := make(map[string]int, len(w.egress))
	for k, v := range w.egress {
		eg[k] = v
	}
	return w.note, append([]fetch(nil), w.fetches...), eg
}

// disallowed reports whether f was refused by robots.txt, unsent.
func (f fetch) disallowed() bool { return errors.Is(f.Err, egresskit.ErrDisallowed) }

// frontier is the crawl's shared to-do list: every URL once, at most
// maxURLs of them. A fleet would keep it in a shared queue; the two
// workers of this example share it in memory.
type frontier struct {
	queue chan string

	mu      sync.Mutex // guards seen and pending
	seen    map[string]bool
	pending int // URLs added and not yet done; the queue closes at 0
}

const maxURLs = 256

func newFrontier() *frontier {
	return &frontier{queue: make(chan string, maxURLs), seen: map[string]bool{}}
}

// add queues u unless it was seen or the frontier is full.
func (f *frontier) add(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[u] || len(f.seen) == maxURLs {
		return
	}
	f.seen[u] = true
	f.pending++
	f.queue <- u // never blocks: at most maxURLs are ever queued
}

// done marks one URL taken from the queue as finished.
func (f *frontier) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending--; f.pending == 0 {
		close(f.queue)
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
