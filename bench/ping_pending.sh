#!/usr/bin/env bash
# ping_pending.sh: PING latency with no job pending against N jobs pending
# (delayed an hour or more, 16-byte payloads), the server pinned to CPU 0 and
# redis-benchmark to CPU 1. Prints p50/p99 (ms) per round from
# redis-benchmark's CSV, ROUNDS rounds at each point.
#
#   bench/ping_pending.sh 10000000
#   PORT=7498 ROUNDS=5 bench/ping_pending.sh 10000000
#   DELAYD=/tmp/delayd.old bench/ping_pending.sh 10000000   # another build instead of this tree
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
P=${PORT:-6397}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
trap 'redis-cli -p $P shutdown >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bin=${DELAYD:-}
if [ -z "$bin" ]; then go build -o "$work/delayd" .; bin=$work/delayd; fi
taskset -c 0 "$bin" --port "$P" --http-addr "" --appendonly no --log-level warn & dpid=$!
for _ in $(seq 100); do redis-cli -p "$P" ping >/dev/null 2>&1 && break; sleep 0.1; done
ping() {
	for r in $(seq "$ROUNDS"); do
		taskset -c 1 redis-benchmark -p "$P" -t ping_mbulk -n 200000 -c 50 --csv |
			awk -F'","' -v pend="$1" -v r="$r" 'NR==2{gsub(/"/,"",$0); split($0,f,","); printf "| %s | %d | %s | %s | %s |\n", pend, r, f[2], f[5], f[7]}'
	done
}
echo "| pending | round | rps | p50 ms | p99 ms |"
echo "| --- | --- | --- | --- | --- |"
ping 0
awk -v n="$N" 'BEGIN{for(i=0;i<n;i++) printf "DELAY.ADD q %d 0123456789abcdef\r\n", 3600000+i%3600000}' | redis-cli -p "$P" --pipe >/dev/null
sleep 2
ping "$N"
echo "rss_bytes $(awk '/VmRSS/{printf "%d", $2*1024}' /proc/$dpid/status)" >&2
