#!/usr/bin/env bash
# A delayd cluster on one machine, its nodes in the background:
#
#   scripts/cluster.sh start          # 3 nodes on ports 7001-7003 (bus 17001-17003,
#                                     # dashboards 8001-8003), data in ./cluster-data
#   scripts/cluster.sh status         # each node: port, pid, role
#   scripts/cluster.sh kill-node 2    # SIGKILL node 2 (port 7002), as a crash
#   scripts/cluster.sh kill-node leader   # SIGKILL whichever node is the leader now
#   scripts/cluster.sh stop-node 2    # SIGTERM node 2: it hands leadership over and exits
#   scripts/cluster.sh start-node 2   # start node 2 again from its data
#   scripts/cluster.sh stop           # SIGTERM every node
#   BASE_PORT=7100 NODES=5 scripts/cluster.sh start   # ports 7101-7105
#   RAFT_GROUPS=3 scripts/cluster.sh start   # the slots split over 3 Raft groups,
#                                     # group g of node N on port 7000+N+100*g,
#                                     # group g led by node g+1 (CLUSTER FAILOVER)
#
# Node N (1..NODES) listens on BASE_PORT+N; node 1 forms the group, the
# others join it. Extra arguments after start or start-node go to the nodes
# (e.g. --cluster-ack leader). A node started again keeps its id and log in
# DATA/<port>; delete DATA for a new cluster. With RAFT_GROUPS, "leader" is
# group 0's, and status shows each node's role in every group. Each node
# writes its log to DATA/<port>/delayd.out and its pid to
# DATA/<port>/delayd.pid. The binary
# is built into DATA/bin, unless DELAYD_BIN names one to run. The script
# keeps no settings: give every call the same BASE_PORT, NODES, RAFT_GROUPS
# and DATA (export them).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-3}
base=${BASE_PORT:-7000}
data=${DATA:-./cluster-data}
bin=${DELAYD_BIN:-$data/bin/delayd}
groups=${RAFT_GROUPS:-1} # not GROUPS: bash's own
step=100                 # --cluster-group-port-step

usage() {
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

port_of() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$nodes" ] || { echo "no node $1 (1..$nodes)" >&2; exit 2; }
  echo $((base + $1))
}

pid_of() { # the pid of a running node, or nothing
  local f=$data/$1/delayd.pid
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
  return 0
}

build() {
  [ -n "${DELAYD_BIN:-}" ] && return
  mkdir -p "$data/bin"
  echo "building $bin (go build; the first build takes a minute or two)"
  go build -o "$bin" .
}

leader() { # the number of the node that reports itself master, or nothing
  for n in $(seq "$nodes"); do
    local p
    p=$(port_of "$n")
    [ -n "$(pid_of "$p")" ] || continue
    if redis-cli -p "$p" INFO replication 2>/dev/null | tr -d '\r' | grep -qx 'role:master'; then
      echo "$n"
      return
    fi
  done
}

node_of() { # node_of N|leader: a node number
  if [ "$1" != leader ]; then
    echo "$1"
    return
  fi
  command -v redis-cli >/dev/null || { echo "finding the leader needs redis-cli" >&2; exit 2; }
  local n
  n=$(leader)
  [ -n "$n" ] || { echo "no node is the leader now (an election?); scripts/cluster.sh status shows each role" >&2; exit 1; }
  echo "$n"
}

start_node() { # start_node N [flags...]
  local n=$1 p
  shift
  p=$(port_of "$n")
  if [ -n "$(pid_of "$p")" ]; then
    echo "node $n (port $p) runs already, pid $(pid_of "$p")"
    return
  fi
  mkdir -p "$data/$p"
  local args=(--port "$p" --dir "$data/$p" --cluster-enabled yes --http-addr "127.0.0.1:$((p + 1000))")
  if [ "$groups" -gt 1 ]; then
    args+=(--cluster-group-port-step "$step")
  fi
  if [ "$n" -eq 1 ]; then
    args+=(--cluster-bootstrap) # forms the group on the first start; a no-op after
    [ "$groups" -gt 1 ] && args+=(--cluster-groups "$groups") # read once, at the bootstrap
  else
    args+=(--cluster-join "127.0.0.1:$((base + 1))") # asks node 1; a member already is let be
  fi
  nohup "$bin" "${args[@]}" "$@" >>"$data/$p/delayd.out" 2>&1 &
  echo $! >"$data/$p/delayd.pid"
  echo "node $n: port $p, pid $!"
}

await_node() { # await_node N: wait until node N answers, or exit saying why it did not start
  local n=$1 p pid st
  p=$(port_of "$n")
  pid=$(cat "$data/$p/delayd.pid")
  for _ in $(seq 150); do
    # A node this call started is its child, a zombie once it exits: kill -0
    # would still find it.
    if ! st=$(ps -o stat= -p "$pid") || [[ $st == Z* ]]; then
      rm -f "$data/$p/delayd.pid"
      echo "node $n (port $p) exited at start; the end of $data/$p/delayd.out:" >&2
      tail -n 3 "$data/$p/delayd.out" >&2
      exit 1
    fi
    if command -v redis-cli >/dev/null; then
      # Bounded: whatever holds the port may accept and never answer (the
      # node exited on "address already in use"; the next turn sees it).
      timeout 1 redis-cli -p "$p" PING >/dev/null 2>&1 && return
    else
      sleep 1 # no way to ask it; it did not exit at once
      return
    fi
    sleep 0.2
  done
  echo "node $n (port $p) does not answer yet; see $data/$p/delayd.out" >&2
}

signal_node() { # signal_node SIG N
  local p pid
  p=$(port_of "$2")
  pid=$(pid_of "$p")
  if [ -z "$pid" ]; then
    echo "node $2 (port $p) is not running"
    return
  fi
  kill "-$1" "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$data/$p/delayd.pid"
  echo "node $2 (port $p): $1 sent, pid $pid gone"
}

status() {
  for n in $(seq "$nodes"); do
    local p pid role=""
    p=$(port_of "$n")
    pid=$(pid_of "$p")
    if [ -z "$pid" ]; then
      echo "node $n  port $p  stopped"
      continue
    fi
    if [ "$groups" -gt 1 ]; then
      local roles="" g
      for g in $(seq 0 $((groups - 1))); do
        role=""
        # "-" in the node's groups file: it holds no replica of group g
        # (the group had its --cluster-replicas when the node joined).
        if [ "$(sed -n "$((g + 2))p" "$data/$p/cluster-groups" 2>/dev/null)" = - ]; then
          roles+="${roles:+ }-"
          continue
        fi
        command -v redis-cli >/dev/null &&
          role=$(redis-cli -p $((p + g * step)) INFO replication 2>/dev/null | tr -d '\r' | sed -n 's/^role://p')
        roles+="${roles:+ }${role:-?}"
      done
      echo "node $n  port $p  pid $pid  roles by group: $roles"
      continue
    fi
    if command -v redis-cli >/dev/null; then
      role=$(redis-cli -p "$p" INFO replication 2>/dev/null | tr -d '\r' | sed -n 's/^role://p')
    fi
    echo "node $n  port $p  pid $pid  role ${role:-?}"
  done
}

spread() { # group g's leader to node g%NODES+1 at once: node 1 bootstrapped them all, and would
  # hand them over by itself (--cluster-balance-leaders) 10-15 s later, to nodes of its choosing
  [ "$groups" -gt 1 ] || return 0
  local g n
  for g in $(seq 1 $((groups - 1))); do
    n=$((g % nodes + 1))
    [ "$n" -eq 1 ] && continue
    # A node that joined with another at once may hold no replica of g.
    [ "$(sed -n "$((g + 2))p" "$data/$((base + n))/cluster-groups" 2>/dev/null)" = - ] && continue
    for _ in $(seq 50); do
      [ "$(redis-cli -p $((base + n + g * step)) INFO replication 2>/dev/null | tr -d '\r' | sed -n 's/^role://p')" = master ] && break
      redis-cli -p $((base + n + g * step)) CLUSTER FAILOVER >/dev/null 2>&1 || true
      sleep 0.2
    done
  done
}

cmd=${1:-start}
[ $# -gt 0 ] && shift
case $cmd in
start)
  build
  for n in $(seq "$nodes"); do
    start_node "$n" "$@"
    [ "$n" -eq 1 ] && await_node 1 # the others join through it
  done
  for n in $(seq 2 "$nodes"); do await_node "$n"; done
  if command -v redis-cli >/dev/null; then
    # Group 0 on every node; each other group on at most 3 (--cluster-replicas).
    members=$((nodes + (groups - 1) * (nodes < 3 ? nodes : 3)))
    for _ in $(seq 100); do
      [ "$(redis-cli -p $((base + 1)) CLUSTER NODES 2>/dev/null | grep -c connected)" -ge "$members" ] && break
      sleep 0.2
    done
    spread
    redis-cli -p $((base + 1)) CLUSTER NODES
  fi
  echo "delayd cluster: $nodes nodes on ports $((base + 1))-$((base + nodes)); scripts/cluster.sh stop stops it"
  [ "$groups" -gt 1 ] && echo "$groups Raft groups: group g of node N on port $((base))+N+$step*g"
  seeds=""
  for n in $(seq "$nodes"); do seeds+="${seeds:+,}127.0.0.1:$((base + n))"; done
  echo "for the cluster examples: export DELAYD_CLUSTER=$seeds"
  ;;
start-node)
  [ $# -ge 1 ] || usage
  n=$1
  shift
  [ -x "$bin" ] || build
  start_node "$n" "$@"
  await_node "$n"
  ;;
stop-node) [ $# -eq 1 ] || usage; n=$(node_of "$1"); signal_node TERM "$n" ;;
kill-node) [ $# -eq 1 ] || usage; n=$(node_of "$1"); signal_node KILL "$n" ;;
stop) for n in $(seq "$nodes"); do signal_node TERM "$n"; done ;;
status) status ;;
*) usage ;;
esac
