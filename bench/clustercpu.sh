#!/usr/bin/env bash
# clustercpu.sh: the server CPU a DELAY.ADD costs a single node, and a 3-node
# one-group cluster's leader and followers, all four processes on CPU 0 and
# redis-benchmark (-P 16, 50 clients) on CPU 1, rounds interleaved. CPU is
# user + system time from /proc over the requests: on a shared machine it
# moves less with other load than adds/s. "single / 3 nodes" is what the
# adds/s ratio of a CPU-bound run on one CPU would be (issue 34's one-group
# target: 0.6). docs/decisions/group-scaling.md has its figures.
#
#   bench/clustercpu.sh                          # this checkout
#   AGAINST=/tmp/delayd.old bench/clustercpu.sh  # and another binary, the same rounds
#
# Knobs: ROUNDS (3), N requests a run (200000), BASE port (9700; ports
# BASE..BASE+3 and BASE+11..BASE+13, and BASE+100.. for AGAINST), EXTRA
# (more arguments for every server, word-split), PROFILE
# (a directory: this checkout's four nodes write CPU profiles there, whole
# runs, read with `go tool pprof -top -cum -ignore stopServer DIR/follower2.prof`).
# Every server compacts at the defaults (auto-rewrite-percentage 100, min
# size 64 MB): the single node rewrites its log, the cluster snapshots.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-200000}
BASE=${BASE:-9700}
work=$(mktemp -d)
[ -n "${PROFILE:-}" ] && mkdir -p "$PROFILE" && PROFILE=$(cd "$PROFILE" && pwd)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/delayd" .

common=(--bind 127.0.0.1 --log-level error --appendfsync everysec --http-addr "" ${EXTRA:-})
cl=(--cluster-enabled yes --cluster-election-timeout 3000)
up() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
prof() { # bin role -> the environment its node runs with
  if [ -n "${PROFILE:-}" ] && [ "$1" = "$work/delayd" ]; then echo "DELAYD_CPUPROFILE=$PROFILE/$2.prof"; else echo "DELAYD_CPUPROFILE="; fi
}
start() { # bin base -> "single leader follower follower" pids
  local bin=$1 b=$2 d=$work/$2 s p1 p2 p3
  env "$(prof "$bin" single)" taskset -c 0 "$bin" --port "$b" --dir "$d/s" "${common[@]}" >/dev/null 2>&1 & s=$!
  env "$(prof "$bin" leader)" taskset -c 0 "$bin" --port $((b+1)) --dir "$d/c1" "${common[@]}" "${cl[@]}" --cluster-bootstrap \
    --cluster-bus-addr 127.0.0.1:$((b+11)) >/dev/null 2>&1 & p1=$!
  up $((b+1)); sleep 1.5
  for i in 2 3; do
    env "$(prof "$bin" "follower$i")" taskset -c 0 "$bin" --port $((b+i)) --dir "$d/c$i" "${common[@]}" "${cl[@]}" --cluster-join 127.0.0.1:$((b+1)) \
      --cluster-bus-addr 127.0.0.1:$((b+10+i)) >/dev/null 2>&1 &
    [ "$i" = 2 ] && p2=$! || p3=$!
  done
  up "$b"
  for _ in $(seq 100); do [ "$(redis-cli -p $((b+1)) cluster nodes 2>/dev/null | grep -c connected)" = 3 ] && break; sleep 0.1; done
  echo "$s $p1 $p2 $p3"
}
cpu() { for p in "$@"; do awk '{printf "%d ", $14+$15}' "/proc/$p/stat"; done; }
bench() { # a failed run says so on stderr and reads 0 adds/s (set -e would end the script silently)
  local out
  if ! out=$(taskset -c 1 redis-benchmark -p "$1" --csv -c 50 -n "$N" -P 16 -r 100000 DELAY.ADD q __rand_int__ p:__rand_int__ 2>/dev/null); then
    echo "clustercpu: redis-benchmark on port $1 failed; this round reads 0 adds/s" >&2
    echo 0
    return 0
  fi
  tail -1 <<<"$out" | cut -d, -f2 | tr -d '"'
}
round() { # name base pids...
  local name=$1 b=$2 s0 s1 t0 t1 sr cr
  read -ra s0 <<<"$(cpu "$3")"; sr=$(bench "$b"); read -ra s1 <<<"$(cpu "$3")"
  read -ra t0 <<<"$(cpu "$4" "$5" "$6")"; cr=$(bench $((b+1))); read -ra t1 <<<"$(cpu "$4" "$5" "$6")"
  awk -v w="$name" -v sr="$sr" -v cr="$cr" -v n="$N" -v s=$((s1[0]-s0[0])) -v a=$((t1[0]-t0[0])) -v b=$((t1[1]-t0[1])) -v c=$((t1[2]-t0[2])) \
    'BEGIN{S=s*1e4/n; L=a*1e4/n; F=(b+c)/2*1e4/n; printf "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f / %.0f |\n", w, S, L, F, L+2*F, S/(L+2*F), sr, cr}'
}
read -ra mine <<<"$(start "$work/delayd" "$BASE")"
pids+=("${mine[@]}")
other=()
if [ -n "${AGAINST:-}" ]; then
  read -ra other <<<"$(start "$AGAINST" $((BASE+100)))"
  pids+=("${other[@]}")
fi
sleep 1
echo "# $(date -u '+%F %H:%M') UTC; $(nproc) CPUs; every server on CPU 0, redis-benchmark -P 16 -c 50 on CPU 1; N=$N; appendfsync everysec"
echo "| binary | single node µs a request | leader L | each follower F | 3 nodes | single / 3 nodes | adds/s single / cluster |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for _ in $(seq "$ROUNDS"); do
  round this "$BASE" "${mine[@]}"
  [ -n "${AGAINST:-}" ] && round "$(basename "$AGAINST")" $((BASE+100)) "${other[@]}"
done
