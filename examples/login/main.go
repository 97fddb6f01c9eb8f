// Command login shows two crawler workers sharing one logged-in session
// through the full egresskit chain. A local site has a login form guarded
// by a CSRF token and a paginated item list for logged-in users. The
// workers, each with its own session Manager, chain, egress pool and
// http.Client, share only the session store: the one that takes the
// session's lease binds the session to one egress endpoint and logs in,
// the other waits for the lease and finds the session logged in, and then
// both page through the items with the session's cookie, every request
// leaving through the bound endpoint. robots.txt is obeyed. Finally the
// bound endpoint is removed from one worker's pool, and that worker's
// next request fails with session.ErrEgressLost instead of leaving from
// another address.
//
// The session store and the per-host state are in memory by default, or
// in Redis with -redis (default: $EGRESSKIT_REDIS_ADDR), one client per
// worker, as separate processes would have. It needs no network: the site
// runs on 127.0.0.1.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session"
	"github.com/redis/go-redis/v9"
)

func main() {
	var o options
	flag.StringVar(&o.redis, "redis", os.Getenv("EGRESSKIT_REDIS_ADDR"),
		"Redis address (host:port or redis:// URL) for the session store and the per-host state; empty keeps them in memory")
	flag.IntVar(&o.pages, "pages", 5, "number of item pages on the site")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "login:", err)
		os.Exit(1)
	}
}

// options configure a run. The zero value works.
type options struct {
	// redis is the Redis address; empty keeps state in memory.
	redis string
	// prefix starts the Redis keys; empty: a random one.
	prefix string
	// pages and perPage shape the site; zero: 5 pages of 2 items.
	pages, perPage int
}

// endpoint is the egress endpoint the session is bound to.
const endpoint = "exit-b"

// hostState paces the site at 20 requests a second across the fleet, so
// the example runs quickly; the default is one a second.
var hostState = hoststate.Config{Limit: ratelimit.Config{PerMinute: 1200, Burst: 2}}

// result is what a run did, for the tests.
type result struct {
	Site    siteStats
	Notes   map[string]string // worker → what it did about the login
	Fetches []fetch           // every request, in site order
	Pages   map[string]int    // worker → pages fetched with the session
	Egress  map[string]int    // endpoint → attempts
	// Lost is the request after the bound endpoint was removed, and
	// SiteAfter what the site had seen then.
	Lost      *fetch
	SiteAfter siteStats
}

// run starts the site and two workers, crawls, and writes a report to out.
func run(ctx context.Context, out io.Writer, o options) (*result, error) {
	if o.pages <= 0 {
		o.pages = 5
	}
	if o.perPage <= 0 {
		o.perPage = 2
	}
	site := newSite(o.pages, o.perPage)
	defer site.Close()
	base := http.DefaultTransport.(*http.Transport).Clone() // robots.txt
	defer base.CloseIdleConnections()

	// Every worker of a fleet holds the same key ring (from a secret store
	// in production): values are sealed with it before they are stored.
	var material [32]byte
	rand.Read(material[:])
	keys, err := session.NewKeyring(session.Key{ID: 1, Secret: session.Secret(material[:])})
	if err != nil {
		return nil, err
	}
	var idb [8]byte
	rand.Read(idb[:])
	id := "login-demo-" + hex.EncodeToString(idb[:])

	names := []string{"A", "B"}
	workers := make([]*worker, len(names))
	var storeDesc string
	if o.redis == "" {
		storeDesc = "memory: two Managers over one session.NewMemoryStore, one hoststate.Memory"
		sessions := session.NewMemoryStore(nil)
		state, err := hoststate.NewMemory(hostState)
		if err != nil {
			return nil, err
		}
		for i, name := range names {
			m, err := session.New(session.Config{Store: sessions, Keyring: keys})
			if err != nil {
				return nil, err
			}
			if workers[i], err = newWorker(name, id, m, state, base); err != nil {
				return nil, err
			}
			defer workers[i].pool.Close()
		}
	} else {
		prefix := o.prefix
		if prefix == "" {
			var b [6]byte
			rand.Read(b[:])
			prefix = "egresskit-login-" + hex.EncodeToString(b[:])
		}
		storeDesc = "redis, one client per worker, key prefix " + prefix
		for i, name := range names {
			client, err := redisClient(o.redis)
			if err != nil {
				return nil, err
			}
			defer client.Close()
			sessions, err := redisstore.NewSessionStore(client, redisstore.SessionConfig{Prefix: prefix})
			if err != nil {
				return nil, err
			}
			state, err := redisstore.New(client, redisstore.Config{Prefix: prefix, HostState: hostState})
			if err != nil {
				return nil, err
			}
			m, err := session.New(session.Config{Store: sessions, Keyring: keys})
			if err != nil {
				return nil, err
			}
			if workers[i], err = newWorker(name, id, m, state, base); err != nil {
				return nil, err
			}
			defer workers[i].pool.Close()
		}
	}

	cred := credentials{user: siteUser, password: sitePassword}
	fr := newFrontier()
	fr.add(site.URL + "/items?page=1")
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, w := range workers {
		wg.Go(func() {
			// Every worker creates the session or joins it.
			_, err := w.m.Create(ctx, id, session.CreateOptions{TTL: 10 * time.Minute})
			if err != nil && !errors.Is(err, session.ErrExists) {
				errs[i] = err
				return
			}
			if err := w.login(ctx, site.URL, cred, endpoint); err != nil {
				errs[i] = fmt.Errorf("worker %s: login: %w", w.name, err)
				return
			}
			if errs[i] = w.start(ctx); errs[i] != nil {
				return
			}
			w.crawl(ctx, fr)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	res := &result{Site: site.stats(), Notes: map[string]string{}, Pages: map[string]int{}, Egress: map[string]int{}}
	for _, w := range workers {
		note, fs, eg := w.result()
		res.Notes[w.name] = note
		for _, f := range fs {
			if f.Err == nil && strings.HasPrefix(f.Path, "/items") {
				res.Pages[w.name]++
			}
		}
		res.Fetches = append(res.Fetches, fs...)
		for k, v := range eg {
			res.Egress[k] += v
		}
	}
	sort.SliceStable(res.Fetches, func(i, j int) bool { return siteOrder(res.Fetches[i]) < siteOrder(res.Fetches[j]) })

	// The bound endpoint leaves worker B's pool: its next request is not
	// sent from another address.
	b := workers[1]
	if err := b.pool.Remove(endpoint); err != nil {
		return nil, err
	}
	_, lost := b.do(ctx, b.client, http.MethodGet, site.URL+"/items?page=1", nil)
	res.Lost = lost
	res.SiteAfter = site.stats()

	if err := workers[0].m.Delete(ctx, id); err != nil {
		return nil, err
	}
	report(out, site.URL, storeDesc, id, names, res)
	return res, nil
}

// redisClient returns a client of addr ("host:port" or a redis:// URL)
// whose calls honour context deadlines, as redisstore.New requires.
func redisClient(addr string) (*redis.Client, error) {
	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			return nil, err
		}
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// siteOrder sorts requests as the site is laid out: the login, then each
// page followed by its items.
func siteOrder(f fetch) string {
	switch {
	case f.Path == "/login" && f.Method == http.MethodGet:
		return "0"
	case f.Path == "/login":
		return "1"
	case strings.HasPrefix(f.Path, "/items?page="):
		n, _ := strconv.Atoi(strings.TrimPrefix(f.Path, "/items?page="))
		return fmt.Sprintf("2 %04d", n)
	case strings.HasPrefix(f.Path, "/items/"):
		n, k, _ := strings.Cut(strings.TrimPrefix(f.Path, "/items/"), "-")
		a, _ := strconv.Atoi(n)
		b, _ := strconv.Atoi(k)
		return fmt.Sprintf("2 %04d %04d", a, b)
	}
	return "3 " + f.Path
}

func report(out io.Writer, siteURL, storeDesc, id string, names []string, r *result) {
	fmt.Fprintf(out, "site     %s (robots.txt disallows /admin/)\n", siteURL)
	fmt.Fprintf(out, "store    %s\n", storeDesc)
	fmt.Fprintf(out, "session  %s, bound to egress endpoint %s\n", id, endpoint)
	for _, n := range names {
		fmt.Fprintf(out, "worker %s: %s\n", n, r.Notes[n])
	}
	fmt.Fprintln(out)
	for _, f := range r.Fetches {
		fmt.Fprintf(out, "  %s  %-4s %-16s %s\n", f.Worker, f.Method, f.Path, outcome(f))
	}
	fmt.Fprintf(out, "\n%s removed from worker B's pool:\n  B  GET  /items?page=1     %s\n\n", endpoint, outcome(*r.Lost))

	var per []string
	total := 0
	for _, n := range names {
		per = append(per, fmt.Sprintf("worker %s %d", n, r.Pages[n]))
		total += r.Pages[n]
	}
	var eps []string
	for ep, n := range r.Egress {
		eps = append(eps, fmt.Sprintf("%s %d", ep, n))
	}
	sort.Strings(eps)
	fmt.Fprintf(out, "summary: %d pages fetched with the session (%s); logins %d; site saw %d requests without the session, %d under /admin/; attempts by egress endpoint: %s\n",
		total, strings.Join(per, ", "), r.Site.Logins, r.Site.Anonymous, r.Site.Admin, strings.Join(eps, ", "))
}

// outcome describes what became of a request, without secrets.
func outcome(f fetch) string {
	switch {
	case f.disallowed():
		return "not sent: disallowed by robots.txt"
	case errors.Is(f.Err, session.ErrEgressLost):
		return "not sent: the session's egress endpoint is gone (session.ErrEgressLost), not moved elsewhere"
	case f.Err != nil && f.Status == 0:
		return "failed: " + f.Err.Error()
	}
	s := strconv.Itoa(f.Status)
	if f.Egress != "" {
		s += "  via " + f.Egress + " (" + f.Reason + ")"
	}
	if f.Attempts > 1 {
		s += fmt.Sprintf(", %d attempts", f.Attempts)
	}
	return s
}
