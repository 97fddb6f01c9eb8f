#!/usr/bin/env bash
# run-broad.sh prints the Markdown sections of RESULTS.md for the broad
# crawl with stray 429s (issue 35), the slowing server crawled by a fleet
# and the crawl-scale fleet (issue 36): it runs BenchmarkBroadCrawl and
# BenchmarkCrawlScale with the bench test binary given as $1 (built by
# run.sh; without it, it builds one), and renders the root package's TestBroadCrawlStray429s
# -broad.long and TestSlowServerFleet -slowfleet.procs output and this
# module's TestCrawlScale -crawlscale.long output, which the root
# Makefile's bench target writes to broadcrawl.txt, slowfleet.txt and
# crawlscale.txt first. run.sh calls it inside the block
# that writes RESULTS.md; progress goes to stderr.
#
# Environment: GO (default go), BROAD_RUN (each contender's crawl, default
# 3m).
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-go}
bin=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$bin" ]; then
	bin="$work/bench.test"
	$GO test -c -o "$bin" . >&2
fi
out="$work/broad.txt" scale="$work/scale.txt"
echo "== broad crawl with stray 429s, each contender ${BROAD_RUN:-3m}" >&2
"$bin" -test.run '^$' -test.bench '^BenchmarkBroadCrawl$' -test.benchtime 1x -broad.run "${BROAD_RUN:-3m}" | tee "$out" >&2
echo "== crawl scale: the contenders without shared state, 1,000 hosts, 3 minutes each" >&2
"$bin" -test.run '^$' -test.bench '^BenchmarkCrawlScale$' -test.benchtime 1x -crawlscale.long | tee "$scale" >&2

# broad_bench_table renders the BenchmarkBroadCrawl lines.
broad_bench_table() {
	awk '/^BenchmarkBroadCrawl\/impl=/ {
		split($1, p, "="); impl = p[2]; sub(/-[0-9]+$/, "", impl)
		delete v
		for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
		rates = "—"
		if ("rate-min/min" in v) rates = sprintf("%.0f / %.0f / %.0f", v["rate-min/min"], v["rate-p10/min"], v["rate-p50/min"])
		printf "| %s | %d | %d | %d | %.2f× | %d | %.2f %% | %s |\n", impl, v["pages-200"], v["second-window"],
			v["last-window"], v["last/second"], v["failed"], v["429-%"], rates
	}' "$out"
}

# broad_test_table renders the broad-crawl lines of broadcrawl.txt.
broad_test_table() {
	if [ ! -s broadcrawl.txt ]; then
		echo "| (not run: \`make bench\` at the root runs it first) | | | | | |"
		return
	fi
	awk '/broad-crawl store=/ {
		delete v
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
		gsub(",", " ", v["windows"])
		printf "| %s | %s | %.2f× | %s / %s / %s | %d | %d of %d (%.2f %%) |\n", v["store"], v["windows"], v["ratio"],
			v["min"], v["p10"], v["p50"], v["errors"] + v["refused"], v["throttled"], v["answered"], 100 * v["throttled"] / v["answered"]
	}' broadcrawl.txt
}

# slow_fleet_table renders the slow-fleet lines of slowfleet.txt.
slow_fleet_table() {
	if [ ! -s slowfleet.txt ]; then
		echo "| (not run: \`make bench\` at the root runs it first) | | | | | | |"
		return
	fi
	awk '/slow-fleet case=/ {
		delete v
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
		cap = v["max-in-flight"] == 0 ? "default" : v["max-in-flight"]
		printf "| %s | %s × %s, MaxInFlight %s | %s × %s ms | %d (%.1f) | %d / %d ms | %.2f× | %d / %d |\n", v["case"],
			v["workers"], v["goroutines"], cap, v["slots"], v["service-ms"], v["server-max"], v["server-mean"],
			v["p50-ms"], v["p95-ms"], v["throughput"] / v["capacity"], v["ok"], v["pages"]
	}' slowfleet.txt
}

# crawl_scale_table renders the crawl-scale-kind lines of crawlscale.txt.
crawl_scale_table() {
	if [ ! -s crawlscale.txt ]; then
		echo "| (not run: \`make bench\` at the root runs it first) | | | | | |"
		return
	fi
	awk '/crawl-scale-kind impl=egresskit-fleet / {
		delete v
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
		ratio = v["ratio"] == "—" ? "—" : sprintf("%.2f×", v["ratio"])
		printf "| %s | %d | %.1f | %d / %d | %s | %d of %d |\n", v["kind"], v["hosts"], v["allowed"],
			v["ok"], v["requests"], ratio, v["throttled"], v["attempts"]
	}' crawlscale.txt
}

# crawl_scale_contenders renders the crawl-scale lines of every
# contender: egresskit's fleet from crawlscale.txt, the others from
# BenchmarkCrawlScale.
crawl_scale_contenders() {
	cat crawlscale.txt "$scale" 2>/dev/null | awk '/crawl-scale impl=/ {
		delete v
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
		evalsha = v["impl"] == "egresskit-fleet" ? sprintf("%.2f", v["evalsha-per-request"]) : "—"
		printf "| %s | %.1f of %.1f (%.2f×) | %.1f %% | %.2f | %d | %d | %d | %s |\n", v["impl"], v["ok"] / v["seconds"], v["allowed"], v["ratio"],
			100 * v["throttled"] / (v["attempts"] > 0 ? v["attempts"] : 1), v["slow-p95-over-service-max"], v["slow-peak"],
			v["failing-most"], v["refusing-most"], evalsha
	}'
}

# crawl_scale_summary renders egresskit's crawl-scale line of crawlscale.txt.
crawl_scale_summary() {
	[ -s crawlscale.txt ] || return 0
	awk '/crawl-scale impl=egresskit-fleet / {
		delete v
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
		printf "In all: %d hosts, %.1f pages 200 a second of %.1f allowed (%.2f×); %d of %d attempts 429 (%.1f %%); ", v["hosts"], v["ok"] / v["seconds"], v["allowed"], v["ratio"], v["throttled"], v["attempts"], 100 * v["throttled"] / v["attempts"]
		printf "%.2f EVALSHA a request; slowing hosts: p95 latency over service time median %.2f, max %.2f; ", v["evalsha-per-request"], v["slow-p95-over-service-median"], v["slow-p95-over-service-max"]
		printf "most requests in flight at one host across the fleet %d; most requests to a failing host %d, to a refusing host %d.\n", v["peak"], v["failing-most"], v["refusing-most"]
	}' crawlscale.txt
}

cat <<EOF

## A broad crawl with stray refusals

200 hosts, each configured at 600 requests a minute, 32 workers taking the hosts round-robin, against
servers that answer 2 % of requests at random 429 with \`Retry-After: 1\` (a loaded shard, not a rate
limit). The bar (issue 35): the pages answered 200 in the last 15 s window at least 0.95× the second
window's, every host's pacing rate at the end at least half its configured rate, no caller error, 429s
at the servers' 2 %.

The root package's \`TestBroadCrawlStray429s -broad.long\` (3 minutes, pages per 15 s window):

| state | pages 200 per window | last / second | pacing rates at the end, min / p10 / p50 a minute | caller errors | answers 429 |
|---|---|---:|---|---:|---:|
$(broad_test_table)

\`BenchmarkBroadCrawl\` (bench module), each contender alone for ${BROAD_RUN:-3m} against a server of its own: egresskit
from \`DefaultConfig()\` (3 retries) in memory and with Redis, \`bare\` an \`http.Client\` (no retry),
\`colly\` Colly's \`LimitRule\` (\`DomainGlob: "*"\`, 100 ms delay, 32 in parallel), \`autothrottle-ref\` the
AutoThrottle reference (100 ms minimum delay). Failed: requests that ended in an error or a status other
than 200.

| contender | pages 200 | second window | last window | last / second | failed | answers 429 | pacing rates min / p10 / p50 |
|---|---:|---:|---:|---:|---:|---:|---|
$(broad_bench_table)

## A fleet against a slowing server

The root package's \`TestSlowServerFleet -slowfleet.procs\` (issue 36): a server whose workers serve a request
each in 100 ms and queue the rest (never a 429), crawled by egresskit configured at 6,000 a minute —
three worker processes sharing one Redis, or one with its state in memory. What the server saw: requests
in flight at most (mean), latency p50 / p95, throughput over its capacity. The bars: the fleet of 3 and
the uncapped worker at most 8 in flight, p95 at most 300 ms, at least 0.85× capacity; the default cap
against 2 workers at most 6 in flight, p95 at most 300 ms, at least 0.8×.

| case | workers × goroutines | server | in flight max (mean) | p50 / p95 | throughput / capacity | pages 200 |
|---|---|---|---:|---:|---:|---:|
$(slow_fleet_table)

## A fleet at crawl scale

This module's \`TestCrawlScale -crawlscale.long\` (issue 36): 3 worker processes sharing a real 3-master
Redis Cluster, each crawling every host with 2 goroutines a host, all 1,000 hosts at once, for 3 minutes,
every host configured at 12 requests a minute: healthy hosts; hosts behind real nginx (\`limit_req\` 6 a
minute, burst 1 nodelay) and HAProxy (2 per 20 s sliding, refused requests counted), each host limited
on its own; slowing hosts (one worker, 8 s a page, the rest queued); hosts answering 2 % of requests
429 at random; failing hosts (503); refusing hosts (a 403 challenge). Allowed: what the hosts allow a
second, summed per kind. The bars: at most 1.1 EVALSHA a request; a slowing host at most 2 in flight,
p95 at most 3× its service time.

| kind | hosts | allowed r/s | pages 200 / requests | achieved / allowed | attempts 429 |
|---|---:|---:|---:|---:|---:|
$(crawl_scale_table)

$(crawl_scale_summary)

Beside the crawlers that share no state (\`BenchmarkCrawlScale\`, each as 3 workers in one process, the same
hosts against servers of their own, one after another): \`bare\` an \`http.Client\`, \`colly\` Colly with a
\`LimitRule\` a host (2 in parallel, 5 s delay), \`autothrottle-ref\` the AutoThrottle reference (5 s minimum
delay).

| contender | pages 200 a second of allowed | attempts 429 | slowing hosts' worst p95 / service | slowing host's most in flight | requests to a failing host | to a refusing host | EVALSHA a request |
|---|---:|---:|---:|---:|---:|---:|---:|
$(crawl_scale_contenders)
EOF
