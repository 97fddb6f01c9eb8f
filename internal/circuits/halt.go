package circuits

import "time"

// Halt halts host by hand, as a Refused outcome given to Done does: Allow
// refuses it with *breaker.HaltError until Resume. It reports whether this call
// halted the host (false when it was already halted). A halted host is
// never evicted.
func (s *Set) Halt(host string) bool {
	now := time.Now()
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := s.entry(sh, host, now)
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
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := sh.Get(host)
	if e == nil || e.halted.IsZero() {
		return false
	}
	e.halted = time.Time{}
	e.used = now
	return true
}

// Halted reports whether host is halted and since when.
func (s *Set) Halted(host string) (since time.Time, ok bool) {
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	if e := sh.Get(host); e != nil && !e.halted.IsZero() {
		return e.halted, true
	}
	return time.Time{}, false
}
