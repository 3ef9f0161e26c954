#!/usr/bin/env bash
# http.sh: does the HTTP side cost DELAY.ADD anything? Two delayd servers,
# one with --http-addr "" and one with the HTTP side on and scraped every
# second (as Prometheus would, at 1 s instead of the usual 15 s), both
# pinned to CPU 0 with redis-benchmark and the scraper on CPU 1, benchmarked
# in interleaved rounds; the median of per-round ratios (on/off) is the
# answer (issue 12: within 3%).
#
#   bench/http.sh                    # 7 rounds, -P 16, 1M adds each
#   ROUNDS=11 N=300000 P=1 bench/http.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-7}
N=${N:-1000000}
P=${P:-16}
OFF=${OFF:-6396}
ON=${ON:-6394}
HTTP=${HTTP:-6395}

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/delayd" .

rps() { taskset -c 1 redis-benchmark --csv "$@" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

taskset -c 0 "$work/delayd" --port $OFF --http-addr "" --appendonly no --log-level warn &
taskset -c 0 "$work/delayd" --port $ON --http-addr 127.0.0.1:$HTTP --appendonly no --log-level warn &
wait_port $OFF; wait_port $ON
(while [ -z "${NOSCRAPE:-}" ] && sleep 1; do taskset -c 1 curl -s -o /dev/null "http://127.0.0.1:$HTTP/metrics"; done) &
scraper=$!

echo "# $(date -u +%F) $(nproc) cores, $(go version | cut -d' ' -f3); servers on CPU 0, redis-benchmark and the scraper on CPU 1; -c 50 -P $P, $N adds a round"
ratios=(); offs=(); ons=()
# The server benchmarked second shares CPU 0 with the first one's garbage
# collection of what it was just sent, so the order alternates each round,
# with a pause after each run.
bench() { rps -p "$1" -c 50 -n "$N" -P "$P" -r 100000 DELAY.ADD q __rand_int__ p:__rand_int__; redis-cli -p "$1" flushall >/dev/null; sleep 1; }
for i in $(seq "$ROUNDS"); do
  if [ $((i % 2)) = 1 ]; then
    off=$(bench $OFF); on=$(bench $ON)
  else
    on=$(bench $ON); off=$(bench $OFF)
  fi
  offs+=("$off"); ons+=("$on"); ratios+=("$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.3f", a/b}')")
done
kill $scraper 2>/dev/null || true
redis-cli -p $OFF shutdown >/dev/null 2>&1 || true
redis-cli -p $ON shutdown >/dev/null 2>&1 || true
echo "| HTTP off: DELAY.ADD/s (median) | HTTP on, scraped every 1 s (median) | median ratio on/off |"
echo "| --- | --- | --- |"
echo "| $(printf '%s\n' "${offs[@]}" | median) | $(printf '%s\n' "${ons[@]}" | median) | $(printf '%s\n' "${ratios[@]}" | median) (rounds: ${ratios[*]}) |"
