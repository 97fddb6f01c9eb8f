package session

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/sessionstore"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/publicsuffix"
)

// Field names of a record. Cookies live apart, under cookieField names.
const (
	fieldBinding = "bind"
	fieldToken   = "tok"
	headerPrefix = "h/"
)

// Config configures a Manager. The zero value works for a single process:
// an in-memory store and a random key that only this Manager holds.
type Config struct {
	// Store holds the records. If nil, NewMemoryStore(Now).
	Store sessionstore.Store
	// Keyring seals and opens values. If nil, a Keyring of one random key:
	// records then open only through this Manager, so a fleet must share
	// a Keyring.
	Keyring *Keyring
	// Now is the clock for cookie and token expiry and for new records'
	// times. If nil, time.Now is used.
	Now func() time.Time

	// TTL is the life of a new session unless CreateOptions.TTL is set.
	// If zero, one hour; negative: refused by New.
	TTL time.Duration
	// MaxCookies bounds the cookies kept per session; when a new cookie
	// would exceed it, the least recently set cookie is evicted. If zero,
	// 3000; negative: refused by New (browsers keep about as many per
	// profile; there is no separate per-domain bound).
	MaxCookies int
	// MaxCookieSize bounds a cookie's name plus value in bytes; a larger
	// cookie is dropped, leaving any stored cookie of that name in place.
	// If zero, 4096, as browsers; negative: refused by New.
	MaxCookieSize int
	// Timeout bounds each Store call a Jar makes: http.CookieJar methods
	// take no context. If zero, 5 seconds; negative: refused by New.
	Timeout time.Duration
	// PublicSuffixList decides which Domain attributes are public
	// suffixes that may not take cookies. If nil,
	// golang.org/x/net/publicsuffix.List.
	PublicSuffixList cookiejar.PublicSuffixList

	// Refresh obtains a new token for session id, whose token current is
	// about to expire. It runs at most once at a time per session across every
	// Manager sharing the Store, under the session's lease, with a context
	// bounded by RefreshLease. It may send its requests through the
	// session's own Transport (to keep its cookies and egress endpoint):
	// given its context, they go without the token. If nil, tokens are
	// never refreshed and an expired token fails requests with
	// ErrNoRefresher.
	Refresh func(ctx context.Context, id string, current Token) (Token, error)
	// RefreshSkew is how long before its expiry a token is refreshed,
	// at most half the life it had left when stored. If zero, 30 seconds; negative: refused by New.
	RefreshSkew time.Duration
	// RefreshLease is the lease TTL taken to refresh a token, and so the
	// longest a Refresh call may take. If zero, 30 seconds; negative: refused by New.
	RefreshLease time.Duration
	// PollInterval is how often a worker waiting for another worker's
	// refresh reads the store. If zero, 50 milliseconds; negative: refused by New.
	PollInterval time.Duration
	// TokenHeader is the request header that carries the token. If empty,
	// "Authorization".
	TokenHeader string

	// OnError, if set, receives errors that cannot be returned: those a
	// Jar meets (see Jar), and failures to release a refresh lease. Each
	// names the operation ("SetCookies", "Cookies", "release refresh
	// lease") and the session, and never holds a secret value. It is
	// called synchronously, without locks held.
	OnError func(error)
}

// CreateOptions are the initial contents of a new session, given by a
// crawler author to Manager.Create.
type CreateOptions struct {
	// TTL is the session's life. If zero, Config.TTL.
	TTL time.Duration
	// Endpoint binds the session to an egress endpoint; empty leaves it
	// unbound.
	Endpoint string
	// Header holds headers sent with every request of the session.
	Header http.Header
	// Token is the session's first token, if any.
	Token Token
}

// Manager keeps sessions in a Store, sealed under a Keyring: a crawler
// author's entry point to sessions. Write
// methods are fenced by the lease that ctx carries (see WithLease), if it
// is a lease on the same session. A Manager is safe for concurrent use and
// starts no goroutines.
type Manager struct {
	cfg    Config
	store  sessionstore.Store
	keys   *Keyring
	holder string        // prefix of this Manager's lease holder names
	seq    atomic.Uint64 // numbers lease holders

	mu      sync.Mutex         // guards flights
	flights map[string]*flight // refreshes in progress, by session ID
}

// New returns a Manager for c, or an error wrapping
// egresskit.ErrInvalidConfig that names the field c cannot honour.
func New(c Config) (*Manager, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Store == nil {
		c.Store = NewMemoryStore(c.Now)
	}
	if c.Keyring == nil {
		c.Keyring, _ = NewKeyring(generateKey(1)) // a generated key is always valid
	}
	if c.TTL <= 0 {
		c.TTL = time.Hour
	}
	if c.MaxCookies <= 0 {
		c.MaxCookies = 3000
	}
	if c.MaxCookieSize <= 0 {
		c.MaxCookieSize = 4096
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.PublicSuffixList == nil {
		c.PublicSuffixList = publicsuffix.List
	}
	if c.RefreshSkew <= 0 {
		c.RefreshSkew = 30 * time.Second
	}
	if c.RefreshLease <= 0 {
		c.RefreshLease = 30 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.TokenHeader == "" {
		c.TokenHeader = "Authorization"
	}
	c.TokenHeader = http.CanonicalHeaderKey(c.TokenHeader)
	return &Manager{cfg: c, store: c.Store, keys: c.Keyring, holder: sessionkit.NewID()[:11], flights: make(map[string]*flight)}, nil
}

// check refuses negative settings and a TokenHeader that is not a header
// name. The error wraps egresskit.ErrInvalidConfig and names the field.
func (c *Config) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"TTL", c.TTL}, {"Timeout", c.Timeout}, {"RefreshSkew", c.RefreshSkew}, {"RefreshLease", c.RefreshLease}, {"PollInterval", c.PollInterval}} {
		if d.v < 0 {
			return configerr.Field(d.name, "is %v, negative (0 means its default)", d.v)
		}
	}
	switch {
	case c.MaxCookies < 0:
		return configerr.Field("MaxCookies", "is %d, negative (0 means 3000)", c.MaxCookies)
	case c.MaxCookieSize < 0:
		return configerr.Field("MaxCookieSize", "is %d, negative (0 means 4096)", c.MaxCookieSize)
	case c.TokenHeader != "" && !httpguts.ValidHeaderFieldName(c.TokenHeader):
		return configerr.Field("TokenHeader", "is %q, not a header name", c.TokenHeader)
	}
	return nil
}

// Create creates session id with o's contents. It fails with ErrInvalidID,
// an invalid header, ErrExists when a live session holds id, or a Store
// error.
func (m *Manager) Create(ctx context.Context, id string, o CreateOptions) (*Session, error) {
	if err := sessionkit.ValidateID(id); err != nil {
		return nil, err
	}
	ttl := o.TTL
	if ttl <= 0 {
		ttl = m.cfg.TTL
	}
	now := m.cfg.Now()
	r := sessionstore.Record{ID: id, Created: now, Expires: now.Add(ttl), Fields: map[string][]byte{}}
	if o.Endpoint != "" {
		r.Fields[fieldBinding] = m.keys.seal(id, fieldBinding, encodeBinding(o.Endpoint))
	}
	for k, vs := range o.Header {
		if err := checkHeader(k, vs); err != nil {
			return nil, err
		}
		if len(vs) > 0 {
			f := headerPrefix + http.CanonicalHeaderKey(k)
			r.Fields[f] = m.keys.seal(id, f, encodeHeader(vs))
		}
	}
	if o.Token.Value != "" {
		r.Fields[fieldToken] = m.sealToken(id, o.Token, now)
	}
	if err := m.store.Create(ctx, r); err != nil {
		return nil, err
	}
	r.Version = 1
	return m.open(r)
}

// Get returns session id, opened. It fails with ErrInvalidID, ErrNotFound,
// ErrTampered when any stored value does not open, or a Store error.
func (m *Manager) Get(ctx context.Context, id string) (*Session, error) {
	if err := sessionkit.ValidateID(id); err != nil {
		return nil, err
	}
	r, err := m.store.Get(ctx, id, sessionstore.PartFields|sessionstore.PartCookies)
	if err != nil {
		return nil, err
	}
	return m.open(r)
}

// Delete deletes session id. It fails with ErrInvalidID, ErrNotFound,
// ErrStaleLease, or a Store error.
func (m *Manager) Delete(ctx context.Context, id string) error {
	if err := sessionkit.ValidateID(id); err != nil {
		return err
	}
	return m.store.Delete(ctx, id, fence(ctx, id))
}

// Extend makes session id expire ttl from now; a ttl <= 0 ends it. It
// fails with ErrInvalidID, ErrNotFound, ErrStaleLease, or a Store error.
func (m *Manager) Extend(ctx context.Context, id string, ttl time.Duration) error {
	if err := sessionkit.ValidateID(id); err != nil {
		return err
	}
	return m.store.SetExpiry(ctx, id, fence(ctx, id), m.cfg.Now().Add(ttl))
}

func (m *Manager) report(err error) {
	if m.cfg.OnError != nil && err != nil {
		m.cfg.OnError(err)
	}
}

// open opens every value of r into a Session.
func (m *Manager) open(r sessionstore.Record) (*Session, error) {
	s, err := m.openFields(r)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Now()
	entries := make([]*entry, 0, len(r.Cookies))
	for f, blob := range r.Cookies {
		e, err := m.openEntry(r.ID, f, blob)
		if err != nil {
			return nil, err
		}
		if !e.expired(now) {
			entries = append(entries, e)
		}
	}
	sortEntries(entries)
	s.Cookies = make([]*http.Cookie, len(entries))
	for i, e := range entries {
		c := &http.Cookie{Name: e.Name, Value: e.Value, Quoted: e.Quoted, Path: e.Path, Secure: e.Secure, HttpOnly: e.HTTPOnly, SameSite: e.SameSite}
		if !e.HostOnly {
			c.Domain = e.Domain
		}
		if e.Persistent {
			c.Expires = e.Expires
		}
		s.Cookies[i] = c
	}
	return s, nil
}

// openFields opens the fields of r (not its cookies).
func (m *Manager) openFields(r sessionstore.Record) (*Session, error) {
	s := &Session{ID: r.ID, Version: r.Version, Created: r.Created, Expires: r.Expires, Header: http.Header{}, Lease: r.Lease}
	for f, blob := range r.Fields {
		var err error
		switch {
		case f == fieldBinding:
			s.Endpoint, err = openWith(m, r.ID, f, blob, decodeBinding)
		case f == fieldToken:
			s.Token, err = openWith(m, r.ID, f, blob, decodeToken)
		case strings.HasPrefix(f, headerPrefix):
			s.Header[f[len(headerPrefix):]], err = openWith(m, r.ID, f, blob, decodeHeader)
		default:
			// A field of a later version of this package: still verify it.
			_, err = m.keys.open(r.ID, f, blob)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func openWith[T any](m *Manager, id, field string, blob []byte, decode func([]byte) (T, error)) (T, error) {
	var zero T
	pt, err := m.keys.open(id, field, blob)
	if err != nil {
		return zero, err
	}
	v, err := decode(pt)
	if err != nil {
		return zero, fmt.Errorf("%w: field %q: %v", ErrTampered, field, err)
	}
	return v, nil
}

func (m *Manager) openEntry(id, field string, blob []byte) (*entry, error) {
	return openWith(m, id, field, blob, decodeEntry)
}

// sortEntries orders cookies as net/http/cookiejar sends them: longer
// paths first, then older first.
func sortEntries(es []*entry) {
	slices.SortFunc(es, func(a, b *entry) int {
		if len(a.Path) != len(b.Path) {
			return len(b.Path) - len(a.Path)
		}
		if c := a.Creation.Compare(b.Creation); c != 0 {
			return c
		}
		if a.Seq != b.Seq {
			if a.Seq < b.Seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}
