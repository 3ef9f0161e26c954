#!/usr/bin/env bash
# groups.sh: does a cluster scale with its Raft groups? Two 3-node clusters
# made by scripts/cluster.sh, one with 1 group and one with 3 (leaders on
# different nodes), every node capped to the same CPU share by a cgroup, so
# that a node, not the machine, is the bottleneck, as on three machines.
# redis-benchmark --cluster adds to queues of every group at once (to the
# one group's leader without --cluster, which wants two masters or more); rounds
# interleave the two clusters and the table reports the median of the
# per-round ratios, with the server CPU a request (all three nodes' user +
# system time from /proc, over the requests).
#
#   bench/groups.sh                      # 25% of a CPU a node, -P 16, everysec
#   QUOTA=40 P=1 bench/groups.sh
#
# Knobs: ROUNDS (5), N requests a run (300000), P pipeline (16), C clients
# a group (50: redis-benchmark --cluster deals its clients out over the
# masters, so the 3-group run gets 3C and each leader C, as the one group's), QUOTA percent of one CPU a node (25), POLICY appendfsync (everysec),
# SERVER_CPU (0) all nodes, CLIENT_CPU (1) redis-benchmark, BIN (a delayd
# binary to run instead of this checkout's build), VERBOSE (each round's
# figures and the Raft entries it made, on stderr), PROFILE (a directory:
# each node writes its CPU profile there, node-<port>.prof, whole runs).
# Needs root (cgroups: v1 cpu.cfs_quota_us or v2 cpu.max), redis-benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

# Both clusters snapshot at the defaults (auto-rewrite-percentage 100, min
# size 64 MB).
ROUNDS=${ROUNDS:-5}
N=${N:-300000}
P=${P:-16}
C=${C:-50}
QUOTA=${QUOTA:-25}
PERIOD=${PERIOD:-100} # ms: the cgroup's period, in which a node runs QUOTA% of it
POLICY=${POLICY:-everysec}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cgv=2; cgroot=/sys/fs/cgroup/delayd-bench-$$
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
else
  cgv=1; cgroot=/sys/fs/cgroup/cpu/delayd-bench-$$
fi
mkdir -p "$cgroot"

work=$(mktemp -d)
PROFILE=${PROFILE:-}
[ -n "$PROFILE" ] && mkdir -p "$PROFILE" && PROFILE=$(cd "$PROFILE" && pwd)
cleanup() {
  [ -d "$work/a" ] && DATA=$work/a BASE_PORT=7500 scripts/cluster.sh stop >/dev/null 2>&1 || true
  [ -d "$work/b" ] && DATA=$work/b BASE_PORT=7600 RAFT_GROUPS=3 scripts/cluster.sh stop >/dev/null 2>&1 || true
  sleep 0.5
  for g in "$cgroot"/node-*; do [ -d "$g" ] && rmdir "$g" 2>/dev/null || true; done
  rmdir "$cgroot" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${BIN:-}" ]; then cp "$BIN" "$work/delayd"; else go build -o "$work/delayd" .; fi

# Each node starts through this wrapper: into its own cgroup, then pinned.
cat >"$work/node.sh" <<EOF
#!/usr/bin/env bash
port=""; prev=""
for a in "\$@"; do [ "\$prev" = --port ] && port=\$a; prev=\$a; done
cg=$cgroot/node-\$port; mkdir -p "\$cg"
if [ $cgv = 2 ]; then echo "$((QUOTA * PERIOD * 10)) $((PERIOD * 1000))" >"\$cg/cpu.max"; else echo $((PERIOD * 1000)) >"\$cg/cpu.cfs_period_us"; echo $((QUOTA * PERIOD * 10)) >"\$cg/cpu.cfs_quota_us"; fi
echo \$\$ >"\$cg/cgroup.procs"
[ -n "$PROFILE" ] && export DELAYD_CPUPROFILE=$PROFILE/node-\$port.prof
exec taskset -c $SERVER_CPU "$work/delayd" "\$@"
EOF
chmod +x "$work/node.sh"

start() { # dir base groups
  DATA=$1 BASE_PORT=$2 RAFT_GROUPS=$3 DELAYD_BIN="$work/node.sh" scripts/cluster.sh start \
    --appendfsync "$POLICY" --http-addr "" --log-level error \
    --cluster-election-timeout 3000 >/dev/null
}
start "$work/a" 7500 1
start "$work/b" 7600 3

pids() { for n in 1 2 3; do cat "$1"/*$n/delayd.pid; done; } # node 1, 2, 3
cpu() { for p in $(pids "$1"); do awk '{printf "%d ", $14+$15}' "/proc/$p/stat"; done; }
run() { # dir port clients mode -> "rps total leader follower" (CPU µs a request)
  local t0 t1 r e0 e1
  read -ra t0 <<<"$(cpu "$1")"
  e0=$(entries "$2")
  # redis-benchmark's --cluster wants two masters or more: one group's
  # leader owns every slot, so plain mode sends it the same commands.
  # shellcheck disable=SC2086
  r=$(taskset -c "$CLIENT_CPU" redis-benchmark $4 -p "$2" --csv -c "$3" -n "$N" -P "$P" -r 100000 \
    DELAY.ADD 'q{tag}' 600000 p:__rand_int__ 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')
  read -ra t1 <<<"$(cpu "$1")"
  e1=$(entries "$2")
  [ -n "${VERBOSE:-}" ] && echo "  ${4:-plain} on $2: $((e1 - e0)) Raft entries over the leaders, $((N / (e1 - e0 + 1))) adds an entry" >&2
  # Node 1 leads every group of the 1-group cluster (it bootstrapped it).
  awk -v r="$r" -v n="$N" -v a=$((t1[0] - t0[0])) -v b=$((t1[1] - t0[1])) -v c=$((t1[2] - t0[2])) \
    'BEGIN{printf "%s %.2f %.2f %.2f", r, (a+b+c)*1e4/n, a*1e4/n, (b+c)/2*1e4/n}'
}
# entries: the Raft entries of the groups' leaders (master_repl_offset),
# summed: group g of node N answers on port base+N+100g, and node g+1 leads
# group g (scripts/cluster.sh), so the 1-group cluster's one leader is its
# first port and the 3-group's are first, first+101, first+202.
entries() {
  local sum=0 p v
  for p in "$1" $(( $1 + 101 )) $(( $1 + 202 )); do
    v=$(redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r' | awk -F: '/^role:master/{m=1} /^master_repl_offset/{o=$2} END{if (m) print o+0}')
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "# $(date -u '+%F %H:%M') UTC; $(nproc) CPUs; $(go version | cut -d' ' -f3); each node capped to $QUOTA% of a CPU (cgroup v$cgv), all on CPU $SERVER_CPU; redis-benchmark --cluster on CPU $CLIENT_CPU, -c $C a group -P $P, N=$N; appendfsync $POLICY"
ratios=(); as=(); bs=(); ac=(); bc=(); ls=(); fs=()
for i in $(seq "$ROUNDS"); do
  if [ $((i % 2)) = 1 ]; then a=$(run "$work/a" 7501 "$C" ""); b=$(run "$work/b" 7601 $((3 * C)) --cluster)
  else b=$(run "$work/b" 7601 $((3 * C)) --cluster); a=$(run "$work/a" 7501 "$C" ""); fi
  read -r ar at al af <<<"$a"; read -r br bt _ <<<"$b"
  as+=("$ar"); ac+=("$at"); ls+=("$al"); fs+=("$af"); bs+=("$br"); bc+=("$bt")
  ratios+=("$(awk -v x="$br" -v y="$ar" 'BEGIN{printf "%.2f", x/y}')")
  [ -n "${VERBOSE:-}" ] && echo "round $i: 1 group $a; 3 groups $b" >&2
done
L=$(printf '%s\n' "${ls[@]}" | median); F=$(printf '%s\n' "${fs[@]}" | median)
echo "| cluster | DELAY.ADD/s (median) | server CPU µs a request, 3 nodes (median) |"
echo "| --- | --- | --- |"
echo "| 3 nodes, 1 group | $(printf '%s\n' "${as[@]}" | median) | $(printf '%s\n' "${ac[@]}" | median) (leader $L, each follower $F) |"
echo "| 3 nodes, 3 groups | $(printf '%s\n' "${bs[@]}" | median) | $(printf '%s\n' "${bc[@]}" | median) |"
echo
echo "3 groups / 1 group: **$(printf '%s\n' "${ratios[@]}" | median)** (rounds: ${ratios[*]})"
# With every node CPU-bound, one group is bound by its leader (L a request)
# and three groups, leaders spread, by every node doing L + 2F for a third
# of the requests: at most 3L / (L + 2F) times one group.
echo "the bound from one group's costs, 3L/(L+2F): $(awk -v l="$L" -v f="$F" 'BEGIN{printf "%.2f", 3*l/(l+2*f)}')"
