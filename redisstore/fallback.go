package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/redis/go-redis/v9"
)

// WarningKind says what a Warning reports.
type WarningKind uint8

// The warnings of a Store.
const (
	// Outage: Redis is unreachable or slow; the Store now runs on local,
	// in-process state. Under both policies, with Op "halt": a Refused
	// result could not be written to Redis; the Store keeps the halt of
	// the host named in Hosts, enforces it, and writes it to Redis when
	// it answers.
	Outage WarningKind = iota + 1
	// Recovered: Redis answers again; the halts known locally were written
	// to it and the local state was dropped. Under both policies: halts
	// kept after a failed record (Outage, Op "halt") were written.
	Recovered
	// Restored: Redis lost data, and the halts this Store remembers were
	// written back; Hosts lists the ones Redis had lost. The loss is
	// noticed when a server's run_id changed (a restart, a failover), when
	// it evicted keys, or when Redis admitted a host whose halt this Store
	// remembers and which was not resumed. Sent under both policies, only
	// when Redis had lost a halt (or the write-back failed: Err).
	Restored
	// Unchecked: New could not read a server's maxmemory-policy (CONFIG GET
	// refused or Redis unreachable), or the policy evicts and
	// Config.AllowEviction accepts it; a server's policy became an evicting
	// one after New (Err is an error wrapping ErrEvicting); INFO is refused,
	// so that a restart is noticed only when a remembered halt's host is
	// admitted; or the journal could not be written. Err says which. Sent
	// under both policies.
	Unchecked
)

// String returns "outage", "recovered", "restored" or "unchecked".
func (k WarningKind) String() string {
	switch k {
	case Outage:
		return "outage"
	case Recovered:
		return "recovered"
	case Restored:
		return "restored"
	case Unchecked:
		return "unchecked"
	}
	return "unknown"
}

// Warning, for an operator (Config.OnWarning, or the log), reports a change
// of a FailOpen Store between Redis and local state (one per change, and per
// Cluster master, not per failed call), a halt kept locally because Redis
// could not take it and its write-back (either policy), halts written back
// after Redis lost data, and what New could not check.
type Warning struct {
	Kind WarningKind
	// Op is the operation that noticed ("admit", "record", "watch",
	// "config", "info", ...).
	Op string
	// Err is the client's error (Outage, Unchecked; Restored when the
	// write-back was cut short).
	Err error
	// Halts is the number of hosts the re-sync halted in Redis (Recovered,
	// Restored); hosts Redis had halted already are not counted.
	Halts int
	// Hosts are those hosts (Restored), or the host whose halt is kept
	// locally (Outage with Op "halt").
	Hosts []string
	// Servers are, for Restored, the addresses of the servers whose
	// run_id changed or that evicted keys (empty when an admission
	// noticed the loss); for Outage and Recovered on a Redis Cluster,
	// the master whose outage began or ended (empty: the whole client).
	Servers []string
	// Time is when the change happened, on the local clock.
	Time time.Time
}

// route says where an operation on k goes: to Redis (nil, false), to
// local state (local, false), or to Redis as a retry after an outage
// (local, true), in which case local is the fallback should the retry
// fail. node is the Redis node of k (see nodeOf) whose outage applies,
// when local is not nil.
func (s *Store) route(ctx context.Context, k keys) (local hoststate.Memory, try bool, node string) {
	if !s.down.Load() {
		return nil, false, ""
	}
	node = s.nodeOf(ctx, k)
	now := s.localNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	next, ok := s.outages[node]
	if !ok && node != "" {
		// An outage of the whole client covers every node.
		node = ""
		next, ok = s.outages[node]
	}
	if !ok {
		return nil, false, ""
	}
	if now.Before(next) {
		return s.local, false, node
	}
	s.outages[node] = now.Add(s.set.cfg.RetryInterval)
	return s.local, true, node
}

// nodeOf returns the address of the master serving k's slot when the
// client is a Redis Cluster client, so that a master that is down sends
// only its own hosts to local state; otherwise (or when the cluster's
// layout is not known) "", the whole client.
func (s *Store) nodeOf(ctx context.Context, k keys) string {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
	defer cancel()
	n, err := cc.MasterForKey(rctx, k.state)
	if err != nil {
		return ""
	}
	return n.Options().Addr
}

// degrade switches node's hosts to local state (once per outage of node)
// and returns it.
func (s *Store) degrade(ctx context.Context, op string, err error, k keys) hoststate.Memory {
	node := s.nodeOf(ctx, k)
	now := s.localNow()
	s.mu.Lock()
	if s.outages == nil {
		s.outages = make(map[string]time.Time)
	}
	var known []haltAt
	if len(s.outages) == 0 {
		s.local, _ = hoststate.NewMemory(s.set.memoryConfig()) // checked by New
		known = make([]haltAt, 0, len(s.known))
		for h, t := range s.known {
			known = append(known, haltAt{h, t})
		}
	}
	_, had := s.outages[node]
	s.outages[node] = now.Add(s.set.cfg.RetryInterval)
	s.down.Store(true)
	local := s.local
	s.mu.Unlock()
	if len(known) > 0 {
		// Write back the halts seen in Redis when their node answers
		// again, in case it lost them (a restart without persistence, a
		// failover).
		nodes := make([]string, len(known))
		for i, h := range known {
			hk, _ := s.keysOf(h.host) // valid: the host was used already
			nodes[i] = s.nodeOf(ctx, hk)
		}
		s.mu.Lock()
		if s.pending == nil {
			s.pending = make(map[string]pendingHalt, len(known))
		}
		for i, h := range known {
			if _, ok := s.pending[h.host]; !ok {
				s.pending[h.host] = pendingHalt{since: h.since, node: nodes[i]}
			}
		}
		s.mu.Unlock()
	}
	if !had {
		w := Warning{Kind: Outage, Op: op, Err: err, Time: now}
		if node != "" {
			w.Servers = []string{node}
		}
		s.warn(w)
	}
	return local
}

// recovered ends node's outage after a successful retry, unless halts
// were made locally since pushPending; they are written on the next try.
// When no outage is left, the local state is dropped.
func (s *Store) recovered(op string, halts int, node string) {
	s.mu.Lock()
	if _, ok := s.outages[node]; !ok || len(s.pending) > 0 && s.pendingOn(node) {
		s.mu.Unlock()
		return
	}
	delete(s.outages, node)
	if len(s.outages) == 0 {
		s.down.Store(false)
		s.local = nil
	}
	s.mu.Unlock()
	w := Warning{Kind: Recovered, Op: op, Halts: halts, Time: s.localNow()}
	if node != "" {
		w.Servers = []string{node}
	}
	s.warn(w)
}

// pendingOn reports a pending halt that a try of node must write: one of
// node's hosts, or of a host whose node is unknown or not out. s.mu is
// held.
func (s *Store) pendingOn(node string) bool {
	for _, p := range s.pending {
		if _, out := s.outages[p.node]; p.node == node || p.node == "" || !out {
			return true
		}
	}
	return false
}

// pushBatch is how many halts one pipeline writes.
const pushBatch = 500

// pendingHalt is a halt to write to Redis: made locally during an outage,
// or seen in Redis before it and written back in case Redis lost it.
// Either is written unless the host is halted in Redis already or was
// resumed since the halt began.
type pendingHalt struct {
	since time.Time
	node  string // the node of the host's slot, when known (see nodeOf)
}

// pushPending writes the pending halts that a try of node must write (see
// pendingOn) to Redis, a pipeline of EVALs of the halt script per batch
// (the script cache of a restarted server is empty, and the script is
// small), and returns how many hosts it halted. A halt key of another
// type cannot take the halt; Admit reports it as corrupt, so the host
// stays refused, and the halt is dropped from the pending ones.
func (s *Store) pushPending(ctx context.Context, node string) (int, error) {
	s.mu.Lock()
	todo := make([]haltAt, 0, len(s.pending))
	for h, p := range s.pending {
		if _, out := s.outages[p.node]; p.node == node || p.node == "" || !out {
			todo = append(todo, haltAt{h, p.since})
		}
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

// keepHalt keeps a halt of host that Redis could not take (the record of a
// Refused result failed with cause): it is pending, written to Redis
// before the next operation that reaches it (see exec), and remembered,
// so that Admit refuses the host meanwhile and the halt is written back
// should Redis lose it. It returns Halted unless a halt of host was known
// or pending already (the host is escalated once), and sends a Outage
// Warning with Op "halt".
func (s *Store) keepHalt(host string, cause error) hoststate.Effect {
	since := s.localNow()
	s.mu.Lock()
	_, known := s.known[host]
	_, pending := s.pending[host]
	if !known && !pending {
		if s.pending == nil {
			s.pending = make(map[string]pendingHalt)
		}
		s.pending[host] = pendingHalt{since: since}
		s.haltsHeld.Store(true)
	}
	s.mu.Unlock()
	if known || pending {
		return hoststate.Effect{}
	}
	s.remember(host, since)
	var re redisErr
	if errors.As(cause, &re) {
		cause = re.error
	}
	s.warn(Warning{Kind: Outage, Op: "halt", Err: cause, Hosts: []string{host}, Time: since})
	return hoststate.Effect{Halted: true}
}

// haltsWritten notes that pushPending wrote halts halts outside an outage;
// once no halt is pending it sends a Recovered Warning (when one was
// written).
func (s *Store) haltsWritten(op string, halts int) {
	s.mu.Lock()
	empty := len(s.pending) == 0
	if empty {
		s.haltsHeld.Store(false)
	}
	s.mu.Unlock()
	if halts > 0 {
		s.warn(Warning{Kind: Recovered, Op: op, Halts: halts, Time: s.localNow()})
	}
}

// remember notes a halt of host, for the fallback and for writing it back
// should Redis lose it; and in the journal, if there is one, in the order
// of the changes to the halts known.
func (s *Store) remember(host string, since time.Time) {
	j := s.journal
	if j != nil {
		j.take()
	}
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
	if j != nil {
		var err error
		if changed {
			err = j.halt(host, since)
		}
		j.give()
		s.journalErr(err)
	}
}

// forget drops a remembered halt of host, which was resumed; in the
// journal too, as remember does.
func (s *Store) forget(host string) {
	if s.nKnown.Load() == 0 {
		return
	}
	j := s.journal
	if j != nil {
		j.take()
	}
	s.mu.Lock()
	_, ok := s.known[host]
	delete(s.known, host)
	s.nKnown.Store(int64(len(s.known)))
	s.mu.Unlock()
	if j != nil {
		var err error
		if ok {
			err = j.resume(host)
		}
		j.give()
		s.journalErr(err)
	}
}

// journalErr sends an Unchecked warning for the first failed write of the
// journal.
func (s *Store) journalErr(err error) {
	if err != nil && s.warnedJournal.CompareAndSwap(false, true) {
		s.warn(Warning{Kind: Unchecked, Op: "journal", Err: err, Time: s.localNow()})
	}
}

// knownHalt reports a remembered halt of host.
func (s *Store) knownHalt(host string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.known[host]
	return t, ok
}

func (s *Store) localAdmit(ctx context.Context, local hoststate.Memory, host string) (hoststate.Admission, error) {
	if since, ok := s.knownHalt(host); ok {
		return hoststate.Admission{}, &breaker.HaltError{Host: host, HaltedAt: since}
	}
	return local.Admit(ctx, host)
}

func (s *Store) localRecord(ctx context.Context, local hoststate.Memory, host string, a hoststate.Admission, r classify.Result) (hoststate.Effect, error) {
	eff, err := local.Record(ctx, host, a, r)
	if err != nil || !eff.Halted {
		return eff, err
	}
	since := s.localNow()
	k, _ := s.keysOf(host) // valid: Record checked it
	node := s.nodeOf(ctx, k)
	s.mu.Lock()
	if s.pending == nil {
		s.pending = make(map[string]pendingHalt)
	}
	s.pending[host] = pendingHalt{since: since, node: node}
	_, out := s.outages[node]
	_, all := s.outages[""]
	direct := !out && !all // Redis came back while this attempt ran
	s.mu.Unlock()
	s.remember(host, since)
	if direct {
		var re redisErr
		if _, err := s.pushPending(ctx, node); errors.As(err, &re) {
			s.degrade(ctx, "halt", re.error, k)
		}
	}
	return eff, nil
}

func (s *Store) localState(ctx context.Context, local hoststate.Memory, host string) (hoststate.Status, error) {
	st, err := local.Status(ctx, host)
	if err != nil {
		return st, err
	}
	if since, ok := s.knownHalt(host); ok && !st.Halted {
		st.Halted, st.HaltedAt = true, since
	}
	return st, nil
}
