package breaker

import "time"

// Halt halts host by hand, as a Refused outcome given to Done does: Allow
// refuses it with *HaltError until Resume. It reports whether this call
// halted the host (false when it was already halted). A halted host is
// never evicted.
func (s *Set) Halt(host string) bool {
	now := time.Now()
	sh := s.shard(host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entry(s, host, now)
	e.used = now
	if !e.halted.IsZero() {
		return false
	}
	e.halted = now
	return true
}

// Resume lifts a halt on host and reports whether it was halted. The
// circuit keeps its state; only the halt is lifted.
func (s *Set) Resume(host string) bool {
	now := time.Now()
	sh := s.shard(host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[host]
	if e == nil || e.halted.IsZero() {
		return false
	}
	e.halted = time.Time{}
	e.used = now
	return true
}

// Halted reports whether host is halted and since when.
func (s *Set) Halted(host string) (since time.Time, ok bool) {
	sh := s.shard(host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[host]; e != nil && !e.halted.IsZero() {
		return e.halted, true
	}
	return time.Time{}, false
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
