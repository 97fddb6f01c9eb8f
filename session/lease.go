package session

import (
	"context"
	"strconv"
	"time"
)

type leaseKey struct{}

// WithLease returns a context carrying l. Manager methods given it fence
// their writes to session l.ID with l.Token, so they fail with
// ErrStaleLease once another worker holds a newer lease; a Jar made with
// it fences its cookie writes; a Transport refreshes tokens under it
// instead of taking a lease of its own.
func WithLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseFrom returns the lease ctx carries, if any.
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// fence returns the fencing token ctx carries for session id, or 0.
func fence(ctx context.Context, id string) uint64 {
	if l, ok := LeaseFrom(ctx); ok && l.ID == id {
		return l.Token
	}
	return 0
}

// Acquire takes the lease on session id for ttl under a holder name unique
// to this call. It fails with ErrInvalidID, ErrNotFound, a *LeaseHeldError
// (errors.Is ErrLeaseHeld), or a Store error.
func (m *Manager) Acquire(ctx context.Context, id string, ttl time.Duration) (Lease, error) {
	if err := ValidateID(id); err != nil {
		return Lease{}, err
	}
	return m.store.Acquire(ctx, id, m.newHolder(), ttl)
}

// Renew extends l by ttl from now. If l expired and no one took the lease
// meanwhile, Renew grants l's holder a new lease with a new Token: fence
// later writes with the returned Lease. It fails like Acquire.
func (m *Manager) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	return m.store.Acquire(ctx, l.ID, l.Holder, ttl)
}

// Release ends l. It fails with ErrStaleLease when a newer lease was
// granted, ErrNotFound, or a Store error.
func (m *Manager) Release(ctx context.Context, l Lease) error {
	return m.store.Release(ctx, l)
}

func (m *Manager) newHolder() string {
	return m.holder + "/" + strconv.FormatUint(m.seq.Add(1), 10)
}
