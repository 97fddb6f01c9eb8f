#!/usr/bin/env bash
# run.sh runs the bench module's benchmarks, compares the contenders with
# benchstat, profiles the chain, and rewrites RESULTS.md whole (and
# results.txt, the raw benchmark output it was made from). RESULTS.md is
# never edited by hand: the analysis of each section is kept in
# notes/SECTION.md, which run.sh includes after the section's tables
# (politeness, slow, pacing, profile, redis), so that one run rewrites
# every table without losing what was written about them.
#
# Environment: COUNT (runs of each benchmark, default 6), GO (default go),
# EGRESSKIT_REDIS_ADDR (default 127.0.0.1:6379; without a Redis server
# there the Redis contender is skipped and reported as not run).
set -euo pipefail

cd "$(dirname "$0")"
GO=${GO:-go}
COUNT=${COUNT:-6}
# Benchmark time per run of each group.
OVERHEAD_TIME=${OVERHEAD_TIME:-1s}
LOOPBACK_TIME=${LOOPBACK_TIME:-2s}
SELECT_TIME=${SELECT_TIME:-300ms}
PROBE_TIME=${PROBE_TIME:-3x}
HOSTS_TIME=1x

started=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bindir=$($GO env GOBIN)
[ -n "$bindir" ] || bindir="$($GO env GOPATH)/bin"
benchstat=$(command -v benchstat || true)
if [ -z "$benchstat" ]; then
	benchstat="$bindir/benchstat"
	if [ ! -x "$benchstat" ]; then
		echo "== installing benchstat" >&2
		$GO install golang.org/x/perf/cmd/benchstat@latest
	fi
fi

echo "== building" >&2
$GO test -c -o "$work/bench.test" .
$GO build -o "$work/benchratios" ./cmd/benchratios

raw="$work/raw.txt"
# group PATTERN BENCHTIME runs one group of benchmarks COUNT times, one
# round of all its contenders after another (go test -count would run
# each contender COUNT times in a row), so that a change of the machine's
# load during the run falls on every contender alike.
group() {
	echo "== $1: -benchtime=$2, $COUNT rounds" >&2
	for _ in $(seq "$COUNT"); do
		"$work/bench.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2" | tee -a "$raw" >&2
	done
}
group '^BenchmarkOverhead$' "$OVERHEAD_TIME"
group '^BenchmarkLoopback$' "$LOOPBACK_TIME"
group '^BenchmarkHosts$' "$HOSTS_TIME"
group '^BenchmarkSelect$' "$SELECT_TIME"
group '^BenchmarkProbe$' "$PROBE_TIME"

# Politeness runs once: every contender crawls each real rate limiter of
# testprog.Limiters at 2 and 10 r/s, each crawl against a limiter of its
# own, all at once, for about three minutes; its numbers are not for
# benchstat.
polite="$work/polite.txt"
echo "== politeness against real rate limiters (about three minutes)" >&2
"$work/bench.test" -test.run '^$' -test.bench '^BenchmarkPoliteness$' -test.benchtime 1x | tee "$polite" >&2

# polite_table turns the BenchmarkPoliteness lines into a Markdown table;
# a crawl is two minutes' worth of pages at the allowed rate.
polite_table() {
	awk '/^BenchmarkPoliteness\// && / pages-200/ {
		split($1, p, "/"); limiter = p[2]; server = p[3]; impl = p[4]
		sub(/^limiter=/, "", limiter); sub(/^server=/, "", server); sub(/rps$/, "", server)
		sub(/^impl=/, "", impl); sub(/-[0-9]+$/, "", impl)
		for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
		pages = 120 * server
		ratio = sprintf("%.2f×", v["ratio"])
		if (v["pages-200"] < pages) ratio = "— (pages lost)"
		printf "| %s | %s | %s | %d / %d | %.2f | %s | %d | %.1f %% |\n", limiter, server, impl,
			v["pages-200"], pages, v["achieved-r/s"], ratio, v["attempts"], v["429-%"]
	}' "$polite"
}

# The slowing server runs once: every contender crawls its own server with
# 8 workers and a 1s service time, all at once, for about 30s.
slow="$work/slow.txt"
echo "== a slowing server (about 30s)" >&2
"$work/bench.test" -test.run '^$' -test.bench '^BenchmarkSlowServer$' -test.benchtime 1x | tee "$slow" >&2

# slow_table turns the BenchmarkSlowServer lines into a Markdown table.
slow_table() {
	awk '/^BenchmarkSlowServer\// {
		split($1, p, "/"); impl = p[2]
		sub(/^impl=/, "", impl); sub(/-[0-9]+$/, "", impl)
		for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
		printf "| %s | %d | %.1f | %d ms | %d ms | %.2f× | %d / 240 |\n", impl, v["max-inflight"], v["mean-inflight"], v["p50-ms"], v["p95-ms"], v["capacity-share"], v["pages-200"]
	}' "$slow"
}

# Redis state at fleet scale: Redis's cost per request for this tree and
# an older commit (REDISLOAD_BASE, default the merge base with main),
# interleaved on one redis-server; then a fleet of worker processes on a
# 3-master Redis Cluster (FLEET_TIME, default 20s).
echo "== Redis cost per request, this tree against ${REDISLOAD_BASE:-the merge base with main}" >&2
redisload=$(./run-redisload.sh ${REDISLOAD_BASE:-} | tee /dev/stderr)
echo "== fleet simulation on a 3-master Redis Cluster" >&2
$GO build -o "$work/fleetsim" ./cmd/fleetsim
fleet=$("$work/fleetsim" -duration "${FLEET_TIME:-20s}" | tee /dev/stderr)

# converge_table turns the converge-cell lines of the root package's
# TestConvergesOnLimiters, which the root Makefile's bench target writes to
# converge.txt before running this script, into a Markdown table.
converge_table() {
	if [ ! -s converge.txt ]; then
		echo "| (not run: \\`make bench\\` at the root runs the matrix first) | | | | | | |"
		return
	fi
	awk '/converge-cell / {
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
		store = v["store"] == "redis" ? "Redis fleet of 2" : "memory"
		printf "| %s | %s | %s | %d / %d | %.2f | %.2f× | %d of %d (%.1f %%) |\n", v["limiter"], v["allowed"], store,
			v["ok"], v["pages"], v["ok"] / v["seconds"], v["ok"] / v["seconds"] / v["allowed"],
			v["throttled"], v["attempts"], 100 * v["throttled"] / v["attempts"]
	}' converge.txt | sort
}

# Profiles of the chain in memory on the 32 KiB HTML page (a page the
# classifier peeks at): CPU, and every allocation (rate 1) of the chain and
# of the bare client, whose difference is what the chain allocates.
echo "== profiling the chain" >&2
prof_n=300000
alloc_n=20000
prof_body=html-32KiB
"$work/bench.test" -test.run '^$' -test.bench "^BenchmarkOverhead\$/^body=$prof_body\$/^impl=chain\$" -test.benchtime "${prof_n}x" \
	-test.cpuprofile "$work/cpu.prof" >/dev/null
for impl in bare chain; do
	"$work/bench.test" -test.run '^$' -test.bench "^BenchmarkOverhead\$/^body=$prof_body\$/^impl=$impl\$" -test.benchtime "${alloc_n}x" \
		-test.memprofile "$work/mem-$impl.prof" -test.memprofilerate 1 >/dev/null
done

# Paths in profiles, shortened to what a reader can find in the repository,
# the Go distribution or a module.
root=$(cd .. && pwd)
goroot=$($GO env GOROOT)
modcache=$($GO env GOMODCACHE)
shorten() { sed -e "s#$root/##g" -e "s#$goroot/src/##g" -e "s#$modcache/##g"; }

alloc_sites() {
	$GO tool pprof -top -lines -sample_index=alloc_objects -nodecount=60 \
		-diff_base "$work/mem-bare.prof" "$work/bench.test" "$work/mem-chain.prof" 2>/dev/null |
		sed 's/ (inline)$//' |
		awk -v n="$alloc_n" '
			NF >= 7 && $2 ~ /%$/ && $5 ~ /%$/ && $1 > 0 {
				per = $1 / n
				if (per < 0.5) next
				fn = $6
				for (i = 7; i < NF; i++) fn = fn " " $i
				printf "| %.0f | `%s` | %s |\n", per, fn, $NF
			}' | shorten
}

cpu_top() {
	$GO tool pprof -top -cum -nodecount=100 "$work/bench.test" "$work/cpu.prof" 2>/dev/null |
		awk 'NF >= 6 && $2 ~ /%$/ && $5 ~ /%$/ && $6 !~ /^(runtime|testing|internal)[.\/]/ && $6 !~ /egresskit\/bench\./ {
			fn = $6
			for (i = 7; i <= NF; i++) fn = fn " " $i
			printf "%7s  %s\n", $5, fn
		}' | head -30
}

# stats runs benchstat on results.txt (by that name, which heads its
# columns).
stats() { "$benchstat" "$@" results.txt | grep -v '^\(goos\|goarch\|pkg\|cpu\):'; }

loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
elapsed=$(($(date +%s) - started))
cpu_model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
[ -n "$cpu_model" ] || cpu_model=$(grep -m1 '^cpu:' "$raw" | cut -d: -f2- | sed 's/^ *//')
if grep -q '^BenchmarkOverhead/body=[^/]*/impl=redis' "$raw"; then
	redis="ran against ${EGRESSKIT_REDIS_ADDR:-127.0.0.1:6379}"
else
	redis="**not run**: no Redis server answered at ${EGRESSKIT_REDIS_ADDR:-127.0.0.1:6379}"
fi

busy=""
if awk -v l="${load_start%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
	busy="
> **The machine was busy during this run** (load average ${load_start%% *} on $(nproc) cores at the start):
> wall times and throughputs moved within the confidence intervals shown in the tables, so their
> verdicts are uncertain; CPU time, bytes and allocations per request are the steadier comparisons.
"
fi

# notes prints notes/NAME.md, the hand-written analysis of a section,
# when there is one.
notes() {
	if [ -s "notes/$1.md" ]; then
		echo
		cat "notes/$1.md"
	fi
}

cp "$raw" results.txt
{
	cat <<EOF
# Benchmark results

Regenerated whole by \`make bench\` (\`bench/run.sh\`) on $(date -u '+%Y-%m-%d %H:%M UTC'), every table from
this one run; do not edit by hand. The analysis under a section comes from \`bench/notes/\`, written by
hand and included as it is: check it against the tables above it when they change. The raw output is in
[results.txt](results.txt): \`benchstat -col /impl results.txt\` reproduces the tables.

## Machine and run

- CPU: $cpu_model, $(nproc) cores (GOMAXPROCS $(nproc))
- $($GO version)
- Load average (1, 5, 15 min) at the start: $load_start; at the end: $loadavg_end.
  Wall times include waiting for a core when other processes are busy: on a loaded machine compare
  \`cpu-sec/op\` (the CPU time of the process per request), allocations and bytes, which the load does not change.
- Redis contender: $redis.
- Each benchmark ran $COUNT times (as \`-count=$COUNT\`, but in $COUNT rounds of all contenders); \`-benchtime\`: overhead $OVERHEAD_TIME,
  loopback $LOOPBACK_TIME, hosts $HOSTS_TIME, select $SELECT_TIME, probe $PROBE_TIME. The whole run took ${elapsed}s.
$busy
## What runs

The same GET, its body read to the end and closed, through five contenders (\`impl=\`), for three bodies
(\`body=\`): \`text-128B\`, the canned 128-byte \`text/plain\` body (the classifier does not read text/plain);
\`html-32KiB\`, the first 32 KiB of a real article page (the Wikipedia article on Go kept as goquery v1.11.0's
\`testdata/gowiki.html\`, in the classifier's corpus at \`classify/testdata/corpus/benign/goquery/gowiki.html\`);
\`html-256KiB\`, the first 256 KiB of the Go specification as the Go distribution ships it (\`\$GOROOT/doc/go_spec.html\`).
Both HTML pages are served as \`text/html\`, so the chain judges them by their first KiB (the classifier's
\`OKPeekSize\` for a 2xx answer), read and scanned inside the caller's first \`Read\`. The contenders:
\`bare\` (an \`http.Client\` over the base transport: the physical limit), \`chain\` (egresskit: classify, retry,
per-host breaker and limiter at a rate that never binds, in-memory state, no observer, robots.txt off),
\`redis\` (the same chain, its state in Redis, failing closed), \`retryablehttp\` (go-retryablehttp's
\`RoundTripper\` alone, no logger) and \`failsafe\` (failsafe-go's \`failsafehttp\` \`RoundTripper\` with a
retry policy, a circuit breaker and a smooth rate limiter that never binds; one of each for all hosts).
Every retrying contender gets 3 retries, 500 ms base delay, 30 s cap; every request carries a User-Agent.

- **Overhead**: in-memory base transport (a 200 with the body), one request at a time. The egress
  pool cannot take an in-memory transport, so here the chain sends through its Base and egress is left out;
  its cost is measured by Select below.
- **Loopback**: an HTTP/1.1 keep-alive \`httptest\` server on 127.0.0.1, 64 goroutines, connections warmed up;
  the chain sends through a one-endpoint direct egress pool configured like the bare client's transport: in
  particular without a response-header timeout (\`ResponseHeaderTimeout: -1\`), which the bare client does not
  have either. With the pool's default of 30 s, net/http arms a timer per request: four more allocations and
  about 1 µs more CPU per request. Client and server share the cores; B/op,
  allocs/op and \`cpu-ns/op\` (the process's CPU time per request) include the server's.
- **Hosts**: one request to each of 100,000 hosts through the chain (in memory), then the heap the chain keeps
  per host while it tracks them (\`live-B/host\`) and after they idled past the IdleTTL and were evicted
  (\`evicted-B/host\`).
- **Select**: egress selection over 1 and 1,000 proxy endpoints for 1,000 hosts, cached and first-time.
- **Probe**: \`probe.Run\` over 1,000 loopback targets, default options (64 in flight): wall time and peak heap.

EOF
	"$work/benchratios" "$raw"
	cat <<EOF

## Contenders side by side

Medians with 95% confidence intervals; \`vs base\` compares each contender with the bare client.

\`\`\`
$(stats -col /impl -row .name,/body -filter '.name:(Overhead OR Loopback)')
\`\`\`

## Politeness against real rate limiters

Every contender crawls each of four real rate limiters (\`testprog.Limiters\`) allowing 2 or 10 requests a
second per client: two minutes' worth of pages at the allowed rate (240 at 2 r/s, 1,200 at 10 r/s) of one
host, 8 workers, every contender configured at 600 requests a minute with bursts of 5. Each crawl has a
limiter of its own; all run at once, each until its pages are done or for at most 3 minutes. The limiters,
each answering 429 beyond its limit:

- \`nginx-delay\`: nginx \`limit_req\`, \`burst=1\`, the excess queued; \`Retry-After: 2\`;
- \`nginx-nodelay\`: nginx \`limit_req\`, \`burst=1 nodelay\`, the excess refused at once; \`Retry-After: 2\`;
- \`haproxy\`: HAProxy, \`http_req_rate\` over a 10 s sliding window, refused requests counted too; \`Retry-After: 2\`;
- \`haproxy-quota\`: HAProxy, a fixed 10 s window advertised in \`X-RateLimit-Limit\`, \`-Remaining\` and
  \`-Reset\` on every answer, refused requests counted too; \`Retry-After\`: the seconds to the window's end.

The contenders:

- \`egresskit\`: the chain from \`DefaultConfig()\` (3 retries), its state in memory;
- \`egresskit-redis-fleet\`: two such chains (4 workers each) sharing their state in Redis;
- \`bare\`: an \`http.Client\` without pacing or retries;
- \`colly\`: Colly's \`LimitRule\` with the same settings (\`Parallelism: 8\`, \`Delay: 100ms\`), no retries;
- \`autothrottle-ref\`: our reference implementation (\`autothrottle_test.go\`, an \`http.RoundTripper\`) of
  Scrapy's AutoThrottle algorithm as its documentation publishes it, not Scrapy itself: a delay per host,
  starting at 5 s, set after each answer to the mean of the old delay and the latency to headers (target
  concurrency 1) but not below the latency, within 100 ms (\`DOWNLOAD_DELAY\`, the configured rate) and 60 s,
  never lowered by an answer other than 200; each wait randomized to 0.5–1.5× the delay, at most 8 requests
  in flight per host; with the default retries (408, 429, 500, 502, 503, 504, 522, 524 and transport
  errors, twice, each through the delay again, \`Retry-After\` not read).

Pages answered 200; the rate achieved (pages answered 200 a second, over the whole crawl) and its ratio
to the rate allowed (not given for a contender that lost pages: its 200s are not a rate it could keep);
the attempts (requests the limiter answered, counted at the transport under each contender) and the share
of them answered 429. A contender that could not run (the Redis fleet without a Redis server) has no rows.

| limiter | allowed r/s | contender | pages 200 | achieved r/s | achieved / allowed | attempts | 429 share |
|---|---:|---|---:|---:|---:|---:|---:|
$(polite_table)
$(notes politeness)

## A slowing server

A server with 8 workers serving each request in 1 s and queueing the rest (\`testprog.SlowServer\`:
capacity 8 requests a second, latency = queue + service), 240 pages crawled by 32 workers:
\`egresskit\` paced at 600 a minute with bursts of 5 and its per-host in-flight cap at its default,
\`bare\` an \`http.Client\`, \`colly\` Colly's \`LimitRule\` at the same rate (\`Parallelism: 32\`,
\`Delay: 100ms\`). What the server saw: requests in flight (queued or served) at most and on
average, its latency p50 and p95, and its throughput as a share of its capacity.

| contender | max in flight | mean in flight | p50 latency | p95 latency | throughput / capacity | pages 200 |
|---|---:|---:|---:|---:|---:|---:|
$(slow_table)
$(notes slow)

## Pacing against real rate limiters

The root package's \`TestConvergesOnLimiters\` with \`-converge.all\`: 8 workers starting too fast (600
requests a minute, bursts of 5), two minutes' worth of pages at the allowed rate (240 at 2 r/s, 1,200 at
10 r/s), against the four limiters above (nginx \`limit_req\` delaying and refusing, HAProxy's sliding
window, HAProxy's advertised fixed window); the chain from \`DefaultConfig()\` with its state in memory, or two chains (4 workers each) sharing Redis.
The bar: every page 200, at most 2 % of attempts 429, at least 0.9× the allowed rate.

| limiter | allowed r/s | state | pages 200 | achieved r/s | achieved / allowed | attempts 429 |
|---|---:|---|---:|---:|---:|---:|
$(converge_table)
$(notes pacing)

## Hosts, egress selection, probe

\`\`\`
$(stats -filter '.name:Hosts .unit:(live-B/host OR evicted-B/host OR first-ns/host)')

$(stats -filter '.name:(Select OR Probe)')
\`\`\`

## Where the time goes

Profiles of \`BenchmarkOverhead/body=$prof_body/impl=chain\`, regenerated with the tables.

Allocation sites the chain adds to the bare client (every allocation recorded over ${alloc_n} requests of
each, the bare client's subtracted; standard library and module paths relative to their roots):

| allocs/request | function | site |
|---:|---|---|
$(alloc_sites)

CPU, cumulative share of the chain's request (runtime and benchmark frames left out):

\`\`\`
$(cpu_top)
\`\`\`

EOF
	notes profile
	./run-peers.sh # the chain beside its peers and its base commit: peers.md, peers-notes.md
	./run-broad.sh "$work/bench.test" # the broad crawl and the fleet against a slowing server (issues 35, 36)
	cat <<EOF

## Redis state at fleet scale

Redis's cost per request, this tree ("new") against an older commit ("old"), built side by
side and run in turn on one redis-server (\`run-redisload.sh\`: 20,000 requests through two
chains, 32 workers, 200 hosts, FailClosed, \`INFO commandstats\` and \`INFO cpu\` before and
after). Absolute figures move with the machine's load; read the ratios.

\`\`\`
$redisload
\`\`\`

A fleet of worker processes on a real 3-master Redis Cluster (\`cmd/fleetsim\`):

$fleet
$(notes redis)

## Closing note

EOF
	"$work/benchratios" -part closing "$raw"
} >"$work/RESULTS.md"

mv "$work/RESULTS.md" RESULTS.md
echo "== wrote RESULTS.md and results.txt in ${elapsed}s" >&2
