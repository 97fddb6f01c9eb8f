package redisstore

import (
	"context"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
)

// WarningKind says what a Warning reports.
type WarningKind uint8

// The warnings of a FailOpen State.
const (
	// Degraded: Redis is unreachable or slow; the State now runs on local,
	// in-process state.
	Degraded WarningKind = iota + 1
	// Recovered: Redis answers again; the halts made locally were written
	// to it and the local state was dropped.
	Recovered
)

// String returns "degraded" or "recovered".
func (k WarningKind) String() string {
	switch k {
	case Degraded:
		return "degraded"
	case Recovered:
		return "recovered"
	}
	return "unknown"
}

// Warning reports a change of a FailOpen State between Redis and local
// state. One is sent per change, not per failed call.
type Warning struct {
	Kind WarningKind
	// Op is the operation that noticed ("admit", "record", ...).
	Op string
	// Err is the client's error (Degraded only).
	Err error
	// Halts is the number of local halts written to Redis (Recovered only).
	Halts int
	// Time is when the change happened, on the local clock.
	Time time.Time
}

// route says where an operation goes: to Redis (nil, false), to local
// state (local, false), or to Redis as a retry after an outage (local,
// true), in which case local is the fallback should the retry fail.
func (s *State) route() (local *hoststate.Memory, try bool) {
	if !s.down.Load() {
		return nil, false
	}
	now := s.localNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.degraded {
		return nil, false
	}
	if now.Before(s.nextTry) {
		return s.local, false
	}
	s.nextTry = now.Add(s.set.cfg.RetryInterval)
	return s.local, true
}

// degrade switches to local state (once per outage) and returns it.
func (s *State) degrade(op string, err error) *hoststate.Memory {
	now := s.localNow()
	s.mu.Lock()
	first := !s.degraded
	if first {
		s.degraded = true
		s.down.Store(true)
		s.local = hoststate.NewMemory(s.set.memoryConfig())
	}
	s.nextTry = now.Add(s.set.cfg.RetryInterval)
	local := s.local
	s.mu.Unlock()
	if first {
		s.warn(Warning{Kind: Degraded, Op: op, Err: err, Time: now})
	}
	return local
}

// recovered goes back to Redis after a successful retry, unless halts
// were made locally since pushPending; they are written on the next try.
func (s *State) recovered(halts int) {
	s.mu.Lock()
	if !s.degraded || len(s.pending) > 0 {
		s.mu.Unlock()
		return
	}
	s.degraded = false
	s.down.Store(false)
	s.local = nil
	s.mu.Unlock()
	s.warn(Warning{Kind: Recovered, Halts: halts, Time: s.localNow()})
}

// pushPending writes the halts made locally to Redis and returns how many
// it wrote.
func (s *State) pushPending(ctx context.Context) (int, error) {
	s.mu.Lock()
	todo := make(map[string]time.Time, len(s.pending))
	for h, t := range s.pending {
		todo[h] = t
	}
	s.mu.Unlock()
	pushed := 0
	for host, since := range todo {
		k, err := s.keysOf(host)
		if err != nil { // cannot happen: the host was used already
			continue
		}
		if _, err := s.call(ctx, "halt", s.sc.halt, k, []any{itoa(since.UnixMicro())}); err != nil {
			return pushed, err
		}
		s.mu.Lock()
		if t, ok := s.pending[host]; ok && t.Equal(since) {
			delete(s.pending, host)
		}
		s.mu.Unlock()
		pushed++
	}
	return pushed, nil
}

// warn delivers w; no lock is held.
func (s *State) warn(w Warning) {
	if s.set.cfg.OnWarning != nil {
		s.set.cfg.OnWarning(w)
	}
}

// remember notes a halt of host, for the fallback.
func (s *State) remember(host string, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = make(map[string]time.Time)
	}
	if _, ok := s.known[host]; ok || len(s.known) < maxKnown {
		s.known[host] = since
	}
}

// forget drops a remembered halt of host, which Redis no longer has.
func (s *State) forget(host string) {
	s.mu.Lock()
	if len(s.known) > 0 {
		delete(s.known, host)
	}
	s.mu.Unlock()
}

// knownHalt reports a remembered halt of host.
func (s *State) knownHalt(host string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.known[host]
	return t, ok
}

func (s *State) localAdmit(ctx context.Context, local *hoststate.Memory, host string) (hoststate.Admission, error) {
	if since, ok := s.knownHalt(host); ok {
		return hoststate.Admission{}, &breaker.HaltError{Host: host, Since: since}
	}
	return local.Admit(ctx, host)
}

func (s *State) localRecord(ctx context.Context, local *hoststate.Memory, host string, a hoststate.Admission, r classify.Result) (hoststate.Effect, error) {
	eff, err := local.Record(ctx, host, a, r)
	if err != nil || !eff.Halted {
		return eff, err
	}
	since := s.localNow()
	s.mu.Lock()
	if s.pending == nil {
		s.pending = make(map[string]time.Time)
	}
	s.pending[host] = since
	direct := !s.degraded // Redis came back while this attempt ran
	s.mu.Unlock()
	s.remember(host, since)
	if direct {
		if _, err := s.pushPending(ctx); err != nil {
			s.degrade("halt", err)
		}
	}
	return eff, nil
}

func (s *State) localState(ctx context.Context, local *hoststate.Memory, host string) (hoststate.HostState, error) {
	st, err := local.State(ctx, host)
	if err != nil {
		return st, err
	}
	if since, ok := s.knownHalt(host); ok && !st.Halted {
		st.Halted, st.HaltedAt = true, since
	}
	return st, nil
}
