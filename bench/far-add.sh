#!/usr/bin/env bash
# far-add.sh: DELAY.ADD at -P 16 with a filled data directory's jobs pending
# against an empty one, in alternating rounds (issue 33: "adding at 100M
# pending runs at least 0.8x the rate at 0 pending"), then DELAY.GET,
# RESCHEDULE and CANCEL of random ids of the filled one (bench/farprobe).
# Server pinned to CPU 0, redis-benchmark and farprobe to CPU 1. Fill first:
#
#   KEEP=/work/cap100m N=100000000 PORT=6493 bench/far-restart.sh   # ~20 min, 33 GB
#   redis-cli -p 6493 shutdown
#   FULL=/work/cap100m/data ROUNDS=3 bench/far-add.sh
#
# The adds go to queue "bench" due a day out (256-byte payloads), so they
# pass through the spiller into the buckets as the filled jobs did. Each
# round adds N (1000000) to both servers (the empty one is flushed before
# each round). farprobe's ids are drawn from the milliseconds the
# fill made them in (fill-ms, which far-restart.sh writes beside the data).
set -euo pipefail
cd "$(dirname "$0")/.."
FULL=${FULL:?FULL=data dir of a filled server}
ROUNDS=${ROUNDS:-3}
N=${N:-1000000}
P=${PORT:-6495}
work=$(mktemp -d)
go build -o "$work/delayd" .
go build -o "$work/farprobe" ./bench/farprobe
payload=$(head -c 256 /dev/zero | tr '\0' x)
# Both servers run the whole time on CPU 0, one measured at a time: the
# filled one is started once (its start reads 100M ids) and left to settle
# (the spiller done with what the last round added) before each round.
FP=$P EP=$((P + 1))
start() { # port dir
  taskset -c 0 "$work/delayd" --port "$1" --http-addr "" --dir "$2" --appendonly yes --appendfsync everysec \
    --log-level warn &
  pids="${pids:-} $!"
  for _ in $(seq 3000); do redis-cli -p "$1" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.1; done
  echo "no PONG" >&2; exit 1
}
info() { redis-cli -p "$1" info memory | tr -d '\r' | sed -n "s/^$2://p"; }
settle() { # until the spiller has moved what the last round added: far_jobs still for 2 s
  for _ in $(seq 300); do
    a=$(info "$1" far_jobs); sleep 2
    [ "$a" = "$(info "$1" far_jobs)" ] && return 0
  done
}
rate() {
  taskset -c 1 redis-benchmark -p "$1" -c 50 -P 16 -n "$N" -q DELAY.ADD bench 86400000 "$payload" \
    | tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1
}
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$work"' EXIT
mkdir "$work/empty"
start "$FP" "$FULL"; start "$EP" "$work/empty"
for r in $(seq "$ROUNDS"); do
  # Each measured with the other one still: the spiller of the last round's
  # adds competes for CPU 0 otherwise.
  settle "$EP"; settle "$FP"; pend=$(info "$FP" far_jobs)
  full=$(rate "$FP")
  redis-cli -p "$EP" flushall >/dev/null; settle "$FP"; settle "$EP"
  empty=$(rate "$EP")
  echo "round $r: $full adds/s with $pend far jobs pending, $empty with none: $(echo "scale=2; $full/$empty" | bc)x (load $(cut -d' ' -f1 /proc/loadavg))"
done
settle "$FP"
read -r from to < "$FULL/../fill-ms"
taskset -c 1 "$work/farprobe" -addr "127.0.0.1:$FP" -queue q -from "$from" -to "$to" -n "${PROBES:-2000}"
redis-cli -p "$FP" shutdown >/dev/null; redis-cli -p "$EP" shutdown >/dev/null
wait
