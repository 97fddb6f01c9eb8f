package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// flight is one refresh in progress in this process; the others wait for it.
type flight struct {
	done chan struct{}
	tok  Token
	err  error
}

// Token returns session id's token, refreshed if due, for a crawler author
// who sends it other than through Transport; a zero Token when the session
// has none. A token within Config.RefreshSkew of its expiry is refreshed by
// one worker across the fleet — the one that takes the session's lease (or
// that already holds it, see WithLease) — while the others keep using it
// until it expires, and then wait for the new one, reading the store every
// Config.PollInterval. It never returns an expired token: when one cannot
// be refreshed it fails with an error naming the session and wrapping the
// cause (ErrNoRefresher, the Refresh function's error, ...). It also fails
// with ErrInvalidID, ErrNotFound, ErrTampered, or a Store error.
func (m *Manager) Token(ctx context.Context, id string) (Token, error) {
	if err := sessionkit.ValidateID(id); err != nil {
		return Token{}, err
	}
	r, err := m.store.Get(ctx, id, sessionstore.PartFields)
	if err != nil {
		return Token{}, err
	}
	cur, err := m.storedToken(r)
	if err != nil {
		return Token{}, err
	}
	return m.token(ctx, id, cur)
}

// storedToken opens the token field of r.
func (m *Manager) storedToken(r sessionstore.Record) (Token, error) {
	blob, ok := r.Fields[fieldToken]
	if !ok {
		return Token{}, nil
	}
	return openWith(m, r.ID, fieldToken, blob, decodeToken)
}

// fresh reports whether t needs no refresh at now.
func (m *Manager) fresh(t Token, now time.Time) bool {
	if t.Value == "" {
		return false
	}
	if !t.refreshAt.IsZero() {
		return now.Before(t.refreshAt)
	}
	return t.Expires.IsZero() || now.Before(t.Expires.Add(-m.cfg.RefreshSkew))
}

// sealToken seals t, stored at now. Its refresh falls due RefreshSkew
// before it expires, or halfway through its remaining life if that is
// shorter — so a token that lives less than the skew is not refreshed on
// every request.
func (m *Manager) sealToken(id string, t Token, now time.Time) []byte {
	t.refreshAt = time.Time{}
	if !t.Expires.IsZero() {
		skew := m.cfg.RefreshSkew
		if left := t.Expires.Sub(now); left > 0 && left/2 < skew {
			skew = left / 2
		}
		t.refreshAt = t.Expires.Add(-skew)
	}
	return m.keys.seal(id, fieldToken, encodeToken(t))
}

// token returns cur if it is fresh, or a refreshed token (see Token).
func (m *Manager) token(ctx context.Context, id string, cur Token) (Token, error) {
	now := m.cfg.Now()
	if cur.Value == "" || m.fresh(cur, now) {
		return cur, nil
	}
	if m.cfg.Refresh == nil {
		if cur.valid(now) {
			return cur, nil
		}
		return Token{}, &refreshError{ID: id, Err: ErrNoRefresher}
	}
	for {
		m.mu.Lock()
		f := m.flights[id]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			m.flights[id] = f
			m.mu.Unlock()
			f.tok, f.err = m.refreshShared(ctx, id, cur)
			m.mu.Lock()
			delete(m.flights, id)
			m.mu.Unlock()
			close(f.done)
			return f.tok, f.err
		}
		m.mu.Unlock()
		if cur.valid(m.cfg.Now()) {
			return cur, nil // still good; this process is refreshing it
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Token{}, &refreshError{ID: id, Err: ctx.Err()}
		}
		if f.err != nil && isContextErr(f.err) && ctx.Err() == nil {
			continue // the refreshing caller gave up; take over
		}
		return f.tok, f.err
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// refreshShared refreshes the token of session id once across the fleet.
func (m *Manager) refreshShared(ctx context.Context, id string, cur Token) (Token, error) {
	if l, ok := leaseFrom(ctx); ok && l.ID == id && l.Token != 0 {
		// The caller holds the session: refresh under its lease.
		return m.refreshUnder(ctx, id, cur, l.Token)
	}
	holder := m.newHolder()
	for {
		l, err := m.store.Acquire(ctx, id, holder, m.cfg.RefreshLease)
		if err == nil {
			tok, err := m.refreshLeased(ctx, id, l)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Timeout)
			if rerr := m.store.Release(rctx, l); rerr != nil {
				m.report(fmt.Errorf("session: release refresh lease of %q: %w", id, rerr))
			}
			cancel()
			return tok, err
		}
		if !errors.Is(err, ErrLeaseHeld) {
			return Token{}, &refreshError{ID: id, Err: err}
		}
		// Another worker holds the session: use the token while it is
		// valid, then wait for the one that worker stores.
		for {
			if cur.valid(m.cfg.Now()) {
				return cur, nil
			}
			if err := sleep(ctx, m.cfg.PollInterval); err != nil {
				return Token{}, &refreshError{ID: id, Err: err}
			}
			r, err := m.store.Get(ctx, id, sessionstore.PartFields)
			if err != nil {
				return Token{}, &refreshError{ID: id, Err: err}
			}
			if cur, err = m.storedToken(r); err != nil {
				return Token{}, &refreshError{ID: id, Err: err}
			}
			if cur.Value == "" {
				return Token{}, nil // the token was deleted
			}
			if m.fresh(cur, m.cfg.Now()) {
				return cur, nil
			}
			if !live(r.Lease, m.cfg.Now()) {
				break // the holder left without a fresh token: try ourselves
			}
		}
	}
}

// refreshLeased refreshes under lease l, unless a worker that held the
// lease before stored a fresh token already.
func (m *Manager) refreshLeased(ctx context.Context, id string, l sessionstore.Lease) (Token, error) {
	r, err := m.store.Get(ctx, id, sessionstore.PartFields)
	if err != nil {
		return Token{}, &refreshError{ID: id, Err: err}
	}
	cur, err := m.storedToken(r)
	if err != nil {
		return Token{}, &refreshError{ID: id, Err: err}
	}
	if cur.Value == "" || m.fresh(cur, m.cfg.Now()) {
		return cur, nil
	}
	return m.refreshUnder(ctx, id, cur, l.Token)
}

type refreshingKey struct{}

// refreshing reports whether ctx belongs to the refresh of session id's
// token: requests the refresher sends through the session's Transport go
// without the token rather than wait for the refresh they are part of.
func refreshing(ctx context.Context, id string) bool {
	s, _ := ctx.Value(refreshingKey{}).(string)
	return s == id
}

// refreshUnder calls Config.Refresh and stores its token fenced by fence.
func (m *Manager) refreshUnder(ctx context.Context, id string, cur Token, fence uint64) (Token, error) {
	rctx, cancel := context.WithTimeout(context.WithValue(ctx, refreshingKey{}, id), m.cfg.RefreshLease)
	tok, err := m.cfg.Refresh(rctx, id, cur)
	cancel()
	if err != nil {
		return Token{}, &refreshError{ID: id, Err: err}
	}
	if !tok.valid(m.cfg.Now()) {
		return Token{}, &refreshError{ID: id, Err: errors.New("session: refresher returned an empty or expired token")}
	}
	w := sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: fieldToken, Value: m.sealToken(id, tok, m.cfg.Now())}}}
	if err := m.store.SetFields(ctx, id, fence, w); err != nil {
		return Token{}, &refreshError{ID: id, Err: err}
	}
	return tok, nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
