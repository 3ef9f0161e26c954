#!/usr/bin/env bash
# pinned.sh: every row of issue 11's table, delayd side by side with
# redis-server, each server pinned to CPU 0 and redis-benchmark to CPU 1
# (taskset), so server and client stop fighting over two cores. Rounds
# interleave the two servers (delayd then redis, then redis then delayd,
# and so on: which goes first alternates) and each row reports the
# median of the per-round ratios with every round shown. The machine is
# shared and noisy: only ratios from one run mean anything. It succeeds
# bench/compare.sh (DELAY.ADD vs ZADD only, unpinned), which stays.
#
#   bench/pinned.sh                      # every row, persistence off, -P 16 and -P 1
#   QUICK=1 bench/pinned.sh              # one key only, fewer requests and rounds: 3 minutes on a loaded 2-CPU box
#   ROWS="lpop blpop" KEYS=one bench/pinned.sh
#   POLICIES="off everysec always" bench/pinned.sh   # the log on both sides too
#   AGAINST=/tmp/delayd.old bench/pinned.sh          # A/B: another delayd binary instead of redis
#
# Knobs (environment):
#   ROUNDS    rounds per row (5; QUICK: 3)
#   N16, N1   requests per run at -P 16 and -P 1 (1000000, 200000; QUICK: 50000, 5000)
#   PIPES     pipeline depths ("16 1")
#   SETTLE    seconds to wait after the fills when the log is on (3): each server's spiller tails its fill
#   KEYS      "one" (key q) and/or "rand" (one of KEYSPACE keys per request) ("one rand"; QUICK: one)
#   KEYSPACE  how many random keys (1000)
#   POLICIES  off, everysec, always, no: the same appendfsync on both sides (off)
#   PROCS     GOMAXPROCS for delayd ("" = Go's default, 1 under taskset -c 0)
#   ROWS      any of: add-zadd add-lpush ping rpush lpop blpop pop-blpop (all)
#   SERVER_CPU, CLIENT_CPU   the CPUs to pin to (0, 1)
#   AGAINST   a delayd binary to run in redis-server's place (A/B of two builds)
#   DELAYD    a delayd binary to use instead of building this tree
#
# Rows that pop fill both lists first, outside the timed run, with more
# elements than the run pops (N plus a margin on one key; 2N over random
# keys), so no pop finds an empty list; one key is checked after each run.
#
# Besides requests per second, each row shows the server's CPU time per
# request (user + system, from /proc, 10 ms ticks): on a shared machine the
# server may get less than its CPU, and CPU per request moves much less with
# that than throughput does.
#
# Needs redis-server, redis-benchmark, redis-cli (apt-get install -y redis-server redis-tools), taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${QUICK:-}" ]; then
  ROUNDS=${ROUNDS:-3}; N16=${N16:-50000}; N1=${N1:-5000}; KEYS=${KEYS:-one}
fi
ROUNDS=${ROUNDS:-5}
N16=${N16:-1000000}
N1=${N1:-200000}
PIPES=${PIPES:-"16 1"}
KEYS=${KEYS:-"one rand"}
KEYSPACE=${KEYSPACE:-1000}
POLICIES=${POLICIES:-off}
PROCS=${PROCS:-}
ROWS=${ROWS:-"add-zadd add-lpush ping rpush lpop blpop pop-blpop"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
DPORT=${DPORT:-6398}
RPORT=${RPORT:-6399}
AGAINST=${AGAINST:-}

work=$(mktemp -d)
cleanup() {
  redis-cli -p "$DPORT" shutdown nosave >/dev/null 2>&1 || true
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${DELAYD:-}" ]; then
  cp "$DELAYD" "$work/delayd"
else
  go build -o "$work/delayd" .
fi

bench() { # bench port -n N -P P [-r K] cmd...: requests per second, pinned to the client CPU
  local port=$1; shift
  taskset -c "$CLIENT_CPU" redis-benchmark -p "$port" --csv "$@" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; } # user + system CPU, in ticks
us_per_op() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN{printf "%.2f", t * 1e6 / hz / n}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no server on $1" >&2; return 1; }

start_servers() { # policy
  rm -rf "$work/d" "$work/r"; mkdir -p "$work/d" "$work/r"
  local dargs=(--appendonly no) rargs=(--appendonly no)
  if [ "$1" != off ]; then
    dargs=(--appendonly yes --appendfsync "$1"); rargs=(--appendonly yes --appendfsync "$1")
  fi
  local env=()
  [ -n "$PROCS" ] && env=(GOMAXPROCS="$PROCS")
  env "${env[@]}" taskset -c "$SERVER_CPU" "$work/delayd" --port "$DPORT" --http-addr "" --dir "$work/d" \
    --log-level error "${dargs[@]}" --auto-rewrite-percentage 0 2>>"$work/delayd.log" &
  dpid=$!
  if [ -n "$AGAINST" ]; then
    env "${env[@]}" taskset -c "$SERVER_CPU" "$AGAINST" --port "$RPORT" --http-addr "" --dir "$work/r" \
      --log-level error "${dargs[@]}" --auto-rewrite-percentage 0 2>>"$work/against.log" &
  else
    taskset -c "$SERVER_CPU" redis-server --port "$RPORT" --dir "$work/r" --save '' "${rargs[@]}" \
      --auto-aof-rewrite-percentage 0 --daemonize yes >/dev/null
  fi
  wait_port "$DPORT"; wait_port "$RPORT"
  rpid=$(redis-cli -p "$RPORT" info server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')
}
stop_servers() {
  redis-cli -p "$DPORT" shutdown nosave >/dev/null 2>&1 || true
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  # redis-server daemonized: wait until it has gone, so the next one owns the port
  for _ in $(seq 100); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
}

# row key -> "delayd command | peer command | fill": the peer command runs
# against delayd too with AGAINST. KEY is the key (q, or q:__rand_int__).
row_cmds() {
  local k=$2
  case $1 in
    add-zadd)  echo "DELAY.ADD $k __rand_int__ p:__rand_int__|ZADD $k __rand_int__ m:__rand_int__|" ;;
    add-lpush) echo "DELAY.ADD $k __rand_int__ p:__rand_int__|LPUSH $k p:__rand_int__|" ;;
    ping)      echo "PING|PING|" ;;
    rpush)     echo "RPUSH $k p:__rand_int__|RPUSH $k p:__rand_int__|" ;;
    lpop)      echo "LPOP $k|LPOP $k|fill" ;;
    blpop)     echo "BLPOP $k 0|BLPOP $k 0|fill" ;;
    pop-blpop) echo "DELAY.POP $k 0|BLPOP $k 0|fill" ;;
  esac
}

cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
gover=$(go version | cut -d' ' -f3)
rver=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
gmp=${PROCS:-"Go's default: $(taskset -c "$SERVER_CPU" nproc) (taskset -c $SERVER_CPU)"}
peer="redis-server $rver"
[ -n "$AGAINST" ] && peer="delayd $AGAINST"
echo "# $(date -u '+%F %H:%M') UTC; $(nproc) CPUs ($cpu_model); $gover; redis $rver; delayd GOMAXPROCS $gmp"
echo "# server on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU; -c 50; $ROUNDS rounds; N=$N16 at -P 16, $N1 at -P 1; peer: $peer"
echo
echo "| command (delayd vs peer) | log | keys | -P | delayd/s (median) | peer/s (median) | median ratio (rounds) | server CPU µs/op, delayd / peer (medians) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for policy in $POLICIES; do
  for row in $ROWS; do
    for keys in $KEYS; do
      [ "$row" = ping ] && [ "$keys" = rand ] && continue # no key
      # -r draws __rand_int__ (each occurrence on its own) from 0..r-1:
      # values from 100000, keys from KEYSPACE.
      key=q; rr=(-r 100000)
      if [ "$keys" = rand ]; then key="q:__rand_int__"; rr=(-r "$KEYSPACE"); fi
      IFS='|' read -r dcmd pcmd fill <<<"$(row_cmds "$row" "$key")"
      [ -n "$AGAINST" ] && pcmd=$dcmd
      for P in $PIPES; do
        n=$N16; [ "$P" = 1 ] && n=$N1
        start_servers "$policy"
        ratios=(); ds=(); rs=(); dc=(); rc=()
        for round in $(seq "$ROUNDS"); do
          for port in "$DPORT" "$RPORT"; do
            [ -z "$fill" ] && continue
            if [ "$keys" = one ]; then
              bench "$port" -c 50 -P 64 -n $((n + 1000)) -r 100000 RPUSH q p:__rand_int__ >/dev/null
            else
              bench "$port" -c 50 -P 64 -n $((2 * n)) -r "$KEYSPACE" RPUSH "q:__rand_int__" p:__rand_int__ >/dev/null
            fi
          done
          # With the log on, each server's spiller tails what its fill
          # wrote (decoding every record) for a while after it: let both
          # finish before either is timed, or the one filled second steals
          # CPU 0 from whichever is timed first.
          [ -n "$fill" ] && [ "$policy" != off ] && sleep "${SETTLE:-3}"
          # The order alternates by round: the server benchmarked second
          # shares CPU 0 with whatever the first one still does (its GC).
          for side in $(if [ $((round % 2)) = 0 ]; then echo d p; else echo p d; fi); do
            if [ "$side" = d ]; then
              t0=$(cpu "$dpid")
              # shellcheck disable=SC2086 # the commands are words on purpose
              d=$(bench "$DPORT" -c 50 -n "$n" -P "$P" "${rr[@]}" $dcmd)
              dc+=("$(us_per_op $(($(cpu "$dpid") - t0)) "$n")")
            else
              t0=$(cpu "$rpid")
              # shellcheck disable=SC2086
              r=$(bench "$RPORT" -c 50 -n "$n" -P "$P" "${rr[@]}" $pcmd)
              rc+=("$(us_per_op $(($(cpu "$rpid") - t0)) "$n")")
            fi
          done
          if [ -n "$fill" ] && [ "$keys" = one ]; then
            for port in "$DPORT" "$RPORT"; do
              left=$(redis-cli -p "$port" llen q)
              [ "$left" -gt 0 ] || echo "warning: $row on port $port emptied its list: some pops found it empty" >&2
            done
          fi
          ds+=("$d"); rs+=("$r"); ratios+=("$(awk -v a="$d" -v b="$r" 'BEGIN{printf "%.2f", a/b}')")
        done
        stop_servers
        label="$(echo "$dcmd" | cut -d' ' -f1) vs $(echo "$pcmd" | cut -d' ' -f1)"
        echo "| $label | $policy | $keys | $P | $(printf '%s\n' "${ds[@]}" | median) | $(printf '%s\n' "${rs[@]}" | median) | **$(printf '%s\n' "${ratios[@]}" | median)** (${ratios[*]}) | $(printf '%s\n' "${dc[@]}" | median) / $(printf '%s\n' "${rc[@]}" | median) |"
      done
    done
  done
done
