package breaker

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// numShards spreads hosts over independently locked maps.
const numShards = 64

// shard is one part of a Set's hosts.
type shard struct {
	mu        sync.Mutex // guards the fields below and every entry in m
	m         map[string]*entry
	gen       uint64 // last generation handed out in this shard
	peak      int    // largest len(m) since m was last rebuilt
	lastSweep time.Time
	pending   []StateChange // changes not yet delivered
	_         [40]byte      // keep shards on separate cache lines
}

func (s *Set) shard(host string) *shard {
	return &s.shards[maphash.String(s.seed, host)%numShards]
}

// entry returns host's entry, creating it. sh.mu must be held.
func (sh *shard) entry(s *Set, host string, now time.Time) *entry {
	if e := sh.m[host]; e != nil {
		return e
	}
	if sh.m == nil {
		sh.m = make(map[string]*entry)
	}
	st := s.settings
	st.Name = host
	sh.gen++
	e := &entry{cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](st), gen: sh.gen, used: now}
	sh.m[host] = e
	sh.peak = max(sh.peak, len(sh.m))
	return e
}

// take appends the pending changes to dst and clears them. sh.mu must be
// held.
func (sh *shard) take(dst []StateChange) []StateChange {
	if len(sh.pending) == 0 {
		return dst
	}
	dst = append(dst, sh.pending...)
	clear(sh.pending)
	sh.pending = sh.pending[:0]
	return dst
}

// Evict forgets every host idle for at least IdleTTL, except open circuits
// whose open period has not ended and halted hosts, and returns how many
// it forgot. The Set also evicts lazily; Evict is for callers that want the
// memory back now (and for tests). It does nothing when IdleTTL is
// negative.
func (s *Set) Evict() int {
	now := time.Now()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += s.sweep(sh, now)
		sh.mu.Unlock()
	}
	return n
}

// Len returns the number of hosts whose state the Set holds.
func (s *Set) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// maybeSweep sweeps sh when it has not been swept for half an IdleTTL, so
// that an idle host is forgotten between one and one and a half IdleTTL
// after its last use while its shard is in use. sh.mu must be held.
func (s *Set) maybeSweep(sh *shard, now time.Time) {
	if s.cfg.IdleTTL > 0 && now.Sub(sh.lastSweep) >= s.sweepEvery {
		s.sweep(sh, now)
	}
}

// sweep deletes the evictable entries of sh and returns how many; when the
// map has shrunk to a quarter of its peak it is rebuilt, since Go maps do
// not give memory back. sh.mu must be held.
func (s *Set) sweep(sh *shard, now time.Time) int {
	sh.lastSweep = now
	if s.cfg.IdleTTL < 0 {
		return 0
	}
	n := 0
	for host, e := range sh.m {
		if !e.halted.IsZero() || now.Sub(e.used) < s.cfg.IdleTTL {
			continue
		}
		if e.state == Open && now.Before(e.openUntil) {
			continue
		}
		delete(sh.m, host)
		n++
	}
	if sh.peak >= 64 && len(sh.m) <= sh.peak/4 {
		m := make(map[string]*entry, len(sh.m))
		for host, e := range sh.m {
			m[host] = e
		}
		sh.m, sh.peak = m, len(m)
	}
	return n
}
