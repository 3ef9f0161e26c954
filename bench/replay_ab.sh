#!/usr/bin/env bash
# replay_ab.sh: start-up replay of one log by two delayd binaries, in
# alternating rounds (old, new, old, new...), from exec to the first PONG
# with every job loaded. The log is written once by bench/mklog.
#
#   bench/replay_ab.sh /path/to/delayd.old 10000000      # against this tree
#   ROUNDS=5 bench/replay_ab.sh /tmp/delayd.old 10000000
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1; N=${2:-10000000}; ROUNDS=${ROUNDS:-3}; P=${PORT:-6397}
work=$(mktemp -d)
trap 'redis-cli -p $P shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/delayd" .
go run ./bench/mklog -n "$N" -dir "$work/data" >/dev/null
cp -r "$work/data" "$work/pristine"
run() { # binary -> seconds to first PONG
  rm -rf "$work/data"; cp -r "$work/pristine" "$work/data"; sync
  local start pid
  start=$(date +%s.%N)
  "$1" --port "$P" --http-addr "" --dir "$work/data" --log-level warn --auto-rewrite-percentage 0 --appendfsync no & pid=$!
  until [ "$(redis-cli -p "$P" ping 2>/dev/null)" = PONG ]; do sleep 0.02; done
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}'
  local jobs; jobs=$(redis-cli -p "$P" info queues | sed -n 's/^jobs:\([0-9]*\).*/\1/p' | tr -d '\r')
  [ "$jobs" = "$N" ] || { echo " (loaded $jobs of $N)"; }
  redis-cli -p "$P" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
}
echo "# $(date -u +%F) $(nproc) cores, $N jobs, $(du -h "$work/pristine" | tail -1 | cut -f1) of log"
echo "| round | old s | new s | new/old |"
echo "| --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
  o=$(run "$OLD"); n=$(run "$work/delayd")
  echo "| $r | $o | $n | $(awk -v a="$o" -v b="$n" 'BEGIN{printf "%.2f", b/a}') |"
done
