package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session/sessionstore"
)

// SetHeader sets the values of the header key sent with every request of
// session id; no values deletes it. It fails with ErrInvalidID, an invalid
// header name, ErrNotFound, ErrStaleLease, or a Store error.
func (m *Manager) SetHeader(ctx context.Context, id, key string, values ...string) error {
	if err := sessionkit.ValidateID(id); err != nil {
		return err
	}
	if err := checkHeader(key, values); err != nil {
		return err
	}
	f := headerPrefix + http.CanonicalHeaderKey(key)
	w := sessionstore.FieldWrite{Delete: []string{f}}
	if len(values) > 0 {
		w = sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: f, Value: m.keys.seal(id, f, encodeHeader(values))}}}
	}
	return m.store.SetFields(ctx, id, fence(ctx, id), w)
}

// SetToken stores t as session id's token; a t without Value deletes the
// token. It fails with ErrInvalidID, ErrNotFound, ErrStaleLease, or a
// Store error.
func (m *Manager) SetToken(ctx context.Context, id string, t Token) error {
	if err := sessionkit.ValidateID(id); err != nil {
		return err
	}
	w := sessionstore.FieldWrite{Delete: []string{fieldToken}}
	if t.Value != "" {
		w = sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: fieldToken, Value: m.sealToken(id, t, m.cfg.Now())}}}
	}
	return m.store.SetFields(ctx, id, fence(ctx, id), w)
}

// Bind binds session id to the egress endpoint. Binding is set once: it
// succeeds when the session is unbound or already bound to endpoint, and
// fails with ErrAlreadyBound when bound to another one — two workers
// racing to bind agree on the first. It also fails with ErrInvalidID,
// ErrNotFound, ErrStaleLease, ErrTampered, or a Store error.
func (m *Manager) Bind(ctx context.Context, id, endpoint string) error {
	if err := sessionkit.ValidateID(id); err != nil {
		return err
	}
	if endpoint == "" {
		return errors.New("session: bind to an empty endpoint")
	}
	w := sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: fieldBinding, Value: m.keys.seal(id, fieldBinding, encodeBinding(endpoint))}}, IfAbsent: true}
	err := m.store.SetFields(ctx, id, fence(ctx, id), w)
	if !errors.Is(err, sessionstore.ErrConflict) {
		return err
	}
	s, err := m.Get(ctx, id)
	if err != nil {
		return err
	}
	if s.Endpoint != endpoint {
		return fmt.Errorf("%w: %q is bound to %q", ErrAlreadyBound, id, s.Endpoint)
	}
	return nil
}

// Rebind moves session id to the egress endpoint, or unbinds it when
// endpoint is empty. It is the caller's explicit choice after
// ErrEgressLost: a site may tie a login to the address it came from. It
// fails with ErrInvalidID, ErrNotFound, ErrStaleLease, or a Store error.
func (m *Manager) Rebind(ctx context.Context, id, endpoint string) error {
	if err := sessionkit.ValidateID(id); err != nil {
		return err
	}
	w := sessionstore.FieldWrite{Delete: []string{fieldBinding}}
	if endpoint != "" {
		w = sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: fieldBinding, Value: m.keys.seal(id, fieldBinding, encodeBinding(endpoint))}}}
	}
	return m.store.SetFields(ctx, id, fence(ctx, id), w)
}

// checkHeader rejects a header that net/http would refuse to send. The
// error never repeats a value.
func checkHeader(key string, values []string) error {
	if !validHeaderName(key) {
		return fmt.Errorf("session: invalid header name %q", key)
	}
	for i, v := range values {
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("session: header %q: value %d holds a control character", key, i)
		}
	}
	return nil
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
