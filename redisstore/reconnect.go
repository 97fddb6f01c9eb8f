package redisstore

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// When Redis refuses connections (stopped, restarting), go-redis's pool
// counts the failed dials; once PoolSize of them failed, it answers every
// call with the last dial error and dials again only from a background
// probe, once a second, so that its callers keep failing for up to a
// second after Redis is back. A Store over a *redis.Client keeps the pool
// out of it: after a call failed to connect, operations fail at once
// (FailClosed) or run locally (FailOpen) without reaching the client, and
// the first operation after reconnectInterval dials Redis itself, off the
// pool, with the client's own dialer; when that connects, operations
// reach the client again, whose pool, having seen only the dials of the
// calls in flight when Redis went, connects at once. So a FailClosed
// Store's errors end at most reconnectInterval (plus one dial) after
// Redis accepts connections again — unless the pool's count reached
// PoolSize anyway: go-redis never lowers it but from its probe, and the
// first call of each outage costs it about four failed dials (its
// command retries, dialled off the call's context, where a Store cannot
// cut them), so about one outage in PoolSize/4 still waits for the
// pool's probe (up to a second).

// reconnectInterval is how often, at most, a Store whose Redis refused
// connections dials it to see whether it is back, on the Store's local
// clock (Config.Now when set, as RetryInterval).
const reconnectInterval = 100 * time.Millisecond

// reconnect is the state of that check. The zero value is closed to
// nothing: operations reach the client.
type reconnect struct {
	next    atomic.Int64 // when to dial again (Unix ns); 0: not refused
	dialing atomic.Bool  // a dial of the check is running
	last    atomic.Value // errBox: the error of the failed connect
}

type errBox struct{ err error }

// refused reports a client error that says Redis could not be connected
// to: a refused or failed dial.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// noteRefused starts (or extends) a refusal after a call failed with err,
// when err is a failed connect and the client is one the check can dial.
func (s *Store) noteRefused(err error) {
	if !refused(err) || s.dialer() == nil {
		return
	}
	s.rc.last.Store(errBox{err})
	s.rc.next.Store(s.localNow().Add(reconnectInterval).UnixNano())
}

// gate returns nil when operations may reach the client; else the error of
// the failed connect (a redisErr). Past reconnectInterval, one caller
// dials Redis, bounded by Timeout, and opens the gate when it connects.
func (s *Store) gate(ctx context.Context) error {
	next := s.rc.next.Load()
	if next == 0 {
		return nil
	}
	last, _ := s.rc.last.Load().(errBox)
	if s.localNow().UnixNano() < next || !s.rc.dialing.CompareAndSwap(false, true) {
		return redisErr{last.err}
	}
	defer s.rc.dialing.Store(false)
	dial := s.dialer()
	dctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
	defer cancel()
	c, err := dial(dctx)
	if err != nil {
		s.rc.last.Store(errBox{err})
		s.rc.next.Store(s.localNow().Add(reconnectInterval).UnixNano())
		return redisErr{err}
	}
	c.Close()
	s.rc.next.Store(0)
	return nil
}

// dialer returns a dial of the client's server, off its pool, or nil when
// the client is not a *redis.Client (a Cluster, a Ring or another client
// reconnects as go-redis does).
func (s *Store) dialer() func(ctx context.Context) (net.Conn, error) {
	c, ok := s.client.(*redis.Client)
	if !ok {
		return nil
	}
	o := c.Options()
	if o.Dialer == nil {
		return nil
	}
	return func(ctx context.Context) (net.Conn, error) { return o.Dialer(ctx, o.Network, o.Addr) }
}
