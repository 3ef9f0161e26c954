#!/usr/bin/env bash
# stalls.sh: issue 33's compaction line, a worker fleet's lateness across
# automatic compactions, for one or more delayd binaries in alternating
# rounds (only builds compared in the same rounds count). Each round starts a
# fresh server (log on, appendfsync everysec, its defaults otherwise: the
# far-future buckets on) pinned to CPU 0 and bench/loadgen pinned to CPU 1:
# 500k jobs pending (due an hour or more out: in the buckets), 10k adds/s due
# 1 ms to 1 s later, 32 workers doing DELAY.POP then DELAY.ACK, 60 s; a
# compaction every ~25 s. One line a run: loadgen's figures and the
# compactions the server logged (with their longest hold).
#
#   bench/stalls.sh 3 /tmp/delayd.new /tmp/delayd.old
#   ARGS="--far-buckets no" bench/stalls.sh 3 /tmp/delayd.new
#
# Knobs: DUR (60s), PENDING (500000), RATE (10000), WORKERS (32), PORT (27003),
# ARGS (more server flags).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 rounds delayd-binary..." >&2; exit 2; }
rounds=$1; shift
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
go build -o "$work/loadgen" ./bench/loadgen
port=${PORT:-27003}
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$work/data"; mkdir "$work/data"
    log="${TMPDIR:-/tmp}/stalls-$(basename "$bin")-$r.log"
    taskset -c 0 "$bin" --port "$port" --http-addr "" --dir "$work/data" --appendonly yes ${ARGS:-} >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    out=$(taskset -c 1 "$work/loadgen" -addr "127.0.0.1:$port" -mode ack -pending "${PENDING:-500000}" \
      -rate "${RATE:-10000}" -workers "${WORKERS:-32}" -duration "${DUR:-60s}" 2>&1 | tail -1)
    kill "$pid"; wait "$pid" 2>/dev/null || true
    comp=$(grep -c '"message":"log compaction"' "$log" || true)
    hold=$(grep '"message":"log compaction"' "$log" | sed -n 's/.*"max_hold_ms":\([0-9.]*\).*/\1/p' | sort -g | tail -1 || true)
    echo "$(basename "$bin") r$r $out compactions=$comp max_hold_ms=${hold:-0} load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
