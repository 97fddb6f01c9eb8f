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
// blank lines and '#' comments skipped. Proxies come from -proxy URL
// (repeatable) and -proxies FILE ("[ID] URL" per line).
//
// The JSON report goes to standard output, and nothing else does. When
// standard error is a terminal, progress and a summary are written there;
// otherwise standard error carries only errors. Credentials in proxy or
// target URLs never appear in either.
//
// Exit status:
//
//	0    HEALTHY (or any status with -exit-zero)
//	1    DEGRADED
//	2    CRITICAL
//	64   usage error: a bad flag, no targets, a malformed target or proxy
//	     (named by its line), a non-positive timeout; nothing was sent
//	70   the probe could not run or the report could not be written
//	130  interrupted; the partial report is still written
//
// Example:
//
//	preflight -timeout 10s -proxy http://user:pass@10.0.0.5:3128 \
//	    -matrix https://example.com/ https://example.org/robots.txt
package main
