#!/usr/bin/env bash
# cluster.sh: DELAY.ADD through a 3-node cluster side by side with one node,
# in interleaved rounds, reported as the median of per-round ratios, plus the
# latency a quorum commit adds at -P 1 (p50, p99 of redis-benchmark).
#
#   bench/cluster.sh                    # appendfsync everysec on both sides
#   POLICY=always bench/cluster.sh      # fsync on every append on both sides
#
# Every server is pinned to CPU 0 (the three nodes share it, as three
# machines' worth of work on one core), redis-benchmark to CPU 1 (taskset),
# so server and client stop fighting over two cores. Only ratios from one
# run mean anything on a shared machine.
# Both sides compact at the defaults (auto-rewrite-percentage 100, min size
# 64 MB): the single node rewrites its log, the cluster snapshots.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
N16=${N16:-300000}
N1=${N1:-30000}
POLICY=${POLICY:-everysec}
BASE=${BASE:-7401}    # single node on BASE, cluster on BASE+1..BASE+3
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/delayd" .

pin() { taskset -c "$1" "${@:2}"; }
bench() { { pin "$CLIENT_CPU" redis-benchmark --csv "$@" 2>/dev/null || true; } | tail -1; }
rps() { bench "$@" | cut -d, -f2 | tr -d '"'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
leader() {
  for _ in $(seq 100); do
    for p in $((BASE+1)) $((BASE+2)) $((BASE+3)); do
      redis-cli -p "$p" info replication 2>/dev/null | grep -q role:master && { echo "$p"; return 0; }
    done
    sleep 0.1
  done
  echo "$((BASE+1))"
}

common=(--log-level error --appendfsync "$POLICY" --http-addr "")
# Three nodes sharing one core under full load answer heartbeats late: a
# longer election timeout keeps the leader in place for the measurement.
ctimeout=(--cluster-election-timeout "${ELECTION_TIMEOUT:-3000}")
mkdir -p "$work/s" "$work/c1" "$work/c2" "$work/c3"
taskset -c "$SERVER_CPU" "$work/delayd" --port "$BASE" --dir "$work/s" "${common[@]}" &
taskset -c "$SERVER_CPU" "$work/delayd" --port $((BASE+1)) --dir "$work/c1" "${common[@]}" --cluster-enabled yes --cluster-bootstrap "${ctimeout[@]}" &
wait_port $((BASE+1)); sleep 1.5
for i in 2 3; do
  taskset -c "$SERVER_CPU" "$work/delayd" --port $((BASE+i)) --dir "$work/c$i" "${common[@]}" --cluster-enabled yes --cluster-join 127.0.0.1:$((BASE+1)) "${ctimeout[@]}" &
done
wait_port "$BASE"
for _ in $(seq 100); do [ "$(redis-cli -p $((BASE+1)) cluster nodes 2>/dev/null | grep -c connected)" = 3 ] && break; sleep 0.1; done
L=$(leader)

echo "# $(date -u +%F) $(nproc) cores, $(go version | cut -d' ' -f3), appendfsync $POLICY, servers on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU"
echo "| -P | one node DELAY.ADD/s (median) | 3-node cluster DELAY.ADD/s (median) | median ratio |"
echo "| --- | --- | --- | --- |"
for P in 16 1; do
  n=$N16; [ "$P" = 1 ] && n=$N1
  ratios=(); ss=(); cs=()
  for _ in $(seq "$ROUNDS"); do
    s=$(rps -p "$BASE" -c 50 -n "$n" -P "$P" -r 100000 DELAY.ADD q __rand_int__ p:__rand_int__)
    L=$(leader) # leadership can move under load: measure whoever leads now
    c=$(rps -p "$L" -c 50 -n "$n" -P "$P" -r 100000 DELAY.ADD q __rand_int__ p:__rand_int__)
    ss+=("$s"); cs+=("$c"); ratios+=("$(awk -v a="$c" -v b="$s" 'BEGIN{printf "%.2f", a/b}')")
  done
  echo "| $P | $(printf '%s\n' "${ss[@]}" | median) | $(printf '%s\n' "${cs[@]}" | median) | $(printf '%s\n' "${ratios[@]}" | median) (rounds: ${ratios[*]}) |"
done
echo
echo "Latency at -P 1, one client (what a quorum commit adds to one write), median of $ROUNDS rounds:"
echo "| server | p50 ms | p99 ms |"
echo "| --- | --- | --- |"
for who in one cluster; do
  port=$BASE; [ "$who" = cluster ] && port=$(leader)
  p50s=(); p99s=()
  for _ in $(seq "$ROUNDS"); do
    # csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    line=$(bench -p "$port" -c 1 -n 3000 -P 1 -r 100000 DELAY.ADD q __rand_int__ p:__rand_int__)
    p50s+=("$(echo "$line" | cut -d, -f5 | tr -d '"')"); p99s+=("$(echo "$line" | cut -d, -f7 | tr -d '"')")
  done
  echo "| $who | $(printf '%s\n' "${p50s[@]}" | median) | $(printf '%s\n' "${p99s[@]}" | median) |"
done
