package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/internal/peek"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// Jar is an http.CookieJar, for a crawler author's http.Client, whose
// cookies live in a session's record, so every worker's Jar for the
// session sends the cookies any of them stored. It follows
// net/http/cookiejar: only http and https URLs; host-only cookies when
// there is no Domain attribute; a Domain attribute that does not
// domain-match the host, or is a public suffix other than the host itself,
// makes the cookie ignored; Path defaults to the request path's directory;
// Max-Age wins over Expires; a Max-Age < 0 or an Expires in the past
// deletes; Secure cookies go over https only, or to localhost and loopback
// addresses, which it takes for secure origins as browsers do; cookies are
// sent longest path first, then oldest first. Beyond it: lifetimes are
// capped at 400 days (RFC 6265bis), a cookie larger than
// Config.MaxCookieSize is dropped, and at most Config.MaxCookies are kept,
// the least recently set evicted first.
//
// The deliberate differences from net/http/cookiejar, each pinned by
// TestJarMatchesCookiejar (which otherwise compares the two over
// multi-step sequences: set, overwrite, expire, delete, host-only and
// domain cookies, private suffixes, IPv6, http and https):
//
//   - A Domain attribute above the setting host's registrable domain
//     (eTLD+1, the public suffix list's private section included) is
//     refused: bucket.s3.amazonaws.com may not set Domain=amazonaws.com.
//     cookiejar stores that cookie and sends it only
//     within the setter's registrable domain; the Jar keeps one cookie
//     space per session and so refuses it. Neither sends it to another
//     tenant of the suffix.
//   - An IPv6 host written without a port ("[::1]") is the address ::1,
//     as with a port; cookiejar takes the brackets as part of a host name,
//     so it does not send there what "[::1]:443" set.
//   - The bounds above (size, count, 400-day lifetime).
//
// SetCookies merges each cookie into the store on its own, so concurrent
// Jars of one session lose no cookie. Cookies reads the store on every
// call and opens only the values that changed since its last read.
//
// http.CookieJar methods take no context and return no error. A Jar bounds
// each store call with Config.Timeout; an error makes Cookies return no
// cookies and SetCookies store none of its cookies, and is kept for Err and
// passed to Config.OnError. Check Err after a request that must not have
// gone out without its cookies.
//
// A Jar is safe for concurrent use.
type Jar struct {
	m     *Manager
	id    string
	fence uint64

	mu    sync.Mutex // guards cache and err
	cache map[string]cached
	err   error

	stored, deleted, evicted, tooLarge, badDomain, errs atomic.Uint64
}

var _ http.CookieJar = (*Jar)(nil)

// cached is an opened cookie and the sealed value it came from.
type cached struct {
	blob []byte
	e    *entry
}

// Jar returns a cookie jar for session id. If ctx carries a lease on id
// (WithLease), the Jar fences its writes with it. ctx bounds only this
// call, which checks that the session exists; it is not retained. Jar
// fails with ErrInvalidID, ErrNotFound, or a Store error.
func (m *Manager) Jar(ctx context.Context, id string) (*Jar, error) {
	if err := sessionkit.ValidateID(id); err != nil {
		return nil, err
	}
	if _, err := m.store.Get(ctx, id, 0); err != nil {
		return nil, err
	}
	return &Jar{m: m, id: id, fence: fence(ctx, id), cache: map[string]cached{}}, nil
}

// Err returns the last error a SetCookies or Cookies call met, or nil.
func (j *Jar) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// stats returns the Jar's counters.
func (j *Jar) stats() peek.JarStats {
	return peek.JarStats{
		Stored: j.stored.Load(), Deleted: j.deleted.Load(), Evicted: j.evicted.Load(),
		TooLarge: j.tooLarge.Load(), BadDomain: j.badDomain.Load(), Errors: j.errs.Load(),
	}
}

func init() {
	peek.Stats = func(j any) peek.JarStats { return j.(*Jar).stats() }
	peek.Refresh = func(err error) (string, bool) {
		var re *refreshError
		if errors.As(err, &re) {
			return re.ID, true
		}
		return "", false
	}
}

func (j *Jar) fail(op string, err error) {
	err = fmt.Errorf("session: %s for %q: %w", op, j.id, err)
	j.errs.Add(1)
	j.mu.Lock()
	j.err = err
	j.mu.Unlock()
	j.m.report(err)
}

// requestHost returns the canonical host of u, or ok false for a URL a
// cookie jar ignores.
func requestHost(u *url.URL) (string, bool) {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	host, err := canonicalHost(u.Host)
	return host, err == nil
}

// SetCookies stores the cookies received in a reply for u, in one atomic
// merge (see Jar).
func (j *Jar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	host, ok := requestHost(u)
	if !ok || len(cookies) == 0 {
		return
	}
	m := j.m
	now := m.cfg.Now()
	defPath := defaultPath(u.Path)

	type op struct {
		e      *entry
		remove bool
	}
	ops := make(map[string]op, len(cookies))
	order := make([]string, 0, len(cookies))
	for i, c := range cookies {
		if c == nil {
			continue
		}
		e, remove, err := newEntry(m.cfg.PublicSuffixList, c, host, defPath, now, m.cfg.MaxCookieSize)
		switch {
		case errors.Is(err, errCookieTooLarge):
			j.tooLarge.Add(1)
			continue
		case err != nil:
			j.badDomain.Add(1)
			continue
		}
		e.Seq = uint64(i + 1)
		f := cookieField(j.id, e.Domain, e.Path, e.Name)
		if _, seen := ops[f]; !seen {
			order = append(order, f)
		}
		ops[f] = op{e, remove} // the last cookie of a name wins
	}
	if len(ops) == 0 {
		return
	}

	var merge sessionstore.CookieMerge
	merge.Limit = m.cfg.MaxCookies
	j.mu.Lock()
	for _, f := range order {
		o := ops[f]
		if o.remove {
			merge.Delete = append(merge.Delete, f)
			continue
		}
		if old, ok := j.cache[f]; ok {
			// An update keeps its place in line.
			o.e.Creation, o.e.Seq = old.e.Creation, old.e.Seq
		}
		merge.Set = append(merge.Set, sessionstore.Field{Name: f})
	}
	j.mu.Unlock()
	sealed := make(map[string]cached, len(merge.Set))
	for i := range merge.Set {
		f := merge.Set[i].Name
		e := ops[f].e
		merge.Set[i].Value = m.keys.seal(j.id, f, encodeEntry(e))
		sealed[f] = cached{merge.Set[i].Value, e}
	}

	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	evicted, err := m.store.MergeCookies(ctx, j.id, j.fence, merge)
	if err != nil {
		j.fail("SetCookies", err)
		return
	}
	j.stored.Add(uint64(len(merge.Set)))
	j.deleted.Add(uint64(len(merge.Delete)))
	j.evicted.Add(uint64(evicted))
	j.mu.Lock()
	for f, c := range sealed {
		j.cache[f] = c
	}
	for _, f := range merge.Delete {
		delete(j.cache, f)
	}
	j.mu.Unlock()
}

// Cookies returns the cookies to send in a request to u (see Jar).
func (j *Jar) Cookies(u *url.URL) []*http.Cookie {
	host, ok := requestHost(u)
	if !ok {
		return nil
	}
	m := j.m
	https := u.Scheme == "https"
	path := u.Path
	if path == "" {
		path = "/"
	}

	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	rec, err := m.store.Get(ctx, j.id, sessionstore.PartCookies)
	if err != nil {
		j.fail("Cookies", err)
		return nil
	}
	entries, err := j.entries(rec.Cookies)
	if err != nil {
		j.fail("Cookies", err)
		return nil
	}

	now := m.cfg.Now()
	var send []*entry
	var prune []sessionstore.Field
	for f, e := range entries {
		if e.expired(now) {
			prune = append(prune, sessionstore.Field{Name: f, Value: rec.Cookies[f]})
			continue
		}
		if e.shouldSend(https, host, path) {
			send = append(send, e)
		}
	}
	if len(prune) > 0 {
		// Remove expired cookies unless another worker re-set them meanwhile.
		if _, err := m.store.MergeCookies(ctx, j.id, j.fence, sessionstore.CookieMerge{Prune: prune}); err != nil {
			j.fail("Cookies", err)
		}
	}
	if len(send) == 0 {
		return nil
	}
	sortEntries(send)
	out := make([]*http.Cookie, len(send))
	for i, e := range send {
		out[i] = &http.Cookie{Name: e.Name, Value: e.Value, Quoted: e.Quoted}
	}
	return out
}

// entries opens stored cookies, reusing the ones already opened whose
// sealed value has not changed, and makes them the new cache.
func (j *Jar) entries(stored map[string][]byte) (map[string]*entry, error) {
	out := make(map[string]*entry, len(stored))
	var fresh []string
	j.mu.Lock()
	for f, blob := range stored {
		if c, ok := j.cache[f]; ok && bytes.Equal(c.blob, blob) {
			out[f] = c.e
		} else {
			fresh = append(fresh, f)
		}
	}
	j.mu.Unlock()

	opened := make(map[string]cached, len(fresh))
	for _, f := range fresh {
		e, err := j.m.openEntry(j.id, f, stored[f])
		if err != nil {
			return nil, err
		}
		opened[f] = cached{stored[f], e}
		out[f] = e
	}

	j.mu.Lock()
	for f := range j.cache {
		if _, ok := stored[f]; !ok {
			delete(j.cache, f)
		}
	}
	for f, c := range opened {
		j.cache[f] = c
	}
	j.mu.Unlock()
	return out, nil
}
