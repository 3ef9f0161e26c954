#!/usr/bin/env bash
# run.sh: delayd against the delayed-job setups users would pick instead, in
# one command. Builds delayd from the repo root and the harness (its own Go
# module, so the project's go.mod stays clean), installs BullMQ from
# bullmq/package-lock.json, then runs every system and case with the
# servers pinned to SERVER_CPU and every client to CLIENT_CPU.
#
#   bench/rivals/run.sh                 # the full race: 100k jobs, spread over 10 s, 1k/s for 20 s
#   QUICK=1 bench/rivals/run.sh         # ~2k jobs, short spans: a smoke test of about a minute
#   JOBS=20000 SYSTEMS=delayd-ack,redis-zset CASES=spread bench/rivals/run.sh
#   OUT=docs/rivals NOTE="taken on a quiet machine" bench/rivals/run.sh   # writes results.md, results.json, PNGs
#
# Needs go, redis-server, node/npm and taskset (util-linux).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
if [ "${QUICK:-}" = 1 ]; then
  JOBS=${JOBS:-2000}; SPAN=${SPAN:-2s}; STEADY=${STEADY:-2s}; GRACE=${GRACE:-8s}
fi
JOBS=${JOBS:-100000}
SPAN=${SPAN:-10s}
RATE=${RATE:-1000}
STEADY=${STEADY:-20s}
GRACE=${GRACE:-15s}
SYSTEMS=${SYSTEMS:-delayd-ack,delayd-pipe,delayd-mpop,delayd-blpop,redis-zset,asynq,asynq-10ms,bullmq}
CASES=${CASES:-spread,steady,burst}
OUT=${OUT:-}
NOTE=${NOTE:-}

bin=$(mktemp -d)
pid=
cleanup() {
  # The harness's servers die with it (Pdeathsig); stop the harness itself.
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$bin"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

(cd "$root" && go build -o "$bin/delayd" .)
(cd "$here" && go build -o "$bin/rivals" .)
if [[ ",$SYSTEMS," == *,bullmq,* ]] && [ ! -d "$here/bullmq/node_modules/bullmq" ]; then
  (cd "$here/bullmq" && npm ci --no-audit --no-fund --loglevel=error)
fi
if [[ ",$SYSTEMS," == *,delayd-node,* ]] && [ ! -d "$root/clients/node/node_modules/ioredis" ]; then
  (cd "$root/clients/node" && npm ci --no-audit --no-fund --loglevel=error)
fi
[ -n "$OUT" ] && case "$OUT" in /*) ;; *) OUT="$root/$OUT" ;; esac

cd "$here"
taskset -c "$CLIENT_CPU" "$bin/rivals" -delayd "$bin/delayd" -bullmq "$here/bullmq" \
  -server-cpu "$SERVER_CPU" -jobs "$JOBS" -span "$SPAN" -rate "$RATE" -steady "$STEADY" -grace "$GRACE" \
  -systems "$SYSTEMS" -cases "$CASES" -out "$OUT" -note "$NOTE" "$@" &
pid=$!
wait "$pid"
