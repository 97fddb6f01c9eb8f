package pacing

import (
	"time"

	"github.com/egresskit/egresskit/internal/hostmap"
)

// shard is one part of a Set's hosts, guarded by its lock.
type shard = hostmap.Shard[entry, struct{}]

// newHosts returns the Set's host map: an idle host is evicted unless it is
// still paused.
func newHosts(idleTTL time.Duration) *hostmap.Map[entry, struct{}] {
	return hostmap.New[entry, struct{}](hostmap.Config[entry]{
		IdleTTL: idleTTL,
		Used:    func(e *entry) time.Time { return e.used },
		Keep:    func(e *entry, now time.Time) bool { return now.Before(e.pausedUntil) },
	})
}

// entry returns host's entry in sh, creating it. sh must be locked.
func (s *Set) entry(sh *shard, host string, now time.Time) *entry {
	if e := sh.Get(host); e != nil {
		return e
	}
	e := s.newEntry(host, now)
	sh.Put(host, e)
	return e
}

// Evict forgets every host idle for at least IdleTTL whose pause has
// ended, and returns how many it forgot. The Set also evicts lazily; Evict
// is for callers that want the memory back now (and for tests). It does
// nothing when IdleTTL is negative.
func (s *Set) Evict() int {
	return s.hosts.Evict(s.cfg.Now())
}

// Len returns the number of hosts whose state the Set holds.
func (s *Set) Len() int {
	return s.hosts.Len()
}
