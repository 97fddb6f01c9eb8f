// Package hostmap holds per-host entries in sharded maps that forget idle
// entries.
//
// A Map spreads hosts over 64 shards, each a map guarded by its own mutex.
// The owner locks a host's shard, reads or adds the host's entry and the
// shard's own state (Shard.Local), and unlocks it. An entry idle for
// IdleTTL is forgotten unless Config.Keep keeps it: lazily, a shard at a
// time, when the owner calls MaybeSweep (a shard not swept for half an
// IdleTTL is swept), and on demand with Evict. A swept map that has shrunk
// to a quarter of its peak is rebuilt, since Go maps do not give memory
// back. A Map starts no goroutine and reads no clock: every call that needs
// the time is given it.
package hostmap

import (
	"hash/maphash"
	"iter"
	"sync"
	"time"
)

// numShards spreads hosts over independently locked maps.
const numShards = 64

// minRebuild is the smallest peak whose map is worth rebuilding.
const minRebuild = 64

// Config configures a Map. The zero value forgets nothing.
type Config[E any] struct {
	// IdleTTL is how long after its last use an entry may be forgotten.
	// Default (<= 0): never; sweeps and Evict forget nothing.
	IdleTTL time.Duration
	// Used returns when e was last used. It is called with e's shard
	// locked and must only read e. Required when IdleTTL > 0.
	Used func(e *E) time.Time
	// Keep, if not nil, reports whether an idle e must be kept at now all
	// the same. It is called with e's shard locked and must only read e.
	// Default (nil): no idle entry is kept.
	Keep func(e *E, now time.Time) bool
}

// Map holds entries of type *E by host, and per shard a value of type L
// that its owner keeps beside the entries (struct{} for none). It is safe
// for concurrent use as long as each Shard is only used between its Lock
// and Unlock.
type Map[E, L any] struct {
	cfg        Config[E]
	sweepEvery time.Duration
	seed       maphash.Seed
	shards     [numShards]Shard[E, L]
}

// New returns an empty Map configured by cfg.
func New[E, L any](cfg Config[E]) *Map[E, L] {
	return &Map[E, L]{cfg: cfg, sweepEvery: cfg.IdleTTL / 2, seed: maphash.MakeSeed()}
}

// Shard is one part of a Map's hosts. Its methods and Local must only be
// used with the shard locked.
type Shard[E, L any] struct {
	mu        sync.Mutex // guards the fields below, Local and every entry in m
	m         map[string]*E
	peak      int // largest len(m) since m was last rebuilt
	lastSweep time.Time
	// last is the entry of lastHost that Get or Put saw last, or nil: a
	// host asked for again and again (one site crawled) is found without
	// a map lookup.
	lastHost string
	last     *E
	// Local is the owner's own state of this shard, guarded by the shard's
	// lock like the entries.
	Local L
	_     [64]byte // keep shards on separate cache lines
}

// Shard returns the shard that holds host.
func (m *Map[E, L]) Shard(host string) *Shard[E, L] {
	return &m.shards[maphash.String(m.seed, host)%numShards]
}

// Shards yields every shard of m, unlocked.
func (m *Map[E, L]) Shards() iter.Seq[*Shard[E, L]] {
	return func(yield func(*Shard[E, L]) bool) {
		for i := range m.shards {
			if !yield(&m.shards[i]) {
				return
			}
		}
	}
}

// Lock locks the shard.
func (sh *Shard[E, L]) Lock() { sh.mu.Lock() }

// Unlock unlocks the shard.
func (sh *Shard[E, L]) Unlock() { sh.mu.Unlock() }

// Get returns host's entry, or nil if the shard holds none.
func (sh *Shard[E, L]) Get(host string) *E {
	if sh.last != nil && host == sh.lastHost {
		return sh.last
	}
	e := sh.m[host]
	if e != nil {
		sh.lastHost, sh.last = host, e
	}
	return e
}

// Put sets host's entry to e.
func (sh *Shard[E, L]) Put(host string, e *E) {
	if sh.m == nil {
		sh.m = make(map[string]*E)
	}
	sh.m[host] = e
	sh.peak = max(sh.peak, len(sh.m))
	sh.lastHost, sh.last = host, e
}

// All yields the shard's hosts and their entries, in no particular order.
func (sh *Shard[E, L]) All() iter.Seq2[string, *E] {
	return func(yield func(string, *E) bool) {
		for host, e := range sh.m {
			if !yield(host, e) {
				return
			}
		}
	}
}

// Len returns the number of hosts m holds. It locks each shard in turn.
func (m *Map[E, L]) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Evict forgets every entry idle at now for at least IdleTTL that Keep
// does not keep, and returns how many it forgot. It locks each shard in
// turn.
func (m *Map[E, L]) Evict(now time.Time) int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += m.sweep(sh, now)
		sh.mu.Unlock()
	}
	return n
}

// MaybeSweep sweeps sh, which must be locked, when it has not been swept
// for half an IdleTTL, so that an idle entry is forgotten between one and
// one and a half IdleTTL after its last use while its shard is in use.
func (m *Map[E, L]) MaybeSweep(sh *Shard[E, L], now time.Time) {
	if m.cfg.IdleTTL > 0 && now.Sub(sh.lastSweep) >= m.sweepEvery {
		m.sweep(sh, now)
	}
}

// sweep deletes the evictable entries of sh and returns how many; when the
// map has shrunk to a quarter of its peak it is rebuilt. sh.mu must be
// held.
func (m *Map[E, L]) sweep(sh *Shard[E, L], now time.Time) int {
	sh.lastSweep = now
	if m.cfg.IdleTTL <= 0 {
		return 0
	}
	n := 0
	for host, e := range sh.m {
		if now.Sub(m.cfg.Used(e)) < m.cfg.IdleTTL || m.cfg.Keep != nil && m.cfg.Keep(e, now) {
			continue
		}
		delete(sh.m, host)
		n++
		if e == sh.last {
			sh.lastHost, sh.last = "", nil
		}
	}
	if sh.peak >= minRebuild && len(sh.m) <= sh.peak/4 {
		rebuilt := make(map[string]*E, len(sh.m))
		for host, e := range sh.m {
			rebuilt[host] = e
		}
		sh.m, sh.peak = rebuilt, len(rebuilt)
	}
	return n
}
