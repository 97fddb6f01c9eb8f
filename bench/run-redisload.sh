#!/usr/bin/env bash
# run-redisload.sh measures what the Redis state costs Redis per request,
# for this tree and for an older commit, in one run: it builds
# cmd/redisload against both, starts one redis-server of its own (no
# persistence), and runs the two builds in turn, ROUNDS times each (the
# order alternating), then prints every run and the medians and ratios.
# The machine's load moves absolute figures; compare the ratios.
#
# Usage: ./run-redisload.sh [BASE]   (BASE: a commit, default fa4dde2, the
# last one that recorded every attempt in a script of its own).
# Environment: ROUNDS (default 5), and the flags of cmd/redisload in
# REDISLOAD_FLAGS.
set -euo pipefail

cd "$(dirname "$0")"
GO=${GO:-go}
ROUNDS=${ROUNDS:-5}
base=${1:-fa4dde2}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

echo "== building $(git rev-parse --short HEAD) (new) and $(git rev-parse --short "$base") (old)" >&2
mkdir -p "$work/old"
git -C "$(git rev-parse --show-toplevel)" archive "$base" | tar -x -C "$work/old"
mkdir -p "$work/old/bench/cmd"
rm -rf "$work/old/bench/cmd/redisload" "$work/old/bench/internal/redisinfo"
cp -r cmd/redisload "$work/old/bench/cmd/redisload"
mkdir -p "$work/old/bench/internal"
cp -r internal/redisinfo "$work/old/bench/internal/redisinfo"
(cd "$work/old/bench" && $GO build -o "$work/redisload-old" ./cmd/redisload)
$GO build -o "$work/redisload-new" ./cmd/redisload

port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
pid=$!
for _ in $(seq 50); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.1
done
echo "== redis-server $(redis-server --version | awk '{print $3}') on port $port; $ROUNDS rounds" >&2

out="$work/runs.txt"
for r in $(seq "$ROUNDS"); do
	order="old new"
	[ $((r % 2)) -eq 0 ] && order="new old"
	for side in $order; do
		redis-cli -p "$port" flushall >/dev/null
		line=$("$work/redisload-$side" -addr "127.0.0.1:$port" ${REDISLOAD_FLAGS:-})
		echo "$side $line" | tee -a "$out"
	done
done

# Medians per side and the ratio new/old of each figure.
awk '
{ side = $1; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[side, kv[1], ++n[side, kv[1]]] = kv[2]; keys[kv[1]] = 1 } }
function median(side, k,   m, i, j, t, a) {
	m = n[side, k]
	for (i = 1; i <= m; i++) a[i] = v[side, k, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (m % 2) return a[(m + 1) / 2]
	return (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	printf "%-16s %12s %12s %8s\n", "median", "old", "new", "new/old"
	split("evalsha_per_req us_per_call cpu_us_per_req req_per_s call_p50_us call_p99_us", order, " ")
	for (i = 1; i <= 6; i++) {
		k = order[i]; o = median("old", k); w = median("new", k)
		printf "%-16s %12.3f %12.3f %8.3f\n", k, o, w, (o > 0 ? w / o : 0)
	}
}' "$out"
