// Command egressctl is the operator's terminal for hosts egresskit halted:
// it lists them with their evidence, shows one with its audit trail,
// resumes one with a reason (recorded in the audit log and applied
// fleet-wide), and serves the review console (package console), over the
// Redis that a fleet shares (package redisstore).
//
// Usage:
//
//	egressctl [flags] halts [-json]
//	egressctl [flags] show [-json] HOST
//	egressctl [flags] resume HOST -reason TEXT -by NAME
//	egressctl [flags] serve [-addr 127.0.0.1:8080] [-name NAMES] [-read-only] [-behind-tls] [-session-ttl 8h] [-no-token]
//
// HOST is what a person types: a host, host:port or URL, keyed as the
// chain keys it (-domain when the crawl keys by registrable domain).
// Command flags may come before or after HOST. egressctl -h lists every
// flag with its default and environment variable.
//
// Every answer names the Redis server and key prefix it comes from
// ("no host is halted (redis 127.0.0.1:6379, prefix egresskit)"): the
// server is -redis, else $EGRESSCTL_REDIS, else 127.0.0.1:6379; the
// prefix -prefix, else $EGRESSCTL_PREFIX, else egresskit. Put a Redis
// password in $EGRESSCTL_REDIS rather than on the command line.
//
// What egressctl prints comes from Redis, where any worker of a fleet
// may have written it: every field is printed as one line of printable
// text, bounded, with control and bidirectional characters replaced.
// show prints the host's audit trail from -audit and says when the log
// does not verify. A reason and a name are one line of printable text.
//
// Several processes may append to one -audit log at once (resume runs,
// consoles, the crawl's chain): each line is written under the file's
// lock and chains from the file's last line.
//
// serve reads its bearer token from $EGRESSCTL_TOKEN (never from a flag,
// so that it shows in no process list); the token must be at least 128
// bits (openssl rand -hex 16 prints one). Without a token it refuses to
// start, unless -no-token says so and it listens on a loopback address
// only. It answers only requests whose Host is an IP address, localhost
// or a name given with -name, so that a web page cannot reach it through
// DNS rebinding. It serves until interrupted.
//
// halts -json and show -json print one JSON object for scripts and
// orchestrators.
//
// Exit status, as for every egresskit command: 0 done; 1 failure (Redis
// unreachable, a file missing or unreadable, an I/O error); 2 usage (a
// bad flag, argument or -redis address; a token too weak); 3 the host is
// not halted (resume) or has no record (show).
package main
