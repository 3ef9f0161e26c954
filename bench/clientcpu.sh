#!/usr/bin/env bash
# clientcpu.sh: where `-P 1` is bound. redis-benchmark's CPU time a request
# (perf stat task-clock) and its requests per second, against delayd and
# redis-server in alternating rounds, each server pinned to CPU 0 and the
# client to CPU 1 as in pinned.sh. When the client's CPU is full against
# both servers, a -P 1 ratio is the client's speed over itself.
#
#   bench/clientcpu.sh                                  # DELAY.POP q 0 against BLPOP q 0
#   DCMD="RPUSH q x" RCMD="RPUSH q x" FILL=0 bench/clientcpu.sh
#
# Knobs: DELAYD (a binary; default: build this tree), N (200000), ROUNDS (3),
# DCMD, RCMD, FILL (1: fill list q first, for pops), DPORT, RPORT.
# Needs perf (linux-perf), redis-server, redis-benchmark, redis-cli, taskset.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000} ROUNDS=${ROUNDS:-3} FILL=${FILL:-1}
DCMD=${DCMD:-"DELAY.POP q 0"} RCMD=${RCMD:-"BLPOP q 0"}
DPORT=${DPORT:-7701} RPORT=${RPORT:-7702}
work=$(mktemp -d)
cleanup() {
  redis-cli -p "$DPORT" shutdown nosave >/dev/null 2>&1 || true
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${DELAYD:-}" ]; then cp "$DELAYD" "$work/delayd"; else go build -o "$work/delayd" .; fi
taskset -c 0 "$work/delayd" --port "$DPORT" --http-addr "" --dir "$work" --log-level error --appendonly no &
taskset -c 0 redis-server --port "$RPORT" --save '' --appendonly no --daemonize yes --dir "$work" >/dev/null
for p in "$DPORT" "$RPORT"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
echo "| round | server | client requests/s | client CPU µs / request |"
echo "| --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
  for port in "$DPORT" "$RPORT"; do
    cmd=$DCMD name=delayd
    [ "$port" = "$RPORT" ] && cmd=$RCMD name=redis
    if [ "$FILL" = 1 ]; then
      taskset -c 1 redis-benchmark -p "$port" -c 50 -P 64 -n $((N + 1000)) -r 100000 RPUSH q p:__rand_int__ >/dev/null 2>&1
    fi
    # shellcheck disable=SC2086 # the command is words on purpose
    out=$(perf stat -x, -e task-clock -- taskset -c 1 redis-benchmark -p "$port" --csv -c 50 -n "$N" -P 1 -r 100000 $cmd 2>&1)
    rps=$(echo "$out" | grep '^"' | tail -1 | cut -d, -f2 | tr -d '"')
    ms=$(echo "$out" | grep task-clock | cut -d, -f1)
    echo "| $r | $name | $rps | $(awk -v a="$ms" -v n="$N" 'BEGIN{printf "%.2f", a * 1000 / n}') |"
  done
done
