package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
	"github.com/redis/go-redis/v9"
)

// SessionConfig configures NewSessionStore. The zero value works.
type SessionConfig struct {
	// Prefix starts every key ("PREFIX:session:{ID}:meta"). It must not
	// contain spaces, control characters or braces. Default (""):
	// "egresskit".
	Prefix string

	// Now is the clock that decides the expiry of records and leases.
	// Nil (the default, and the only sensible setting for a fleet) takes
	// the time from the Redis server (TIME, inside every script), so
	// workers with skewed clocks agree. Tests set it to a fake clock,
	// which is then passed to every script.
	Now func() time.Time
}

// sessionStore is the sessionstore.Store NewSessionStore returns.
type sessionStore struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time
	sc     sessionScripts
}

var _ sessionstore.Store = (*sessionStore)(nil)

// NewSessionStore returns the Redis implementation of sessionstore.Store,
// for a crawler author whose workers share sessions (pass it to
// session.Config.Store), over client (a *redis.Client, a Sentinel failover
// client, a *redis.ClusterClient or a *redis.Ring): one record per session,
// shared by every such store that uses the same Redis and Prefix, with the
// semantics of session.NewMemoryStore (both pass the scenarios of package
// sessiontest). It does not contact Redis. It fails with an error wrapping
// egresskit.ErrInvalidConfig for an unusable SessionConfig.Prefix, or an
// error for a nil client.
//
// # Keys
//
// A session's record is four keys, all carrying the session ID as their
// Cluster hash tag, so each method touches one slot:
//
//	PREFIX:session:{ID}:meta     hash: version, created, expires, lease
//	PREFIX:session:{ID}:fields   hash: field name → sealed value
//	PREFIX:session:{ID}:cookies  hash: cookie field name → sealed value
//	PREFIX:session:{ID}:order    sorted set: cookie field names by when set
//
// Values reach the store sealed by the session.Manager's Keyring, and the
// cookie field names are hashes; the store never holds a cookie, header
// or token in the clear. Session IDs cannot contain braces
// (session.ValidateID), so the hash tag is exactly the ID, and these keys
// never collide with a Store's host keys ("PREFIX:{HOST}:st").
//
// # Atomicity and time
//
// Every method is one Lua script (EVALSHA; go-redis falls back to EVAL,
// which caches the script again, when the server answers NOSCRIPT after a
// restart or SCRIPT FLUSH). A script checks expiry, the fence and every
// condition against the record as it is, then writes; nothing is read,
// modified and written back from Go. MergeCookies sets each cookie in its
// own hash field and stamps it in the order set, so concurrent merges of
// different cookies never lose one another, and eviction at
// sessionstore.CookieMerge.Limit removes the least recently set.
//
// Expiry is decided inside the scripts against the store's clock (see
// SessionConfig.Now). Each key also carries a Redis TTL of the record's
// remaining life, so expired sessions vanish from Redis without a sweep.
//
// # Errors
//
// Besides the errors of sessionstore.Store, the methods return an error
// wrapping ErrCorrupt when a key of the session holds something this
// package did not write — another type, or metadata that does not parse —
// and change nothing; an error wrapping ErrScript for a script the server
// refused; and an error wrapping ErrUnavailable when Redis cannot be
// reached or cannot serve. When ctx ends before the reply, the error is
// ctx's; the script may then have run or not, as with any network store.
// The store has no fallback: sessions are shared state that a worker
// cannot make up locally.
//
// The store is safe for concurrent use and starts no goroutine. It
// does not own the client: close the client when done. Bound calls with
// ctx deadlines only if the client honours them (go-redis:
// ContextTimeoutEnabled).
func NewSessionStore(client redis.UniversalClient, cfg SessionConfig) (sessionstore.Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = defaultPrefix
	}
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	return &sessionStore{client: client, prefix: cfg.Prefix, now: cfg.Now, sc: newSessionScripts()}, nil
}

// sessionKeys are the Redis keys of one session's record.
type sessionKeys struct {
	// Meta is the hash of the record's version, times and lease.
	Meta string
	// Fields is the hash of the record's sealed fields.
	Fields string
	// Cookies is the hash of the record's sealed cookies.
	Cookies string
	// Order is the sorted set of cookie names by when they were set.
	Order string
}

func (k sessionKeys) list() []string { return []string{k.Meta, k.Fields, k.Cookies, k.Order} }

// keysOf returns the Redis keys of session id. It fails with an error
// wrapping session.ErrInvalidID.
func (s *sessionStore) keysOf(id string) (sessionKeys, error) {
	if err := sessionkit.ValidateID(id); err != nil {
		return sessionKeys{}, err
	}
	base := s.prefix + ":session:{" + id + "}:"
	return sessionKeys{Meta: base + "meta", Fields: base + "fields", Cookies: base + "cookies", Order: base + "order"}, nil
}

// Create implements sessionstore.Store.
func (s *sessionStore) Create(ctx context.Context, r sessionstore.Record) error {
	k, err := s.keys(ctx, r.ID)
	if err != nil {
		return err
	}
	exp, err := expiryArg("create", r.ID, r.Expires)
	if err != nil {
		return err
	}
	args := make([]any, 0, 6+2*len(r.Fields)+2*len(r.Cookies))
	args = append(args, s.nowArg(), timeArg(r.Created), exp, strconv.Itoa(len(r.Fields)))
	for name, v := range r.Fields {
		args = append(args, name, v)
	}
	args = append(args, strconv.Itoa(len(r.Cookies)))
	for name, v := range r.Cookies {
		args = append(args, name, v)
	}
	reply, err := s.run(ctx, "create", s.sc.create, k, r.ID, args)
	if err != nil {
		return err
	}
	switch status(reply) {
	case sessOK:
		return nil
	case sessExists:
		return fmt.Errorf("%w: %q", session.ErrExists, r.ID)
	case sessPast:
		return fmt.Errorf("redisstore: create %q: expiry %s is not in the future", r.ID, r.Expires.UTC().Format(time.RFC3339Nano))
	}
	return unexpected("create", r.ID, reply)
}

// Get implements sessionstore.Store.
func (s *sessionStore) Get(ctx context.Context, id string, parts sessionstore.Parts) (sessionstore.Record, error) {
	k, err := s.keys(ctx, id)
	if err != nil {
		return sessionstore.Record{}, err
	}
	reply, err := s.run(ctx, "get", s.sc.get, k, id,
		[]any{s.nowArg(), flag(parts&sessionstore.PartFields != 0), flag(parts&sessionstore.PartCookies != 0)})
	if err != nil {
		return sessionstore.Record{}, err
	}
	switch status(reply) {
	case sessOK:
		return decodeRecord(id, k, parts, reply)
	case sessNotFound:
		return sessionstore.Record{}, notFound(id)
	}
	return sessionstore.Record{}, unexpected("get", id, reply)
}

// Delete implements sessionstore.Store.
func (s *sessionStore) Delete(ctx context.Context, id string, fence uint64) error {
	k, err := s.keys(ctx, id)
	if err != nil {
		return err
	}
	reply, err := s.run(ctx, "delete", s.sc.delete, k, id, []any{s.nowArg(), fence})
	if err != nil {
		return err
	}
	return writeResult("delete", id, fence, reply)
}

// SetExpiry implements sessionstore.Store.
func (s *sessionStore) SetExpiry(ctx context.Context, id string, fence uint64, expires time.Time) error {
	k, err := s.keys(ctx, id)
	if err != nil {
		return err
	}
	exp, err := expiryArg("set expiry of", id, expires)
	if err != nil {
		return err
	}
	reply, err := s.run(ctx, "setexpiry", s.sc.setExpiry, k, id, []any{s.nowArg(), fence, exp})
	if err != nil {
		return err
	}
	return writeResult("setexpiry", id, fence, reply)
}

// SetFields implements sessionstore.Store.
func (s *sessionStore) SetFields(ctx context.Context, id string, fence uint64, w sessionstore.FieldWrite) error {
	k, err := s.keys(ctx, id)
	if err != nil {
		return err
	}
	args := make([]any, 0, 6+2*len(w.Set)+len(w.Delete))
	args = append(args, s.nowArg(), fence, flag(w.IfAbsent), len(w.Set))
	for _, f := range w.Set {
		args = append(args, f.Name, f.Value)
	}
	args = append(args, len(w.Delete))
	for _, name := range w.Delete {
		args = append(args, name)
	}
	reply, err := s.run(ctx, "setfields", s.sc.setFields, k, id, args)
	if err != nil {
		return err
	}
	if status(reply) == sessConflict {
		name := "?"
		if i, ok := intAt(reply, 1); ok && i >= 1 && i <= int64(len(w.Set)) {
			name = w.Set[i-1].Name
		}
		return fmt.Errorf("%w: %q: field %q exists", sessionstore.ErrConflict, id, name)
	}
	return writeResult("setfields", id, fence, reply)
}

// MergeCookies implements sessionstore.Store.
func (s *sessionStore) MergeCookies(ctx context.Context, id string, fence uint64, m sessionstore.CookieMerge) (int, error) {
	k, err := s.keys(ctx, id)
	if err != nil {
		return 0, err
	}
	args := make([]any, 0, 7+2*len(m.Set)+len(m.Delete)+2*len(m.Prune))
	args = append(args, s.nowArg(), fence, max(m.Limit, 0), len(m.Set))
	for _, f := range m.Set {
		args = append(args, f.Name, f.Value)
	}
	args = append(args, len(m.Delete))
	for _, name := range m.Delete {
		args = append(args, name)
	}
	args = append(args, len(m.Prune))
	for _, f := range m.Prune {
		args = append(args, f.Name, f.Value)
	}
	reply, err := s.run(ctx, "merge", s.sc.merge, k, id, args)
	if err != nil {
		return 0, err
	}
	if err := writeResult("merge", id, fence, reply); err != nil {
		return 0, err
	}
	_, ok1 := uintAt(reply, 1) // the version after the merge
	ev, ok2 := intAt(reply, 2)
	if !ok1 || !ok2 || ev < 0 {
		return 0, unexpected("merge", id, reply)
	}
	return int(ev), nil
}

// Acquire implements sessionstore.Store.
func (s *sessionStore) Acquire(ctx context.Context, id, holder string, ttl time.Duration) (sessionstore.Lease, error) {
	if ttl <= 0 {
		return sessionstore.Lease{}, fmt.Errorf("redisstore: acquire %q: lease ttl %v is not positive", id, ttl)
	}
	k, err := s.keys(ctx, id)
	if err != nil {
		return sessionstore.Lease{}, err
	}
	us := (ttl + time.Microsecond - 1) / time.Microsecond // round up: a lease is never shorter than asked
	reply, err := s.run(ctx, "acquire", s.sc.acquire, k, id, []any{s.nowArg(), holder, int64(us)})
	if err != nil {
		return sessionstore.Lease{}, err
	}
	switch status(reply) {
	case sessOK:
		tok, ok1 := uintAt(reply, 1)
		exp, ok2 := intAt(reply, 2)
		if !ok1 || !ok2 {
			break
		}
		return sessionstore.Lease{ID: id, Holder: holder, Token: tok, Expires: time.UnixMicro(exp)}, nil
	case sessHeld:
		exp, ok := intAt(reply, 1)
		if !ok {
			break
		}
		return sessionstore.Lease{}, &sessionkit.LeaseHeldError{ID: id, Expires: time.UnixMicro(exp)}
	case sessNotFound:
		return sessionstore.Lease{}, notFound(id)
	}
	return sessionstore.Lease{}, unexpected("acquire", id, reply)
}

// Release implements sessionstore.Store.
func (s *sessionStore) Release(ctx context.Context, l sessionstore.Lease) error {
	k, err := s.keys(ctx, l.ID)
	if err != nil {
		return err
	}
	reply, err := s.run(ctx, "release", s.sc.release, k, l.ID, []any{s.nowArg(), l.Token})
	if err != nil {
		return err
	}
	if status(reply) == sessStale {
		newest, _ := uintAt(reply, 1)
		return fmt.Errorf("%w: %q: release of lease %d, newest lease %d", session.ErrStaleLease, l.ID, l.Token, newest)
	}
	return writeResult("release", l.ID, l.Token, reply)
}

// keys checks ctx and id and returns id's keys.
func (s *sessionStore) keys(ctx context.Context, id string) (sessionKeys, error) {
	if err := ctx.Err(); err != nil {
		return sessionKeys{}, err
	}
	return s.keysOf(id)
}

// nowArg is a script's ARGV[1]: empty for Redis time, else the clock.
func (s *sessionStore) nowArg() string {
	if s.now == nil {
		return ""
	}
	return strconv.FormatInt(s.now().UnixMicro(), 10)
}

// run runs sc on k. Its errors are ctx's, ErrCorrupt, ErrScript and
// ErrUnavailable.
func (s *sessionStore) run(ctx context.Context, op string, sc *redis.Script, k sessionKeys, id string, args []any) ([]any, error) {
	v, err := sc.Run(ctx, s.client, k.list(), args...).Result()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("redisstore: session %s %q: %w", op, id, cerr)
		}
		return nil, sessionError(op, k, err)
	}
	reply, ok := v.([]any)
	if !ok || len(reply) == 0 {
		return nil, unexpected(op, id, v)
	}
	return reply, nil
}

// maxMicros is the latest time a script can hold exactly (2^53 µs, the
// year 2255).
const maxMicros = 1<<53 - 1

// expiryArg formats an expiry for a script. Times before 1970 become 0
// (already past, whatever the clock); times past the year 2255 are
// rejected.
func expiryArg(op, id string, t time.Time) (string, error) {
	if t.Before(time.Unix(0, 0)) {
		return "0", nil
	}
	us := t.UnixMicro()
	if us > maxMicros {
		return "", fmt.Errorf("redisstore: %s %q: expiry %s is out of range", op, id, t.UTC().Format(time.RFC3339))
	}
	return strconv.FormatInt(us, 10), nil
}

// timeArg formats a time kept opaque by the scripts; "" is the zero time.
func timeArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func notFound(id string) error { return fmt.Errorf("%w: %q", session.ErrNotFound, id) }

// writeResult turns the status of a write script into an error.
func writeResult(op, id string, fence uint64, reply []any) error {
	switch status(reply) {
	case sessOK:
		return nil
	case sessNotFound:
		return notFound(id)
	case sessStale:
		newest, _ := uintAt(reply, 1)
		return fmt.Errorf("%w: %q: fence %d, newest lease %d", session.ErrStaleLease, id, fence, newest)
	}
	return unexpected(op, id, reply)
}

// sessionError sorts an error of a script run into ErrCorrupt,
// ErrScript or ErrUnavailable.
func sessionError(op string, k sessionKeys, err error) error {
	op = "session " + op
	var re redis.Error
	if !errors.As(err, &re) {
		return &unavailableError{Op: op, Cause: err}
	}
	msg := re.Error()
	if rest, ok := strings.CutPrefix(msg, sessionCorruptPrefix); ok {
		fs := strings.Fields(rest)
		if len(fs) < 2 {
			return &scriptError{Op: op, Msg: msg}
		}
		key := k.Meta
		switch fs[0] {
		case "fields":
			key = k.Fields
		case "cookies":
			key = k.Cookies
		case "order":
			key = k.Order
		}
		return &corruptError{Key: key, Reason: fs[1]}
	}
	switch {
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return &corruptError{Key: k.Meta, Reason: "wrongtype"}
	case strings.HasPrefix(msg, "ERR"), strings.HasPrefix(msg, "NOSCRIPT"):
		return &scriptError{Op: op, Msg: msg}
	}
	// LOADING, BUSY, MASTERDOWN, READONLY, CLUSTERDOWN, TRYAGAIN, OOM,
	// NOAUTH, ...: the server cannot serve us now.
	return &unavailableError{Op: op, Cause: err}
}

// sessionCorruptPrefix starts the error replies of the scripts' corrupt().
const sessionCorruptPrefix = "EGRESSKIT_SESSION_CORRUPT "
