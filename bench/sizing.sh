#!/usr/bin/env bash
# sizing.sh: what a pending job costs one node, for docs/operations.md's
# Sizing: RSS and log bytes a job for a few payload sizes (the log rewritten
# first, so it holds the live set only), and DELAY.ADD's rate with the log on
# (everysec), server and redis-benchmark pinned to separate CPUs.
#
#   bench/sizing.sh                 # 500k jobs at payloads of 16, 256 and 1024 bytes
#   N=2000000 SIZES="64 512" bench/sizing.sh
#   ARGS="--far-buckets yes" SETTLE=20 bench/sizing.sh   # server flags; seconds to let the spiller settle
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-500000}
SIZES=${SIZES:-"16 256 1024"}
ARGS=${ARGS:-}
SETTLE=${SETTLE:-1}
P=${PORT:-6397}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
work=$(mktemp -d)
trap 'redis-cli -p $P shutdown >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/delayd" .
wait_port() { for _ in $(seq 200); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
rss() { awk '/VmRSS/{printf "%d\n", $2*1024}' /proc/"$1"/status; }
start() {
  rm -rf "$work/data"
  taskset -c "$SERVER_CPU" "$work/delayd" --port "$P" --http-addr "" --dir "$work/data" \
    --appendonly yes --appendfsync everysec --log-level error $ARGS & pid=$!
  wait_port "$P"
}
stop() { redis-cli -p "$P" shutdown >/dev/null 2>&1 || true; wait "$pid" 2>/dev/null || true; }

echo "# $N pending jobs a row, delays spread over 30 days, server ids, appendfsync everysec"
echo "| payload B | RSS B/job | log B/job (rewritten) | jobs per GB of RAM |"
echo "| --- | --- | --- | --- |"
for size in $SIZES; do
  start
  r0=$(rss "$pid")
  payload=$(head -c "$size" /dev/zero | tr '\0' x)
  awk -v n="$N" -v p="$payload" 'BEGIN{for(i=0;i<n;i++) printf "DELAY.ADD q %d %s\r\n", 60000+(i*2591)%2592000000, p}' \
    | redis-cli -p "$P" --pipe >/dev/null
  redis-cli -p "$P" bgrewriteaof >/dev/null
  for _ in $(seq 600); do
    [ "$(redis-cli -p "$P" info persistence | tr -d '\r' | sed -n 's/^aof_rewrite_in_progress://p')" = 0 ] && break
    sleep 0.1
  done
  sleep "$SETTLE"
  r1=$(rss "$pid")
  logb=$(stat -c %s "$work/data/delayd.aof")
  awk -v n="$N" -v s="$size" -v r=$((r1-r0)) -v l="$logb" \
    'BEGIN{printf "| %d | %.0f | %.0f | %.1fM |\n", s, r/n, l/n, 1073741824/(r/n)/1e6}'
  stop
done

echo
echo "# DELAY.ADD rate, -c 50, everysec, server on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU, 16-byte payloads"
echo "| -P | adds/s |"
echo "| --- | --- |"
for pipe in 16 1; do
  start
  n=$([ "$pipe" = 16 ] && echo 1000000 || echo 200000)
  rate=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$P" -c 50 -P "$pipe" -n "$n" --csv \
    DELAY.ADD q 60000 0123456789abcdef 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')
  echo "| $pipe | $rate |"
  stop
done
