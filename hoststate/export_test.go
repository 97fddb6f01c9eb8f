package hoststate

// Evict forgets m's idle hosts now and returns how many host states it
// dropped; Len returns how many it holds. Tests only: a crawler leaves
// eviction to the store.
func Evict(m Memory) int { return m.(*memory).evict() }

// Len returns how many host states m holds (breaker and pacing counted
// separately).
func Len(m Memory) int { return m.(*memory).len() }
