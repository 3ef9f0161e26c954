#!/usr/bin/env bash
# memory.sh: memory per pending job, delayd against redis-server holding the
# same jobs the way a polled sorted set does (ZADD due id + HSET id payload).
# 16-byte payloads (PAYLOAD=n bytes), server-made ids on the delayd side,
# due 1 to 2 hours ahead (SPREAD=ms: spread over 1 hour to 1 hour plus
# SPREAD). DARGS are delayd's settings (default: no log); with a log and a
# horizon, the figures are taken once the payloads on disk stop growing.
#
#   bench/memory.sh 1000000
#   DPORT=7398 RPORT=7399 bench/memory.sh 10000000   # other ports, if those are taken
#   PAYLOAD=256 SPREAD=2592000000 DARGS="--appendonly yes --horizon 0" bench/memory.sh 1000000
#   PAYLOAD=256 SPREAD=2592000000 DARGS="--appendonly yes --horizon 3600000" bench/memory.sh 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
DP=${DPORT:-6398}
RP=${RPORT:-6399}
PAYLOAD=${PAYLOAD:-16}
SPREAD=${SPREAD:-3600000}
DARGS=${DARGS:---appendonly no}
work=$(mktemp -d)
pl=$(head -c "$PAYLOAD" /dev/zero | tr '\0' x)
trap 'redis-cli -p $DP shutdown >/dev/null 2>&1 || true; redis-cli -p $RP shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/delayd" .
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
rss() { awk '/VmRSS/{printf "%d\n", $2*1024}' /proc/"$1"/status; }

# shellcheck disable=SC2086
"$work/delayd" --port $DP --http-addr "" --dir "$work" $DARGS --log-level warn & dpid=$!
redis-server --port $RP --save '' --appendonly no --daemonize yes --dir "$work" >/dev/null
wait_port $DP; wait_port $RP
rpid=$(redis-cli -p $RP info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p' | tr -d '\r')
d0=$(rss $dpid); r0=$(redis-cli -p $RP info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p' | tr -d '\r'); rr0=$(rss $rpid)

awk -v n="$N" -v s="$SPREAD" -v p="$pl" 'BEGIN{for(i=0;i<n;i++) printf "DELAY.ADD q %d %s\r\n", 3600000+int(i*s/n), p}' | redis-cli -p $DP --pipe >/dev/null
awk -v n="$N" -v p="$pl" 'BEGIN{for(i=0;i<n;i++){id=sprintf("01a2%012d",i); printf "ZADD jobs %.0f %s\r\nHSET payloads %s %s\r\n", 1.8e12+i, id, id, p}}' | redis-cli -p $RP --pipe >/dev/null
sleep 1
disk() { redis-cli -p $DP info memory | sed -n 's/^payloads_on_disk:\([0-9]*\).*/\1/p' | tr -d '\r'; }
last=-1
while [ "$(disk)" != "$last" ]; do last=$(disk); sleep 2; done
[ "${last:-0}" -gt 0 ] && echo "payloads on disk: $last"
d1=$(rss $dpid); r1=$(redis-cli -p $RP info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p' | tr -d '\r'); rr1=$(rss $rpid)
echo "| jobs | delayd RSS B/job | redis used_memory B/job | redis RSS B/job | delayd / redis (RSS) |"
echo "| --- | --- | --- | --- | --- |"
awk -v n="$N" -v d=$((d1-d0)) -v r=$((r1-r0)) -v rr=$((rr1-rr0)) 'BEGIN{printf "| %d | %.0f | %.0f | %.0f | %.2f |\n", n, d/n, r/n, rr/n, d/rr}'
