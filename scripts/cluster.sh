#!/usr/bin/env bash
# A delayd cluster on one machine, in one command:
#
#   scripts/cluster.sh            # 3 nodes on ports 7001-7003 (bus 17001-17003), data in ./cluster-data
#   NODES=5 PORT=7101 scripts/cluster.sh
#
# Then: redis-cli -c -p 7001 DELAY.ADD orders 1000 hello; redis-cli -p 7001 CLUSTER NODES.
# Ctrl-C stops every node (SIGTERM: each answers its clients and exits cleanly).
# Run it again to restart the same cluster from its data; delete the data dir
# for a new one. Extra arguments go to every node (e.g. --cluster-ack leader).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-3}
port=${PORT:-7001}
data=${DATA:-./cluster-data}
bin=$(mktemp -d)/delayd
go build -o "$bin" .
pids=()
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait; }
trap stop INT TERM EXIT
for i in $(seq 0 $((nodes - 1))); do
  p=$((port + i))
  mkdir -p "$data/$p"
  args=(--port "$p" --dir "$data/$p" --cluster-enabled yes --http-addr "127.0.0.1:$((p + 1000))")
  if [ "$i" -eq 0 ]; then
    args+=(--cluster-bootstrap)   # forms the group on the first start; a no-op after
  else
    args+=(--cluster-join "127.0.0.1:$port")
  fi
  "$bin" "${args[@]}" "$@" >"$data/$p/delayd.out" 2>&1 &
  pids+=($!)
  [ "$i" -eq 0 ] && sleep 1
done
echo "delayd cluster: $nodes nodes on ports $port-$((port + nodes - 1)); logs in $data/<port>/delayd.out; Ctrl-C stops it"
for _ in $(seq 50); do
  if command -v redis-cli >/dev/null && [ "$(redis-cli -p "$port" CLUSTER NODES 2>/dev/null | wc -l)" -ge "$nodes" ]; then
    redis-cli -p "$port" CLUSTER NODES
    break
  fi
  sleep 0.2
done
wait
