// Command preflight probes targets and proxies within a strict time budget
// and prints a diagnosis for the orchestrator that dispatches a crawl:
// dispatch at full concurrency, dispatch slower with the recommended
// backoff, or halt.
//
// Usage:
//
//	preflight [flags] [URL ...]
//
// Targets come from arguments, from -targets FILE, or from standard input
// (-targets - or the argument -): one per line, "URL" or "URL EGRESS",
// blank lines and '#' comments skipped, a leading UTF-8 byte order mark
// ignored. Proxies come from -proxy URL (repeatable) and -proxies FILE
// ("[ID] URL [key=value ...]" per line, the pairs being the proxy's labels).
//
// -rules FILE reads egress rules, the JSON document package egress reads
// with egress.ReadRules and a crawl's pool enforces: each host is probed
// only through the proxies its rule allows, and with -matrix the report's
// "rules" list says, per rule and host, which eligible proxies the target
// answered through ("ok": false when none did).
//
// -timeout bounds the whole command, reading the input included: when
// standard input (or a named pipe) has not ended by then, preflight exits
// 2 (usage) with a message and probes nothing, rather than probing a list cut at
// an arbitrary point. Probing gets what is left of the budget.
//
// Probes are polite by default: at most -per-host (2) in flight to one
// host, each URL checked against its host's robots.txt first (fetched
// through the same proxy; a disallowed URL is reported, not probed, and
// not measured; -ignore-robots turns this off), and sent with -user-agent,
// which should be the crawler's own User-Agent so that robots.txt and
// refusals are judged for the same agent token as the crawl.
//
// The status is CRITICAL exactly when the recommendation is to halt
// (diagnosis.recommendation.halt): no measured probe, or a success rate
// below 0.5. Rate limiting alone is DEGRADED, with a smaller
// concurrency_factor and per-host pacing. blocked_count counts blocked
// probes (refused, 403 or 503, or a failed connection; a hang counts in
// timeout_count); blocking_hosts names a host only when it blocked us while
// some egress worked for another host, never a host that only
// rate-limited, so blocked_count can be above 0 with blocking_hosts empty.
// success_rate is over the measured probes: robots.txt-disallowed and
// canceled ones are counted apart (disallowed_count) and left out. diagnosis.recommendation.max_concurrency is -workers scaled
// by the concurrency factor: the number of requests in flight to start the
// crawl with.
//
// The JSON report goes to standard output, and nothing else does. When
// standard error is a terminal, progress and a summary are written there;
// otherwise standard error carries only errors. Credentials in proxy or
// target URLs never appear in either.
//
// Exit status, as every command of the module (0 ok, 1 failure, 2 usage,
// 3 and up verdicts):
//
//	0    HEALTHY (or any status with -exit-zero)
//	1    failure: the probe could not run or the report could not be
//	     written
//	2    usage error: a bad flag or header value (-user-agent with a
//	     control character), no targets, a malformed target or proxy (named
//	     by its line), an unreadable input (missing file, directory, read
//	     error), an input that did not end within -timeout, a non-positive
//	     timeout; nothing was sent
//	3    DEGRADED
//	4    CRITICAL
//	130  interrupted; the partial report is still written
//
// Example:
//
//	preflight -timeout 10s -proxy http://user:pass@10.0.0.5:3128 \
//	    -matrix https://example.com/ https://example.org/robots.txt
package main
