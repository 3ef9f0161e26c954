#!/usr/bin/env bash
# replay.sh: start-up time with N jobs in the log: from exec until the server
# answers PING with every job loaded. Target: 10M jobs in under 10 s.
#
#   bench/replay.sh 1000000 10000000
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'redis-cli -p 6397 shutdown >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/delayd" .
echo "| jobs | log bytes/job | start-up to first PING | RSS after load |"
echo "| --- | --- | --- | --- |"
for n in "${@:-1000000}"; do
  out=$(go run ./bench/mklog -n "$n" -dir "$work/data")
  bpj=$(echo "$out" | sed -n 's/.*bytes_per_job=\([0-9.]*\).*/\1/p')
  start=$(date +%s.%N)
  "$work/delayd" --port 6397 --http-addr "" --dir "$work/data" --log-level warn --auto-rewrite-percentage 0 &
  pid=$!
  # PING gets LOADING (and redis-cli exits 0) until the log is loaded
  until [ "$(redis-cli -p 6397 ping 2>/dev/null)" = PONG ]; do sleep 0.02; done
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f s", b-a}')
  jobs=$(redis-cli -p 6397 info queues | sed -n 's/^jobs:\([0-9]*\).*/\1/p')
  rss=$(awk '/VmRSS/{printf "%.0f MiB", $2/1024}' /proc/$pid/status)
  [ "$jobs" = "$n" ] || { echo "loaded $jobs of $n jobs"; exit 1; }
  echo "| $n | $bpj | $took | $rss |"
  redis-cli -p 6397 shutdown >/dev/null 2>&1 || true
  wait $pid || true
done
