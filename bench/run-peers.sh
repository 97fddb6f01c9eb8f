#!/usr/bin/env bash
# run-peers.sh measures the chain beside its peers (bench/peers: the bare
# client, go-retryablehttp, failsafe-go) and beside itself at an older
# commit, in interleaved rounds of one run, and writes peers.md (the
# tables, then the hand-written peers-notes.md) and peers.txt (the raw
# results). It prints peers.md on standard output, progress on standard
# error.
#
# The older commit (PEERS_BASE, default adc6676, the commit the work on
# the chain's per-request cost started from) is extracted with git archive
# into a temporary directory, where the same bench/peers files are built
# against it; its chain is reported as chain@COMMIT (chain-redis@COMMIT).
#
# Environment: COUNT (rounds, default 6), PEERS_TIME (-benchtime of the
# in-memory benchmark, default 1s), PEERS_LOOPBACK_TIME (default 2s), GO,
# EGRESSKIT_REDIS_ADDR (else a redis-server is started; without one the
# Redis contender is not run).
set -euo pipefail

cd "$(dirname "$0")"
GO=${GO:-go}
COUNT=${COUNT:-6}
PEERS_BASE=${PEERS_BASE:-adc6676}
PEERS_TIME=${PEERS_TIME:-1s}
PEERS_LOOPBACK_TIME=${PEERS_LOOPBACK_TIME:-2s}
# benchstat, pinned, through the module proxy.
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
base=$(git -C .. rev-parse --short "$PEERS_BASE")
head=$(git -C .. rev-parse --short HEAD)
dirty=""
git -C .. diff --quiet HEAD -- . ':!bench' || dirty=" with uncommitted changes"

echo "== building bench/peers at the tree ($head$dirty) and at $base" >&2
$GO test -c -o "$work/new.test" ./peers
mkdir -p "$work/base"
git -C .. archive "$base" | tar -x -C "$work/base"
mkdir -p "$work/base/bench/peers"
cp peers/*.go "$work/base/bench/peers/"
(cd "$work/base/bench" && $GO test -c -o "$work/base.test" ./peers)

raw="$work/raw.txt"
# bench BINARY DIR NAME-PATTERN BENCHTIME [SUFFIX] runs one benchmark of a
# binary from DIR (where the pages' relative paths resolve), renaming its
# chain contenders with SUFFIX.
bench() {
	(cd "$2" && "$1" -test.run '^$' -test.bench "$3" -test.benchtime "$4") |
		sed -e "s#/impl=\(chain[a-z-]*\)\([ 	-]\)#/impl=\1${5:-}\2#" | tee -a "$raw" >&2
}
for i in $(seq "$COUNT"); do
	echo "== round $i of $COUNT" >&2
	bench "$work/new.test" peers '^BenchmarkPeers$' "$PEERS_TIME"
	bench "$work/base.test" "$work/base/bench/peers" '^BenchmarkPeers$//^impl=chain$' "$PEERS_TIME" "@$base"
	bench "$work/new.test" peers '^BenchmarkPeersLoopback$' "$PEERS_LOOPBACK_TIME"
	bench "$work/base.test" "$work/base/bench/peers" '^BenchmarkPeersLoopback$/^impl=chain' "$PEERS_LOOPBACK_TIME" "@$base"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
cp "$raw" peers.txt

echo "== benchstat" >&2
stats=$($GO run "$BENCHSTAT" -col /impl -row .name,/body peers.txt | grep -v '^\(goos\|goarch\|pkg\|cpu\):')
tables=$($GO run ./cmd/peerstable peers.txt)

cat >peers.md <<MD
## The chain beside its peers, and beside $base

\`make bench\` ran \`run-peers.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'): the tree at $head$dirty, and the
benchmarks of \`bench/peers\` built against $base (\`chain@$base\`), in $COUNT interleaved rounds
(in memory \`-benchtime $PEERS_TIME\`, loopback \`-benchtime $PEERS_LOOPBACK_TIME\`). Load average
(1, 5, 15 min) at the start: $load_start; at the end: $load_end; $(nproc) cores.

- **In memory** (\`BenchmarkPeers\`): one goroutine, an in-memory base transport answering a 200 with the
  page (128 B \`text/plain\`, real HTML pages of 32 and 256 KiB), the body read to the end and closed. The
  chain: robots.txt off, \`MaxInFlight: -1\`, pacing that never binds, 3 retries, state in memory.
  failsafe-go: \`failsafehttp\` with a retry policy (3 retries) and a circuit breaker. go-retryablehttp:
  its \`RoundTripper\` alone (3 retries).
- **Loopback** (\`BenchmarkPeersLoopback\`): 32 goroutines, a keep-alive HTTP/1.1 loopback server answering
  the 32 KiB page; the chain through a one-endpoint direct egress pool (no response-header timeout, as
  the bare transport), in memory and with Redis state (\`chain-redis\`: token leases on, FailClosed).

$tables

benchstat (\`-col /impl\`; \`vs base\` compares each contender with \`bare\`):

\`\`\`
$stats
\`\`\`

MD
cat peers-notes.md >>peers.md
cat peers.md
