// Command egressctl is the operator's terminal for hosts egresskit halted:
// it lists them with their evidence, shows one, resumes one with a reason
// (recorded in the audit log and applied fleet-wide), and serves the
// review console (package console), over the Redis that a fleet shares
// (package redisstore).
//
// Usage:
//
//	egressctl [flags] halts [-json]
//	egressctl [flags] show [-json] HOST
//	egressctl [flags] resume HOST -reason TEXT -by NAME
//	egressctl [flags] serve [-addr 127.0.0.1:8080] [-read-only]
//
// HOST is what a person types: a host, host:port or URL, keyed as the
// chain keys it (-domain when the crawl keys by registrable domain).
// Subcommand flags may come before or after HOST.
//
// Flags (before the command):
//
//	-redis ADDR     host:port, or a redis:// or rediss:// (TLS) URL; default
//	                $EGRESSCTL_REDIS, else 127.0.0.1:6379. Put a password in
//	                $EGRESSCTL_REDIS rather than on the command line.
//	-cluster        ADDR is a Redis Cluster: a comma-separated list of
//	                seeds, or a URL with addr= parameters
//	-tls-ca FILE    trust this CA for the server's certificate (implies TLS)
//	-tls-cert FILE, -tls-key FILE   a client certificate
//	-prefix P       the stores' key prefix (redisstore.Config.Prefix)
//	-audit FILE     the audit log resume and keep-halted lines are written
//	                to, and show and the console read a host's trail from;
//	                give egressctl its own file: a log has one writer
//	-domain         hosts are keyed by registrable domain
//
// serve reads its bearer token from $EGRESSCTL_TOKEN (never from a flag, so
// that it shows in no process list); without one the console must sit
// behind the operator's own authentication. It serves until interrupted.
//
// halts -json and show -json print one JSON object for scripts and
// orchestrators.
//
// Exit status: 0 done; 1 an error (Redis unreachable, a bad certificate);
// 2 usage; 3 the host is not halted (resume) or unknown (show).
package main
