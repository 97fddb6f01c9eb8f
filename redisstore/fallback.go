package redisstore

import (
	"context"
	"errors"
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
	// Recovered: Redis answers again; the halts known locally were written
	// to it and the local state was dropped.
	Recovered
	// Restored: Redis lost data, and the halts this State remembers were
	// written back; Hosts lists the ones Redis had lost. The loss is
	// noticed when a server's run_id changed (a restart, a failover), when
	// it evicted keys, or when Redis admitted a host whose halt this State
	// remembers and which was not resumed. Sent under both policies, only
	// when Redis had lost a halt (or the write-back failed: Err).
	Restored
	// Unchecked: New could not read a server's maxmemory-policy (CONFIG
	// GET refused or Redis unreachable), or the policy evicts and
	// Config.AllowEviction accepts it; a server's policy became an
	// evicting one after New (Err is an *EvictionError); INFO is refused,
	// so that a restart is noticed only when a remembered halt's host is
	// admitted; or the journal could not be written. Err says which.
	// Sent under both policies.
	Unchecked
)

// String returns "degraded", "recovered", "restored" or "unchecked".
func (k WarningKind) String() string {
	switch k {
	case Degraded:
		return "degraded"
	case Recovered:
		return "recovered"
	case Restored:
		return "restored"
	case Unchecked:
		return "unchecked"
	}
	return "unknown"
}

// Warning reports a change of a FailOpen State between Redis and local
// state (one per change, not per failed call), halts written back after
// Redis lost data, and what New could not check.
type Warning struct {
	Kind WarningKind
	// Op is the operation that noticed ("admit", "record", "watch",
	// "config", "info", ...).
	Op string
	// Err is the client's error (Degraded, Unchecked; Restored when the
	// write-back was cut short).
	Err error
	// Halts is the number of hosts the re-sync halted in Redis (Recovered,
	// Restored); hosts Redis had halted already are not counted.
	Halts int
	// Hosts are those hosts (Restored only).
	Hosts []string
	// Servers are the addresses of the servers whose run_id changed or
	// that evicted keys (Restored only; empty when an admission noticed
	// the loss).
	Servers []string
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
		// Write back the halts seen in Redis when it answers again, in
		// case it lost them (a restart without persistence, a failover).
		if s.pending == nil {
			s.pending = make(map[string]pendingHalt, len(s.known))
		}
		for h, t := range s.known {
			if _, ok := s.pending[h]; !ok {
				s.pending[h] = pendingHalt{since: t}
			}
		}
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
func (s *State) recovered(op string, halts int) {
	s.mu.Lock()
	if !s.degraded || len(s.pending) > 0 {
		s.mu.Unlock()
		return
	}
	s.degraded = false
	s.down.Store(false)
	s.local = nil
	s.mu.Unlock()
	s.warn(Warning{Kind: Recovered, Op: op, Halts: halts, Time: s.localNow()})
}

// pushBatch is how many halts one pipeline writes.
const pushBatch = 500

// pendingHalt is a halt to write to Redis: made locally during an outage,
// or seen in Redis before it and written back in case Redis lost it.
// Either is written unless the host is halted in Redis already or was
// resumed since the halt began.
type pendingHalt struct {
	since time.Time
}

// pushPending writes the pending halts to Redis, a pipeline of EVALs of the
// halt script per batch (the script cache of a restarted server is empty,
// and the script is small), and returns how many hosts it halted. A halt
// key of another type cannot take the halt; Admit reports it as corrupt,
// so the host stays refused, and the halt is dropped from the pending
// ones.
func (s *State) pushPending(ctx context.Context) (int, error) {
	s.mu.Lock()
	todo := make([]haltAt, 0, len(s.pending))
	for h, p := range s.pending {
		todo = append(todo, haltAt{h, p.since})
	}
	s.mu.Unlock()
	halted, err := s.writeHalts(ctx, todo, func(h haltAt) {
		s.mu.Lock()
		if p, ok := s.pending[h.host]; ok && p.since.Equal(h.since) {
			delete(s.pending, h.host)
		}
		s.mu.Unlock()
	})
	return len(halted), err
}

// warn delivers w; no lock is held.
func (s *State) warn(w Warning) {
	if s.set.cfg.OnWarning != nil {
		s.set.cfg.OnWarning(w)
	}
}

// remember notes a halt of host, for the fallback and for writing it back
// should Redis lose it; and in the journal, if there is one.
func (s *State) remember(host string, since time.Time) {
	s.mu.Lock()
	if s.known == nil {
		s.known = make(map[string]time.Time)
	}
	old, ok := s.known[host]
	changed := false
	if ok || len(s.known) < maxKnown {
		s.known[host] = since
		changed = !ok || !old.Equal(since)
	}
	s.nKnown.Store(int64(len(s.known)))
	s.mu.Unlock()
	if changed && s.journal != nil {
		s.journalErr(s.journal.halt(host, since))
	}
}

// forget drops a remembered halt of host, which was resumed.
func (s *State) forget(host string) {
	if s.nKnown.Load() == 0 {
		return
	}
	s.mu.Lock()
	_, ok := s.known[host]
	delete(s.known, host)
	s.nKnown.Store(int64(len(s.known)))
	s.mu.Unlock()
	if ok && s.journal != nil {
		s.journalErr(s.journal.resume(host))
	}
}

// journalErr sends an Unchecked warning for the first failed write of the
// journal.
func (s *State) journalErr(err error) {
	if err != nil && s.warnedJournal.CompareAndSwap(false, true) {
		s.warn(Warning{Kind: Unchecked, Op: "journal", Err: err, Time: s.localNow()})
	}
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
		s.pending = make(map[string]pendingHalt)
	}
	s.pending[host] = pendingHalt{since: since}
	direct := !s.degraded // Redis came back while this attempt ran
	s.mu.Unlock()
	s.remember(host, since)
	if direct {
		var re redisErr
		if _, err := s.pushPending(ctx); errors.As(err, &re) {
			s.degrade("halt", re.error)
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
