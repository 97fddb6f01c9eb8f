// Package hostmem reaches the housekeeping of hoststate's in-memory store
// that its tests and benchmarks need and a crawler does not: evicting idle
// hosts now, and counting the host states held.
package hostmem

import "github.com/egresskit/egresskit/hoststate"

// housekeeper is implemented by the Memory that hoststate.NewMemory
// returns.
type housekeeper interface {
	Evict() int
	Len() int
}

// Evict makes m forget the hosts idle for longer than their IdleTTL now,
// instead of as its shards are next used, and returns how many host states
// it dropped.
func Evict(m hoststate.Memory) int { return m.(housekeeper).Evict() }

// Len returns how many host states m holds (breaker and pacing counted
// separately).
func Len(m hoststate.Memory) int { return m.(housekeeper).Len() }
