#!/usr/bin/env bash
# far-restart.sh: RSS a pending job costs with --far-buckets yes or no, after
# N adds (256-byte payloads, due 2 h to 30 days out, the default horizon) and
# after a graceful restart, and how long the restart takes to answer PING.
#
#   FAR=yes N=1000000 bench/far-restart.sh
#   FAR=no  N=1000000 bench/far-restart.sh
#   IDS=yes FAR=yes N=1000000 bench/far-restart.sh   (each job with a client id, "order-<i>")
#   EXTRA="DEADLETTER dlq" IDS=yes bench/far-restart.sh   (options appended to every add)
#
# KEEP=dir keeps the data directory there and leaves the restarted server
# running on PORT (for measurements at that size; stop it with redis-cli).
set -euo pipefail
cd "$(dirname "$0")/.."
FAR=${FAR:-yes}
N=${N:-1000000}
P=${PORT:-6492}
if [ -n "${KEEP:-}" ]; then
  work=$KEEP; mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'redis-cli -p $P shutdown >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
fi
go build -o "$work/delayd" .
rss() { awk '/VmRSS/{printf "%d\n", $2*1024}' /proc/"$1"/status; }
info() { redis-cli -p "$P" info memory | tr -d '\r' | sed -n "s/^$1://p"; }
wait_port() { for _ in $(seq 3000); do redis-cli -p "$P" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.05; done; return 1; }
start() {
  "$work/delayd" --port "$P" --http-addr "" --dir "$work/data" --appendonly yes --appendfsync everysec \
    --log-level error --far-buckets "$FAR" & pid=$!
}
settle() { # until the spiller has nothing left to move
  for _ in $(seq 120); do
    a=$(info far_jobs)$(info payloads_on_disk); sleep 2
    [ "$a" = "$(info far_jobs)$(info payloads_on_disk)" ] && return 0
  done
}
start; wait_port; r0=$(rss "$pid")
payload=$(head -c 256 /dev/zero | tr '\0' x)
from=$(date +%s%3N)
idfmt=""; [ "${IDS:-no}" = yes ] && idfmt=" ID order-%d"
[ -n "${EXTRA:-}" ] && idfmt="$idfmt ${EXTRA}"
awk -v n="$N" -v p="$payload" -v f="$idfmt" 'BEGIN{for(i=0;i<n;i++) printf "DELAY.ADD q %d %s" f "\r\n", 7200000+(i*2591)%2592000000, p, i}' \
  | redis-cli -p "$P" --pipe >/dev/null
# The unix ms the adds' server ids were made between (bench/far-add.sh draws ids from it).
echo "$from $(date +%s%3N)" > "$work/fill-ms"
settle
r1=$(rss "$pid")
echo "far-buckets $FAR, ids ${IDS:-no}${EXTRA:+, $EXTRA}, $N jobs: after the adds RSS $(( (r1-r0)/N )) B/job, far_jobs $(info far_jobs), payloads_on_disk $(info payloads_on_disk)"
redis-cli -p "$P" shutdown >/dev/null 2>&1 || true; wait "$pid" 2>/dev/null || true
echo "disk $(du -sb "$work/data" | awk -v n="$N" '{printf "%d", $1/n}') B/job"
t0=$(date +%s.%N); start; wait_port; t1=$(date +%s.%N)
settle
r2=$(rss "$pid")
echo "restart: PONG after $(echo "$t1 - $t0" | bc) s; RSS $(( r2/N )) B/job (the whole process), far_index_bytes $(info far_index_bytes), used_memory_jobs $(info used_memory_jobs)"
