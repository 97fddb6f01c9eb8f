// Package redisstore keeps egresskit's shared state in Redis, so that many
// worker processes on many machines share it: State implements
// hoststate.Store — one circuit breaker, one pacing budget and one halt
// per host, with exactly the semantics of hoststate.Memory (both pass the
// scenarios of package hoststatetest).
//
// # Scripts
//
// Every decision is one atomic Lua script, run with EVALSHA (reloaded
// after NOSCRIPT): "admit" checks the halt, then the breaker (an ended
// open period becomes half-open; half-open probes are counted), then takes
// a pacing token; "record" counts the outcome in the breaker, halts the
// host on Refused and adapts the pacing. An attempt therefore costs two
// round trips, one before and one after, and no lock is held while it is
// in flight (unlike gobreaker's DistributedCircuitBreaker, which would
// serialise a host's whole fleet). Time is the Redis server's (TIME inside
// the script), so workers with skewed clocks agree.
//
// # Keys
//
// A host's keys are
//
//	PREFIX:{HOST}:s     hash: breaker and pacing fields
//	PREFIX:{HOST}:halt  string: when the halt began (microseconds)
//
// The host is the hash tag, so each script touches one Redis Cluster slot;
// host keys may contain ':' and '.', but not braces (rejected with
// *HostError). The state hash expires when the host has been idle for the
// longer of the breaker's and the limiter's IdleTTL, and not before an
// open circuit's open period or a Retry-After pause has ended; while the
// host is halted it does not expire. The halt key has no TTL: a halt is
// lifted by Resume only, never by time. (Use a maxmemory-policy of
// noeviction or a volatile-* one, so that Redis never evicts a key
// without a TTL.) Idle state is also forgotten logically, inside the
// scripts, by the same rules as in memory, so an injected clock sees the
// same eviction as the real one.
//
// A key holding something this package did not write — another type, or
// fields that do not parse — is reported as *CorruptError and left alone;
// an operator deletes or fixes it. A Refused outcome sets the halt before
// the state hash is read, so a corrupt hash never loses a halt.
//
// Other kinds of shared state may live in this package under other key
// suffixes of the same prefix.
package redisstore
