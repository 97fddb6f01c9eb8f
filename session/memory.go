package session

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// memoryStore is the Store NewMemoryStore returns.
type memoryStore struct {
	now func() time.Time

	mu        sync.Mutex // guards recs and sweepAt
	recs      map[string]*memRecord
	sweepAt   int // sweep expired records when len(recs) reaches this
	minSweepN int
}

var _ sessionstore.Store = (*memoryStore)(nil)

type memRecord struct {
	created, expires time.Time
	version          uint64
	fields           map[string][]byte
	cookies          map[string]*list.Element // of *memCookie
	order            *list.List               // least recently set first
	lease            sessionstore.Lease       // Token 0: none granted or released
	lastToken        uint64
}

type memCookie struct {
	name string
	blob []byte
}

// NewMemoryStore returns an empty in-process Store, for a crawler author's
// single process (several Managers may share it) or tests. now is the
// clock that decides the expiry of records and leases; if nil, time.Now.
// Expired records are dropped when touched and swept in bulk as the store
// grows, so memory follows the number of live sessions. It is safe for
// concurrent use.
func NewMemoryStore(now func() time.Time) sessionstore.Store {
	if now == nil {
		now = time.Now
	}
	return &memoryStore{now: now, recs: make(map[string]*memRecord), sweepAt: 1024, minSweepN: 1024}
}

// live returns the live record id, dropping it if expired. s.mu is held.
func (s *memoryStore) live(id string, now time.Time) (*memRecord, error) {
	r := s.recs[id]
	if r == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if !now.Before(r.expires) {
		delete(s.recs, id)
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return r, nil
}

// checkFence applies the fencing rule of Store. s.mu is held.
func (r *memRecord) checkFence(id string, fence uint64) error {
	if fence != 0 && fence != r.lastToken {
		return fmt.Errorf("%w: %q: fence %d, newest lease %d", ErrStaleLease, id, fence, r.lastToken)
	}
	return nil
}

// begin validates a call and returns the live record under s.mu, which
// the caller unlocks.
func (s *memoryStore) begin(ctx context.Context, id string) (*memRecord, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, err
	}
	if err := sessionkit.ValidateID(id); err != nil {
		return nil, time.Time{}, err
	}
	now := s.now()
	s.mu.Lock()
	r, err := s.live(id, now)
	if err != nil {
		s.mu.Unlock()
		return nil, now, err
	}
	return r, now, nil
}

// beginFenced is begin followed by the fence check: on success s.mu is
// held and the write may proceed; on failure it is released.
func (s *memoryStore) beginFenced(ctx context.Context, id string, fence uint64) (*memRecord, time.Time, error) {
	r, now, err := s.begin(ctx, id)
	if err != nil {
		return nil, now, err
	}
	if err := r.checkFence(id, fence); err != nil {
		s.mu.Unlock()
		return nil, now, err
	}
	return r, now, nil
}

// Create implements Store.
func (s *memoryStore) Create(ctx context.Context, rec sessionstore.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sessionkit.ValidateID(rec.ID); err != nil {
		return err
	}
	now := s.now()
	if !now.Before(rec.Expires) {
		return fmt.Errorf("session: create %q: expiry %s is not in the future", rec.ID, rec.Expires.UTC().Format(time.RFC3339))
	}
	r := &memRecord{
		created: rec.Created, expires: rec.Expires, version: 1,
		fields:  make(map[string][]byte, len(rec.Fields)),
		cookies: make(map[string]*list.Element, len(rec.Cookies)),
		order:   list.New(),
	}
	for k, v := range rec.Fields {
		r.fields[k] = bytes.Clone(v)
	}
	for k, v := range rec.Cookies {
		r.cookies[k] = r.order.PushBack(&memCookie{name: k, blob: bytes.Clone(v)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.live(rec.ID, now); err == nil {
		return fmt.Errorf("%w: %q", ErrExists, rec.ID)
	}
	s.recs[rec.ID] = r
	if len(s.recs) >= s.sweepAt {
		for id, old := range s.recs {
			if !now.Before(old.expires) {
				delete(s.recs, id)
			}
		}
		s.sweepAt = max(2*len(s.recs), s.minSweepN)
	}
	return nil
}

// Get implements Store.
func (s *memoryStore) Get(ctx context.Context, id string, parts sessionstore.Parts) (sessionstore.Record, error) {
	r, now, err := s.begin(ctx, id)
	if err != nil {
		return sessionstore.Record{}, err
	}
	defer s.mu.Unlock()
	out := sessionstore.Record{ID: id, Version: r.version, Created: r.created, Expires: r.expires}
	if live(r.lease, now) {
		out.Lease = r.lease
	}
	if parts&sessionstore.PartFields != 0 {
		out.Fields = make(map[string][]byte, len(r.fields))
		for k, v := range r.fields {
			out.Fields[k] = v // values are never modified in place
		}
	}
	if parts&sessionstore.PartCookies != 0 {
		out.Cookies = make(map[string][]byte, len(r.cookies))
		for k, e := range r.cookies {
			out.Cookies[k] = e.Value.(*memCookie).blob
		}
	}
	return out, nil
}

// Delete implements Store.
func (s *memoryStore) Delete(ctx context.Context, id string, fence uint64) error {
	_, _, err := s.beginFenced(ctx, id, fence)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.recs, id)
	return nil
}

// SetExpiry implements Store.
func (s *memoryStore) SetExpiry(ctx context.Context, id string, fence uint64, expires time.Time) error {
	r, now, err := s.beginFenced(ctx, id, fence)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if !now.Before(expires) {
		delete(s.recs, id)
		return nil
	}
	r.expires = expires
	r.version++
	return nil
}

// SetFields implements Store.
func (s *memoryStore) SetFields(ctx context.Context, id string, fence uint64, w sessionstore.FieldWrite) error {
	r, _, err := s.beginFenced(ctx, id, fence)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if w.IfAbsent {
		for _, f := range w.Set {
			if _, ok := r.fields[f.Name]; ok {
				return fmt.Errorf("%w: %q: field %q exists", sessionstore.ErrConflict, id, f.Name)
			}
		}
	}
	for _, f := range w.Set {
		r.fields[f.Name] = bytes.Clone(f.Value)
	}
	for _, name := range w.Delete {
		delete(r.fields, name)
	}
	r.version++
	return nil
}

// MergeCookies implements Store.
func (s *memoryStore) MergeCookies(ctx context.Context, id string, fence uint64, m sessionstore.CookieMerge) (int, error) {
	r, _, err := s.beginFenced(ctx, id, fence)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	for _, f := range m.Set {
		blob := bytes.Clone(f.Value)
		if e, ok := r.cookies[f.Name]; ok {
			e.Value.(*memCookie).blob = blob
			r.order.MoveToBack(e)
			continue
		}
		r.cookies[f.Name] = r.order.PushBack(&memCookie{name: f.Name, blob: blob})
	}
	for _, name := range m.Delete {
		r.removeCookie(name)
	}
	for _, f := range m.Prune {
		if e, ok := r.cookies[f.Name]; ok && bytes.Equal(e.Value.(*memCookie).blob, f.Value) {
			r.removeCookie(f.Name)
		}
	}
	evicted := 0
	for m.Limit > 0 && len(r.cookies) > m.Limit {
		r.removeCookie(r.order.Front().Value.(*memCookie).name)
		evicted++
	}
	r.version++
	return evicted, nil
}

func (r *memRecord) removeCookie(name string) {
	if e, ok := r.cookies[name]; ok {
		r.order.Remove(e)
		delete(r.cookies, name)
	}
}

// Acquire implements Store.
func (s *memoryStore) Acquire(ctx context.Context, id, holder string, ttl time.Duration) (sessionstore.Lease, error) {
	if ttl <= 0 {
		return sessionstore.Lease{}, fmt.Errorf("session: acquire %q: lease ttl %v is not positive", id, ttl)
	}
	r, now, err := s.begin(ctx, id)
	if err != nil {
		return sessionstore.Lease{}, err
	}
	defer s.mu.Unlock()
	if live(r.lease, now) {
		if r.lease.Holder != holder {
			return sessionstore.Lease{}, &sessionkit.LeaseHeldError{ID: id, Expires: r.lease.Expires}
		}
		r.lease.Expires = now.Add(ttl)
		return r.lease, nil
	}
	r.lastToken++
	r.lease = sessionstore.Lease{ID: id, Holder: holder, Token: r.lastToken, Expires: now.Add(ttl)}
	return r.lease, nil
}

// Release implements Store.
func (s *memoryStore) Release(ctx context.Context, l sessionstore.Lease) error {
	r, _, err := s.begin(ctx, l.ID)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l.Token != r.lastToken {
		return fmt.Errorf("%w: %q: release of lease %d, newest lease %d", ErrStaleLease, l.ID, l.Token, r.lastToken)
	}
	if r.lease.Token == l.Token {
		r.lease = sessionstore.Lease{}
	}
	return nil
}

// Len returns the number of records the store holds, expired ones not
// yet dropped included.
func (s *memoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}
