package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// numShards spreads hosts over independently locked maps.
const numShards = 64

type shards struct {
	seed maphash.Seed
	s    [numShards]shard
}

// shard is one part of a Set's hosts.
type shard struct {
	mu        sync.Mutex // guards the fields below and every entry in m
	m         map[string]*entry
	peak      int // largest len(m) since m was last rebuilt
	lastSweep time.Time
	_         [64]byte // keep shards on separate cache lines
}

func (ss *shards) init() { ss.seed = maphash.MakeSeed() }

func (ss *shards) of(host string) *shard {
	return &ss.s[maphash.String(ss.seed, host)%numShards]
}

// entry returns host's entry, creating it. sh.mu must be held.
func (sh *shard) entry(s *Set, host string, now time.Time) *entry {
	if e := sh.m[host]; e != nil {
		return e
	}
	if sh.m == nil {
		sh.m = make(map[string]*entry)
	}
	e := s.newEntry(host, now)
	sh.m[host] = e
	sh.peak = max(sh.peak, len(sh.m))
	return e
}

// Evict forgets every host idle for at least IdleTTL whose pause has
// ended, and returns how many it forgot. The Set also evicts lazily; Evict
// is for callers that want the memory back now (and for tests). It does
// nothing when IdleTTL is negative.
func (s *Set) Evict() int {
	now := s.cfg.Now()
	n := 0
	for i := range s.shards.s {
		sh := &s.shards.s[i]
		sh.mu.Lock()
		n += s.sweep(sh, now)
		sh.mu.Unlock()
	}
	return n
}

// Len returns the number of hosts whose state the Set holds.
func (s *Set) Len() int {
	n := 0
	for i := range s.shards.s {
		sh := &s.shards.s[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// maybeSweep sweeps sh when it has not been swept for half an IdleTTL.
// sh.mu must be held.
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
		if now.Sub(e.used) >= s.cfg.IdleTTL && !now.Before(e.pausedUntil) {
			delete(sh.m, host)
			n++
		}
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
