// Package redisstore keeps egresskit's shared state in Redis, so that many
// worker processes on many machines share it: Store implements
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
// host on Refused and adapts the pacing. No lock is held while an attempt
// is in flight (unlike gobreaker's DistributedCircuitBreaker, which would
// serialise a host's whole fleet). Time is the Redis server's (TIME inside
// the script), so workers with skewed clocks agree.
//
// An attempt costs one round trip, amortised: the OK outcome of an
// attempt that was not a half-open probe is held back (Config.RecordDelay,
// 1s) and rides with the worker's next script for that host, which
// applies it first, at the time it was made; a timer sends what is left
// when the delay ends, and Store.Flush sends everything. Every other
// outcome is recorded at once, with the OKs held before it. A fast host
// (one whose rate gives at least 2 tokens in Config.LeaseWindow, 100ms:
// 1,200 requests a minute or more, with a burst to spare) is also leased:
// an admission that asks Redis takes up to 16 of the tokens the host has
// on hand, which the Store's next admissions of the host use without a
// round trip until they run out or the window ends; its own outcome other
// than OK ends the lease. The windows, guarantee by guarantee:
//
//   - halts: none for a host that is not leased. A Refused outcome is
//     recorded at once; every admission reads the halt in Redis (and a
//     Store's own memory of halts, below). A worker holding a lease of the
//     host sees another's halt when the lease ends: up to LeaseWindow, at
//     most 16 attempts.
//   - breaker opening and half-open probes: none for a host that is not
//     leased, up to LeaseWindow for one that is (as halts). Failures,
//     throttles at the floor and probe outcomes are recorded at once, and
//     so is every outcome whose admission this Store saw open or
//     half-open; a host whose latest outcome was a failure, or whose
//     breaker is not closed, is not leased.
//   - pacing: tokens and pauses are taken and set at once; a throttle is
//     seen fleet-wide at once (up to LeaseWindow by a worker holding a
//     lease; a host that has throttled keeps a burst of one and is not
//     leased again). The recovery after a throttle and the OK
//     counts (Status.Recent) of other workers lag by up to RecordDelay.
//   - the breaker's failure count: an OK resets it up to RecordDelay late;
//     failures that came after it, recorded meanwhile, are reset with it,
//     as if the OK's answer had come that much later.
//   - latency: a host's latency averages, and so its slowing and the base
//     latency each admission reports (hoststate.Admission.BaseLatency),
//     take other workers' OKs up to RecordDelay late. A slowing host's
//     pause (while the queue drains) is set with the OK that shows it, so
//     up to RecordDelay late, and then seen as a throttle's pause is (up to
//     LeaseWindow by a worker holding a lease). The in-flight cap is
//     each process's own, sized by Little's law on that shared base
//     latency: no fleet-wide count of attempts in flight is kept.
//   - a worker that stops: the OKs it held are sent by Flush; a worker that
//     dies loses up to RecordDelay of OKs (no failure, halt or pause is
//     ever held back), and so does one whose Redis cannot take them.
//
// With RecordDelay negative, every outcome is recorded at once: two round
// trips per attempt.
//
// # Keys
//
// A host's keys are
//
//	PREFIX:{HOST}:st       string: breaker and pacing, packed (below)
//	PREFIX:{HOST}:halt     string: when the halt began (microseconds)
//	PREFIX:{HOST}:resumed  string: when the host was last resumed
//	PREFIX:{HOST}:halts    list: the halt records (hoststate.HaltLog), newest first
//	PREFIX:{HOST}:notes    list: the operators' notes, newest first
//	PREFIX:halted          sorted set: the halted hosts, by when (the console's queue)
//
// The two lists hold 16 JSON records each, bounded in size; they expire
// 30 days after the host was resumed with a note, and never while it is
// halted.
// The host is the hash tag, so each script touches one Redis Cluster slot;
// host keys may contain ':' and '.', but not braces (rejected with
// ErrInvalidHost). The state key expires when the host has been idle for the
// longer of the breaker's and the limiter's IdleTTL, and not before an
// open circuit's open period or a Retry-After pause has ended; while the
// host is halted it does not expire. The halt and resume keys have no
// TTL: a halt is lifted by Resume only, never by time (nor by deleting its
// key: workers that remember it write it back). Idle state is also
// forgotten logically, inside the scripts, by the same rules as in
// memory, so an injected clock sees the same eviction as the real one.
//
// The state is one string of 410 bytes, read with GET and written with
// SET … PX only when a script changed it: a version byte (1), a byte of
// flags (1: the breaker part is there, 2: the pacing part), then 51
// little-endian IEEE 754 doubles, the breaker's 9 fields and the pacing's
// 42 in the order lua/common.lua lists them (the last 9 — the host's
// latency averages, the refused share of its answers, whether its latest
// pause was a stray refusal's, how often its admissions waited for a
// token, whether the latest did, a slow average of the gaps between its
// OKs, the highest rate it was refused at and when its latency rose —
// extend the first layout of 338
// bytes, which reads as having them all zero). Bytes after those (a newer
// version's fields) are kept as they are. A packed string costs the Lua
// scripts far less than a hash of 42 fields: no field names to build,
// parse and write back on every call.
//
// Versions before the packed state kept it in a hash, PREFIX:{HOST}:s.
// This version does not read it: after an upgrade every host starts with a
// fresh breaker and pacing state (as if it had been idle past IdleTTL),
// while its halt, resume and log keys, unchanged, carry over — a halted
// host stays halted. The old hashes expire by their own TTL, except those
// of hosts halted at the upgrade, which had none: Resume deletes the
// host's old hash. During a rolling upgrade, workers of the two versions
// share halts but not breaker and pacing state.
//
// # Halts that outlive Redis's data
//
// Redis can lose a halt: a restart without persistence, a failover to a
// replica that had not received it, an eviction. New therefore refuses a
// server whose maxmemory-policy evicts keys without a TTL (allkeys-*;
// Config.AllowEviction accepts it, unsafely), and every Store remembers
// the halts it has seen — those it made and those Redis reported to it (up
// to 65,536) — and writes them back, unless the host was resumed since:
//
//   - before it returns an admission of a host whose halt it remembers:
//     the requests of a worker that saw a halt never reach the host after
//     Redis lost it (window: none);
//   - when a Redis server's run_id changed, or its evicted_keys grew
//     (read with INFO), checked after every new connection to Redis
//     (go-redis reconnects after a restart or failover) on the Store's
//     next operation, and every Config.CheckInterval (5s) while it is
//     used or while Store.Watch runs. A worker that never saw a halt is protected once one that
//     remembers it has written it back: at that worker's next operation
//     after the restart, or within CheckInterval when it runs Watch
//     (window: one CheckInterval, if every worker that saw the halt is
//     idle and runs Watch; unbounded if none runs and none is used).
//
// A Restored Warning names the hosts written back. The memory is the
// process's, unless Config.Journal names a file that keeps it: then a
// worker restarted together with Redis writes its halts back from New on.
// Without a journal, halts are safest with Redis persistence (appendonly)
// and replicas as well. When INFO is refused (some managed Redis
// services), an Unchecked Warning says so and only the first rule
// applies. A policy that turns to allkeys-* after New is reported by the
// next check with an Unchecked Warning.
//
// # Redis Cluster
//
// Every script touches one slot, so a *redis.ClusterClient works as is
// (tested on a cluster of 3 masters made with redis-cli --cluster
// create). Run the cluster with cluster-require-full-coverage no: then a
// master that is down takes only its own slots with it. The hosts of the
// other slots keep their breakers, pacing and halts in Redis; the hosts
// of the lost slots follow Config.OnRedisError: FailClosed fails their
// attempts (not sent); FailOpen runs those hosts alone on local state
// until their master answers again (the halts the Store remembers stay
// refused; halts other workers make on those hosts meanwhile are not
// seen), with a Outage and then a Recovered Warning naming the master.
// When the master comes back empty, the halts of its slots are written
// back as after any restart.
//
// # TLS
//
// Session values are sealed before they are stored, but host names,
// halts and the sealed blobs still cross the network, and so does the
// Redis password: reach Redis over TLS as go-redis does, with
// Options.TLSConfig (ClusterOptions.TLSConfig for a Cluster, or a
// rediss:// URL):
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "redis.internal:6379",
//		TLSConfig:             &tls.Config{RootCAs: ca, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12},
//		ContextTimeoutEnabled: true,
//	})
//
// and start redis-server with --port 0 (no plain port), --tls-port,
// --tls-cert-file, --tls-key-file, --tls-ca-cert-file and, to require
// client certificates, --tls-auth-clients yes. A new connection's
// handshake counts against Config.Timeout: keep connections in the pool
// (MinIdleConns) or allow for it.
//
// A key holding something this package did not write — another type, a
// state string too short, of another version or with unknown flags, or a
// field out of its range (the CorruptError's Reason names it) — is
// reported as ErrCorrupt and left alone; an operator deletes or fixes it.
// A Refused outcome sets the halt before the state is read, so a corrupt
// state never loses a halt.
//
// Other kinds of shared state may live in this package under other key
// suffixes of the same prefix.
package redisstore
