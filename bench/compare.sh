#!/usr/bin/env bash
# compare.sh: delayd's DELAY.ADD side by side with redis-server's ZADD, in
# interleaved rounds on one machine, reported as the median of per-round
# ratios. The machine is shared and noisy: only ratios from one run mean
# anything.
#
#   bench/compare.sh                 # persistence off, -P 16 and -P 1, GOMAXPROCS 1 and 2
#   POLICIES="always everysec no" bench/compare.sh   # the same with the log on both sides
#
# Needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
N16=${N16:-1000000}   # requests per run at -P 16 (the issue's figure)
N1=${N1:-200000}      # requests per run at -P 1
PROCS=${PROCS:-"1 2"}
PIPES=${PIPES:-"16 1"}
POLICIES=${POLICIES:-off}
DPORT=${DPORT:-6398}
RPORT=${RPORT:-6399}

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/delayd" .

rps() { # redis-benchmark --csv prints "test","rps",...
  redis-benchmark --csv "$@" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

echo "# $(date -u +%F) $(nproc) cores, $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3)"
echo "| GOMAXPROCS | log | -P | delayd DELAY.ADD/s (median) | redis ZADD/s (median) | median ratio |"
echo "| --- | --- | --- | --- | --- | --- |"
for policy in $POLICIES; do
  for procs in $PROCS; do
    for P in $PIPES; do
      n=$N16; [ "$P" = 1 ] && n=$N1
      rm -rf "$work/d" "$work/r"; mkdir -p "$work/d" "$work/r"
      if [ "$policy" = off ]; then
        dargs=(--appendonly no); rargs=(--appendonly no)
      else
        dargs=(--appendonly yes --appendfsync "$policy"); rargs=(--appendonly yes --appendfsync "$policy")
      fi
      GOMAXPROCS=$procs "$work/delayd" --port $DPORT --http-addr "" --dir "$work/d" --log-level warn "${dargs[@]}" --auto-rewrite-percentage 0 &
      redis-server --port $RPORT --dir "$work/r" --save '' "${rargs[@]}" --daemonize yes >/dev/null
      wait_port $DPORT; wait_port $RPORT
      ratios=(); ds=(); rs=()
      for _ in $(seq "$ROUNDS"); do
        d=$(rps -p $DPORT -c 50 -n "$n" -P "$P" -r 100000 DELAY.ADD q __rand_int__ p:__rand_int__)
        r=$(rps -p $RPORT -c 50 -n "$n" -P "$P" -r 100000 ZADD q __rand_int__ m:__rand_int__)
        ds+=("$d"); rs+=("$r"); ratios+=("$(awk -v a="$d" -v b="$r" 'BEGIN{printf "%.2f", a/b}')")
      done
      redis-cli -p $DPORT shutdown >/dev/null 2>&1 || true
      redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true
      wait
      echo "| $procs | $policy | $P | $(printf '%s\n' "${ds[@]}" | median) | $(printf '%s\n' "${rs[@]}" | median) | $(printf '%s\n' "${ratios[@]}" | median) (rounds: ${ratios[*]}) |"
    done
  done
done
