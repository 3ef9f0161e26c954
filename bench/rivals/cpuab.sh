#!/usr/bin/env bash
# cpuab.sh: server CPU per completed job in one case of the rivals race, for
# one or more delayd binaries, in alternating rounds (the machine drifts by
# 10% and more between minutes, so only builds compared in the same rounds
# count). CPU is the sum of every server thread's time on CPU from
# /proc/<pid>/task/*/schedstat (nanoseconds, unlike /proc/<pid>/stat's ticks),
# read until the server exits.
#
#   bench/rivals/cpuab.sh /tmp/new /tmp/old                 # delayd-pipe, steady, 3 rounds
#   SYSTEM=delayd-ack CASE=spread ROUNDS=5 bench/rivals/cpuab.sh /tmp/new /tmp/old
#   SYSTEM=redis-zset bench/rivals/cpuab.sh /tmp/new        # the rival (the binary is not used)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYSTEM=${SYSTEM:-delayd-pipe}
CASE=${CASE:-steady}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-100000}
[ $# -ge 1 ] || { echo "usage: $0 delayd-binary..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$here" && go build -o "$tmp/rivals" .)
echo "| round | binary | system | case | late p50 / p99 ms | server CPU µs / job |"
echo "| --- | --- | --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    bin=$(realpath "$bin")
    (cd "$here" && exec taskset -c 1 "$tmp/rivals" -delayd "$bin" -bullmq "$here/bullmq" -server-cpu 0 \
      -jobs "$JOBS" -systems "$SYSTEM" -cases "$CASE" >"$tmp/out" 2>&1) &
    run=$!
    pid=
    for _ in $(seq 500); do
      if [ "$SYSTEM" = redis-zset ]; then pid=$(pgrep -n -x redis-server || true); else pid=$(pgrep -n -f "^$bin" || true); fi
      [ -n "$pid" ] && break
      sleep 0.02
    done
    ns=0
    # The counters die with the server: keep the last reading.
    while kill -0 "$run" 2>/dev/null; do
      x=$(cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}') || x=0
      [ "${x:-0}" -gt 0 ] && ns=$x
      sleep 0.05
    done
    wait "$run" || true
    row=$(grep "^| $SYSTEM | $CASE |" "$tmp/out" | tail -1)
    echo "$row" | awk -F'|' -v r="$r" -v b="$(basename "$bin")" -v ns="$ns" '{
      n = $5 + 0
      if (n == 0) {print "| " r " | " b " | no result: see the harness output |"; exit}
      printf "| %s | %s | %s | %s | %s / %s | %.1f |\n", r, b, $2, $3, $11 + 0, $13 + 0, ns / 1000 / n
    }' | sed 's/|  */| /g; s/  *|/ |/g'
  done
done
