#!/usr/bin/env bash
# cpuab.sh: server CPU per completed job in one case of the rivals race, for
# one or more delayd binaries, in alternating rounds (the machine drifts by
# 10% and more between minutes, so only builds compared in the same rounds
# count). CPU is the sum of every server thread's time on CPU from
# /proc/<pid>/task/*/schedstat (nanoseconds, unlike /proc/<pid>/stat's ticks),
# read until the server exits.
#
#   bench/rivals/cpuab.sh /tmp/new /tmp/old                 # delayd-pipe, steady, 3 rounds
#   SYSTEM=delayd-ack CASE=spread ROUNDS=5 bench/rivals/cpuab.sh /tmp/new /tmp/old
#   SYSTEM=redis-zset bench/rivals/cpuab.sh /tmp/new        # the rival (the binary is not used)
#   SYSTEM=delayd-mpop ROUNDS=8 bench/rivals/cpuab.sh /tmp/new redis-zset
#                     # a column named redis-zset runs the rival in that slot of each round
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYSTEM=${SYSTEM:-delayd-pipe}
CASE=${CASE:-steady}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-100000}
[ $# -ge 1 ] || { echo "usage: $0 delayd-binary..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# This script's own polling runs beside the clients, off the server's CPU 0.
taskset -pc 1 $$ >/dev/null
exec {nap}<> <(:) # a descriptor nothing is ever written to: read -t on it is a sleep
(cd "$here" && go build -o "$tmp/rivals" .)
echo "| round | binary | system | case | late p50 / p99 ms | server CPU µs / job |"
echo "| --- | --- | --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    sys=$SYSTEM
    if [ "$bin" = redis-zset ]; then sys=redis-zset; bin=$(command -v redis-server); name=redis-zset; else bin=$(realpath "$bin"); name=$(basename "$bin"); fi
    (cd "$here" && exec taskset -c 1 "$tmp/rivals" -delayd "$bin" -bullmq "$here/bullmq" -server-cpu 0 \
      -jobs "$JOBS" -systems "$sys" -cases "$CASE" >"$tmp/out" 2>&1) &
    run=$!
    pid=
    ns=0
    # The counters die with the server, so the reading kept is the largest
    # seen. The harness also runs the binary for its --version, before and
    # after the server, and pgrep may find that run: whenever the process
    # followed is gone, follow the newest that matches.
    while kill -0 "$run" 2>/dev/null; do
      if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        if [ "$sys" = redis-zset ]; then pid=$(pgrep -n -x redis-server || true); else pid=$(pgrep -n -f "^$bin" || true); fi
      fi
      # Builtins only: a cat, an awk and a sleep every tenth of a second
      # took enough of the clients' CPU to put the workers' p99 lateness
      # at 2 ms.
      x=0
      for f in /proc/"$pid"/task/*/schedstat; do
        read -r t _ 2>/dev/null <"$f" && x=$((x + t))
      done
      [ "$x" -gt "$ns" ] && ns=$x
      read -rt 0.1 -u "$nap" _ || true # sleep 0.1 without starting a process
    done
    wait "$run" || true
    row=$(grep "^| $sys | $CASE |" "$tmp/out" | tail -1)
    echo "$row" | awk -F'|' -v r="$r" -v b="$name" -v ns="$ns" '{
      n = $5 + 0
      if (n == 0) {print "| " r " | " b " | no result: see the harness output |"; exit}
      printf "| %s | %s | %s | %s | %s / %s | %.1f |\n", r, b, $2, $3, $11 + 0, $13 + 0, ns / 1000 / n
    }' | sed 's/|  */| /g; s/  *|/ |/g' | tee -a "$tmp/rows"
  done
done
# Medians: each column's CPU a job, and the per-round ratio of the first
# column to each other one (a round's columns ran back to back, so their
# ratio moves less than either figure does between rounds).
awk -F' [|] ' -v cols=$# '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  /^[|] [0-9]+ [|]/ { k++; c = (k - 1) % cols + 1; r = int((k - 1) / cols) + 1; name[c] = $2; rounds = r
    if ($NF ~ /^[0-9.]+ [|]$/) v[c, r] = $NF + 0 }
  END {
    if (!rounds) exit
    print ""
    print "| column | median CPU µs / job | median ratio, first column / this one |"
    print "| --- | --- | --- |"
    for (c = 1; c <= cols; c++) {
      n = 0; m = 0
      for (r = 1; r <= rounds; r++) if ((c, r) in v) { x[++n] = v[c, r]; if ((1, r) in v && v[c, r] > 0) y[++m] = v[1, r] / v[c, r] }
      printf "| %s | %.1f | %s |\n", name[c], median(x, n), c == 1 ? "" : sprintf("%.2f (%d rounds)", median(y, m), m)
      delete x; delete y
    }
  }' "$tmp/rows"

