// Package sessionstore is the contract between package session and the
// stores that keep its records: what a store implementer writes against
// (redisstore.NewSessionStore and session.NewMemoryStore implement it).
// A crawler author does not need it beyond passing a Store to
// session.Config; package sessiontest holds the scenarios every Store must
// pass.
package sessionstore

import (
	"context"
	"errors"
	"time"
)

// ErrConflict reports a conditional write (FieldWrite.IfAbsent) that found
// a field already present; nothing was written. A store implementer
// returns it; package session handles it.
var ErrConflict = errors.New("session: conflicting write")

// Store persists session records for a fleet of workers; a store implementer
// provides one, a crawler author passes it to session.Config. Field and cookie
// values reach a Store sealed by a Keyring; a Store never sees plaintext and
// never interprets a value. Its job is atomicity, expiry and fencing.
//
// Every method is one atomic step: an implementation backed by a shared
// server (Redis) performs each call as one script, and an in-process
// implementation under one lock. No method is a read-modify-write of a
// whole record, so concurrent writers of different fields or cookies never
// lose each other's updates.
//
// Time. A Store decides expiry with its own clock (the Now of its config), not
// with the caller's. A record whose Expires is not after now is gone: every
// method treats it as absent (session.ErrNotFound), and Create may replace it.
// A lease whose Expires is not after now is not live.
//
// Fencing. Each record counts the leases granted on it; Acquire returns the new
// count as the Lease's Token, so tokens grow strictly per session. Methods that
// write take a fence: 0 is an unfenced write, always accepted; a nonzero fence
// is accepted when no lease with a greater token has been granted and fails
// with session.ErrStaleLease otherwise — and also when the fence names a token
// never granted. A fenced writer that lost its lease to another holder can
// therefore never overwrite that holder's writes, while a holder whose lease
// merely expired, with no successor, may still write.
//
// Versions. Each record has a Version, 1 after Create, increased by one by
// every successful SetFields, MergeCookies and SetExpiry call, even one
// that happens to change nothing; Acquire and Release leave it alone.
//
// IDs have been validated by package session (1 to 128 bytes of ASCII
// letters, digits and - _ . : @ ~ + =); implementations may check them
// again and must fail with an error wrapping session.ErrInvalidID rather
// than use an invalid one. Byte slices passed in must not be retained
// without copying; slices and maps returned must not be modified by the
// caller.
//
// Errors: session.ErrNotFound when the record is absent or expired,
// session.ErrStaleLease for a rejected fence, the context's error when ctx is
// done before the call takes effect, or an error from the backend. A method
// that returns an error changed nothing.
type Store interface {
	// Create stores r under r.ID, live until r.Expires, with Version 1 and no
	// lease. It fails with session.ErrExists when a live record holds r.ID; an
	// expired one is replaced, lease count included. r.Version and r.Lease are
	// ignored.
	Create(ctx context.Context, r Record) error

	// Get returns the record id: always its metadata (ID, Version,
	// Created, Expires) and its live Lease, if any; Fields when parts has
	// PartFields; Cookies when parts has PartCookies. The parts returned
	// are one consistent snapshot.
	Get(ctx context.Context, id string, parts Parts) (Record, error)

	// Delete removes the record id, its fields, cookies and lease.
	Delete(ctx context.Context, id string, fence uint64) error

	// SetExpiry sets when the record id expires. A time not after now
	// removes it.
	SetExpiry(ctx context.Context, id string, fence uint64, expires time.Time) error

	// SetFields sets and deletes fields of the record id, all or nothing.
	// With w.IfAbsent, it fails with ErrConflict and writes nothing when
	// any field of w.Set is present. Deleting an absent field is not an
	// error.
	SetFields(ctx context.Context, id string, fence uint64, w FieldWrite) error

	// MergeCookies applies m to the cookies of the record id: each cookie
	// of m.Set is stored under its own name, replacing only that cookie
	// and becoming the most recently set; each of m.Delete is removed;
	// each of m.Prune is removed only if its stored value is byte-equal to
	// the given one (so a cookie re-set meanwhile survives). Then, while
	// more than m.Limit cookies are stored (when m.Limit > 0), the least
	// recently set is evicted. Set, Delete and Prune apply in that order;
	// a name in Set and Delete ends up deleted. It returns how many
	// cookies were evicted.
	MergeCookies(ctx context.Context, id string, fence uint64, m CookieMerge) (evicted int, err error)

	// Acquire grants holder the lease on the record id until now+ttl.
	// When no lease is live, it grants a new lease whose Token is one more
	// than the last granted. When holder's own lease is live, it extends
	// it and keeps its Token. When another holder's lease is live, it
	// fails with an error wrapping session.ErrLeaseHeld that names that
	// lease's expiry. ttl must be positive.
	Acquire(ctx context.Context, id, holder string, ttl time.Duration) (Lease, error)

	// Release ends lease l early. It is a no-op when l is no longer live and no
	// newer lease was granted; it fails with session.ErrStaleLease when a newer
	// lease was granted, leaving that lease in place.
	Release(ctx context.Context, l Lease) error
}

// Parts selects what Get returns beyond a record's metadata: zero, or
// PartFields, PartCookies or both (PartFields|PartCookies).
type Parts uint8

// Parts of a record.
const (
	// PartFields selects Record.Fields.
	PartFields Parts = 1 << iota
	// PartCookies selects Record.Cookies.
	PartCookies
)

// Record is a session as a Store holds it: metadata in the clear, every
// value sealed.
type Record struct {
	// ID names the session.
	ID string
	// Version counts the changes to the record (see Store).
	Version uint64
	// Created is when the session was created; Expires when the Store
	// removes it.
	Created, Expires time.Time
	// Fields maps a field name to its sealed value: the session's
	// headers, token and egress binding.
	Fields map[string][]byte
	// Cookies maps a cookie's field name (a hash of its domain, path and
	// name) to its sealed value.
	Cookies map[string][]byte
	// Lease is the live lease, zero when none is live.
	Lease Lease
}

// Field is one named sealed value, as package session writes it.
type Field struct {
	Name  string
	Value []byte
}

// FieldWrite is one atomic change to a record's fields.
type FieldWrite struct {
	// Set stores each field, replacing any value it had.
	Set []Field
	// Delete removes each named field.
	Delete []string
	// IfAbsent makes the write conditional: if any field of Set exists,
	// nothing is written and the call fails with ErrConflict.
	IfAbsent bool
}

// CookieMerge is one atomic change to a record's cookies.
type CookieMerge struct {
	// Set stores each cookie in order, the last one becoming the most
	// recently set.
	Set []Field
	// Delete removes each named cookie.
	Delete []string
	// Prune removes each cookie whose stored value equals Value.
	Prune []Field
	// Limit bounds the number of cookies kept; the least recently set are
	// evicted first. Zero means no bound.
	Limit int
}

// Lease is exclusive use of a session among the workers that take leases:
// a crawler author gets one from session.Manager.Acquire and fences writes
// with it (session.WithLease); a Store grants and records it.
type Lease struct {
	// ID is the session.
	ID string
	// Holder names the holder; unique per Acquire from a Manager.
	Holder string
	// Token is the fencing token: writes fenced with it are rejected once
	// a lease with a greater token is granted.
	Token uint64
	// Expires is when the lease ends unless renewed.
	Expires time.Time
}
