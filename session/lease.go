package session

import (
	"context"
	"strconv"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/sessionstore"
)

type leaseKey struct{}

// WithLease returns a context carrying l, for a crawler author holding a
// session's lease. Manager methods given it fence their writes to session
// l.ID with l.Token, so they fail with ErrStaleLease once another worker
// holds a newer lease; a Jar made with it fences its cookie writes; a
// Transport refreshes tokens under it instead of taking a lease of its
// own.
func WithLease(ctx context.Context, l sessionstore.Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// leaseFrom returns the lease ctx carries, if any.
func leaseFrom(ctx context.Context) (sessionstore.Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(sessionstore.Lease)
	return l, ok
}

// live reports whether l is a lease (nonzero Token) that has not expired
// at now.
func live(l sessionstore.Lease, now time.Time) bool { return l.Token != 0 && now.Before(l.Expires) }

// fence returns the fencing token ctx carries for session id, or 0.
func fence(ctx context.Context, id string) uint64 {
	if l, ok := leaseFrom(ctx); ok && l.ID == id {
		return l.Token
	}
	return 0
}

// Acquire takes the lease on session id for ttl under a holder name unique
// to this call, giving a crawler's worker exclusive use of the session
// among lease holders. It fails with ErrInvalidID, ErrNotFound,
// ErrLeaseHeld, or a Store error.
func (m *Manager) Acquire(ctx context.Context, id string, ttl time.Duration) (sessionstore.Lease, error) {
	if err := sessionkit.ValidateID(id); err != nil {
		return sessionstore.Lease{}, err
	}
	return m.store.Acquire(ctx, id, m.newHolder(), ttl)
}

// Renew extends l by ttl from now. If l expired and no one took the lease
// meanwhile, Renew grants l's holder a new lease with a new Token: fence
// later writes with the returned Lease. It fails like Acquire.
func (m *Manager) Renew(ctx context.Context, l sessionstore.Lease, ttl time.Duration) (sessionstore.Lease, error) {
	return m.store.Acquire(ctx, l.ID, l.Holder, ttl)
}

// Release ends l. It fails with ErrStaleLease when a newer lease was
// granted, ErrNotFound, or a Store error.
func (m *Manager) Release(ctx context.Context, l sessionstore.Lease) error {
	return m.store.Release(ctx, l)
}

func (m *Manager) newHolder() string {
	return m.holder + "/" + strconv.FormatUint(m.seq.Add(1), 10)
}
