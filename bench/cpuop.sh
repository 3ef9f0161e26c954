#!/usr/bin/env bash
# cpuop.sh: server CPU time an op under redis-benchmark, for one or more
# delayd binaries in alternating rounds (the order flips each round), a fresh
# server a run, server pinned to CPU 0 and redis-benchmark to CPU 1. CPU is
# the server's user + system time from /proc/<pid>/stat over the run; it moves
# much less with a shared machine's noise than throughput does.
#
#   ROUNDS=8 N=2000000 bench/cpuop.sh /tmp/delayd.new /tmp/delayd.old
#   CMD='RPUSH q:__rand_int__ x' bench/cpuop.sh /tmp/delayd.new /tmp/delayd.old
#
# Knobs: ROUNDS (5), N requests a run (1000000), R keyspace for __rand_int__
# (1000), P pipeline (16), CMD (DELAY.ADD over R keys with delays of 0 to R-1 ms),
# PORT (28001). Needs redis-benchmark, redis-cli, taskset.
set -u
ROUNDS=${ROUNDS:-5}; N=${N:-1000000}; R=${R:-1000}; P=${P:-16}; PORT=${PORT:-28001}
CMD=${CMD:-"DELAY.ADD key:__rand_int__ __rand_int__ p:__rand_int__"}
[ $# -ge 1 ] || { echo "usage: $0 delayd-binary..." >&2; exit 2; }
hz=$(getconf CLK_TCK)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
declare -A res
for round in $(seq "$ROUNDS"); do
  bins=("$@"); if [ $((round % 2)) = 0 ]; then mapfile -t bins < <(printf '%s\n' "$@" | tac); fi
  for bin in "${bins[@]}"; do
    rm -rf "$work/d"; mkdir -p "$work/d"
    taskset -c 0 "$bin" --port "$PORT" --http-addr "" --dir "$work/d" --appendonly no --log-level error >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    # shellcheck disable=SC2086
    rps=$(taskset -c 1 redis-benchmark -p "$PORT" -c 50 -P "$P" -n "$N" -r "$R" --csv $CMD 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    us=$(awk -v t=$((t1-t0)) -v n="$N" -v hz="$hz" 'BEGIN{printf "%.3f", t*1e6/hz/n}')
    res[$bin]+="$us "
    echo "round $round $bin $us us/op $rps rps"
    kill $pid; wait $pid 2>/dev/null
  done
done
for bin in "$@"; do
  med=$(echo ${res[$bin]} | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  echo "MEDIAN $bin $med  (${res[$bin]})"
done
