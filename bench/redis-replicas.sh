#!/usr/bin/env bash
# redis-replicas.sh: the yardstick for issue 34's one-group line. What
# Redis's own replication costs on bench/clustercpu.sh's pinned test: one
# redis-server, and a master with two replicas (asynchronous replication,
# appendonly everysec on each), every server on CPU 0, redis-benchmark
# (ZADD, -P 16 -c 50) on CPU 1; the CPU a request of each process from
# /proc, as clustercpu.sh reads delayd's single node, leader L and
# followers F. "single/(L+2F)" is what one group against one node would
# read on one CPU; "3L/(L+2F)" the bound of 3 groups over 1 (group-scaling.md).
#
#   bench/redis-replicas.sh            # 3 rounds of N=1000000 requests
#   ROUNDS=5 N=500000 bench/redis-replicas.sh
set -u
B=${BASE:-9900}; N=${N:-1000000}; ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
cleanup() { for i in 0 1 2 3; do redis-cli -p $((B+i)) shutdown nosave >/dev/null 2>&1; done; }
trap 'cleanup; rm -rf "$work"' EXIT
for i in 0 1 2 3; do mkdir -p "$work/$i"; done
srv() { taskset -c 0 redis-server --port $1 --dir "$work/$2" --save '' --appendonly yes --appendfsync everysec --daemonize yes --bind 127.0.0.1 "${@:3}" >/dev/null; }
srv $B 0; srv $((B+1)) 1; srv $((B+2)) 2 --replicaof 127.0.0.1 $((B+1)); srv $((B+3)) 3 --replicaof 127.0.0.1 $((B+1))
sleep 2
pid() { redis-cli -p $1 info server | grep process_id | cut -d: -f2 | tr -d '\r'; }
P=($(pid $B) $(pid $((B+1))) $(pid $((B+2))) $(pid $((B+3))))
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
tick=$(getconf CLK_TCK)
echo "# $(date -u '+%F %H:%M') UTC; $(redis-server --version | cut -d' ' -f3); servers on CPU 0, redis-benchmark ZADD -P 16 -c 50 on CPU 1, N=$N"
for _ in $(seq "$ROUNDS"); do
  a=$(cpu ${P[0]}); taskset -c 1 redis-benchmark -p $B -q -c 50 -n $N -P 16 -r 100000 ZADD q __rand_int__ m:__rand_int__ >/dev/null; b=$(cpu ${P[0]})
  m0=$(cpu ${P[1]}); f0=$(cpu ${P[2]}); g0=$(cpu ${P[3]})
  taskset -c 1 redis-benchmark -p $((B+1)) -q -c 50 -n $N -P 16 -r 100000 ZADD q __rand_int__ m:__rand_int__ >/dev/null
  sleep 1
  m1=$(cpu ${P[1]}); f1=$(cpu ${P[2]}); g1=$(cpu ${P[3]})
  awk -v s=$((b-a)) -v m=$((m1-m0)) -v f=$((f1-f0)) -v g=$((g1-g0)) -v n=$N -v t=$tick 'BEGIN{u=1e6/t/n; printf "single %.2f  master L %.2f  replicas F %.2f %.2f µs a request; F/L %.2f; single/(L+2F) %.2f; 3L/(L+2F) %.2f\n", s*u, m*u, f*u, g*u, (f+g)/2/m, s/(m+f+g), 3*m/(m+f+g)}'
done
