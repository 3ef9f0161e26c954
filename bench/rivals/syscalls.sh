#!/usr/bin/env bash
# syscalls.sh: the server's read and write system calls per job in one case
# of the rivals race, from /proc/<pid>/io (syscr, syscw: every thread, every
# descriptor: sockets and the log alike), beside the race's own row.
#
#   bench/rivals/syscalls.sh                              # delayd-pipe, delayd-blpop, redis-zset; spread
#   SYSTEMS="delayd-ack redis-zset" CASE=steady bench/rivals/syscalls.sh
#
# A finer split by descriptor: strace -f -e trace=read,write -p <pid> on a
# smaller run (JOBS=20000); strace slows the server, so only the counts of
# such a run mean anything.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SYSTEMS=${SYSTEMS:-delayd-pipe delayd-blpop redis-zset}
CASE=${CASE:-spread}
JOBS=${JOBS:-100000}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/delayd" .)
(cd "$here" && go build -o "$bin/rivals" .)
echo "| system | case | server read calls / job | server write calls / job | completed | late p50 / p99 ms | server CPU µs / job |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for sys in $SYSTEMS; do
  (cd "$here" && exec taskset -c 1 "$bin/rivals" -delayd "$bin/delayd" -bullmq "$here/bullmq" -server-cpu 0 \
    -jobs "$JOBS" -systems "$sys" -cases "$CASE" >"$bin/out" 2>&1) &
  r=$!
  pid=
  for _ in $(seq 500); do
    if [ "$sys" = redis-zset ]; then pid=$(pgrep -n -x redis-server || true); else pid=$(pgrep -n -f "^$bin/delayd" || true); fi
    [ -n "$pid" ] && break
    sleep 0.02
  done
  last=
  # The counters die with the server: keep the last reading.
  while kill -0 "$r" 2>/dev/null; do
    x=$(tr '\n' ' ' <"/proc/$pid/io" 2>/dev/null || true)
    [ -n "$x" ] && last=$x
    sleep 0.1
  done
  wait "$r" || true
  row=$(grep "^| $sys | $CASE |" "$bin/out" | tail -1)
  echo "$last" | awk -v sys="$sys" -v c="$CASE" -v row="$row" '
    {for (i = 1; i < NF; i += 2) v[$i] = $(i + 1)}
    END {
      split(row, f, "|"); n = f[5] + 0
      if (n == 0) {print "| " sys " | " c " | no result: see the harness output |" ; exit}
      printf "| %s | %s | %.2f | %.2f | %d | %s / %s | %s |\n", sys, c, v["syscr:"] / n, v["syscw:"] / n, n, f[11] + 0, f[13] + 0, f[18] + 0
    }'
done
