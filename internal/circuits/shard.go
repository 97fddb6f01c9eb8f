package circuits

import (
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/internal/hostmap"
	"github.com/sony/gobreaker/v2"
)

// shard is one part of a Set's hosts: the entries and the breaker's own
// state of the shard, all guarded by the shard's lock.
type shard = hostmap.Shard[entry, shardState]

// shardState is what a shard keeps beside its entries.
type shardState struct {
	gen     uint64                // last generation handed out in this shard
	pending []breaker.StateChange // changes not yet delivered
}

// newHosts returns the Set's host map: an idle host is evicted unless it is
// halted or its circuit is open and its open period has not ended.
func newHosts(idleTTL time.Duration) *hostmap.Map[entry, shardState] {
	return hostmap.New[entry, shardState](hostmap.Config[entry]{
		IdleTTL: idleTTL,
		Used:    func(e *entry) time.Time { return e.used },
		Keep: func(e *entry, now time.Time) bool {
			return !e.halted.IsZero() || e.state == breaker.Open && now.Before(e.openUntil)
		},
	})
}

// entry returns host's entry in sh, creating it. sh must be locked.
func (s *Set) entry(sh *shard, host string, now time.Time) *entry {
	if e := sh.Get(host); e != nil {
		return e
	}
	sh.Local.gen++
	st := s.gb
	st.Name = host
	e := &entry{circuit: circuit{cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](st), gen: sh.Local.gen}, used: now}
	sh.Put(host, e)
	return e
}

// take appends the pending changes of sh to dst and clears them. sh must be
// locked.
func take(sh *shard, dst []breaker.StateChange) []breaker.StateChange {
	p := &sh.Local.pending
	if len(*p) == 0 {
		return dst
	}
	dst = append(dst, *p...)
	clear(*p)
	*p = (*p)[:0]
	return dst
}

// Evict forgets every host idle for at least IdleTTL, except open circuits
// whose open period has not ended and halted hosts, and returns how many
// it forgot. The Set also evicts lazily; Evict is for callers that want the
// memory back now (and for tests). It does nothing when IdleTTL is
// negative.
func (s *Set) Evict() int {
	return s.hosts.Evict(time.Now())
}

// Len returns the number of hosts whose state the Set holds.
func (s *Set) Len() int {
	return s.hosts.Len()
}
