#!/usr/bin/env bash
# lateness.sh: a blocked worker's lateness under load, for one or more delayd
# binaries in alternating rounds (the machine drifts between minutes: only
# builds compared in the same rounds count). Each round starts a fresh server
# pinned to CPU 0 and bench/loadgen pinned to CPU 1: 1M jobs pending (due in
# one to two hours), 20k adds/s due 1 ms to 1 s later, 64 DELAY.POP workers.
# One line a run: the binary, the round, loadgen's figures (p50 ... max, early).
#
#   bench/lateness.sh 6 /tmp/delayd.new /tmp/delayd.old
#   DUR=30s PENDING=10000000 bench/lateness.sh 3 /tmp/delayd.new
#
# Jobs that pass through the far-future buckets on disk (issue 33's line: every
# job but those due within the first second goes out to disk and comes back):
#
#   ARGS="--horizon 1000" DELAY=10s bench/lateness.sh 3 /tmp/delayd.new
#
# Knobs: DUR (15s), PENDING (1000000), RATE (20000), WORKERS (64), PORT (27002),
# DELAY (loadgen's -delay, 1s), ARGS (more server flags),
# GODEBUG passes through (gctrace=1 puts the collector's lines in $TMPDIR/lateness-*.log).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 rounds delayd-binary..." >&2; exit 2; }
rounds=$1; shift
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
go build -o "$work/loadgen" ./bench/loadgen
port=${PORT:-27002}
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$work/data"; mkdir "$work/data"
    taskset -c 0 "$bin" --port "$port" --http-addr "" --dir "$work/data" --log-level warn ${ARGS:-} \
      2>"${TMPDIR:-/tmp}/lateness-$(basename "$bin")-$r.log" &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    out=$(taskset -c 1 "$work/loadgen" -addr "127.0.0.1:$port" -pending "${PENDING:-1000000}" -rate "${RATE:-20000}" \
      -duration "${DUR:-15s}" -delay "${DELAY:-1s}" -workers "${WORKERS:-64}" -mode pop 2>&1 | tail -2 | tr '\n' ' ')
    echo "$(basename "$bin") r$r $out"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
