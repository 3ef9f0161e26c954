#!/usr/bin/env bash
# import_redis.sh: issue 32's measure of the import from Redis-based queues.
# Fills a redis-server with N delayed jobs made by asynq and N made by BullMQ
# (their own clients, through bench/rivals's generators; some failed once and
# waiting to retry), starts delayd, and imports all of them while both
# producers keep adding; then checks that delayd holds every job of the fill
# once, with its id and due time, and each job added meanwhile either right
# or not yet; a second pass (a cut-over's) then brings the rest.
# Target: N=500000 (1M jobs) imported in under 30 s.
#
#   bench/import_redis.sh            # N=500000
#   N=5000 bench/import_redis.sh
#
# Needs go, node/npm, redis-server and redis-cli. The import is `delayd import
# --from-redis`, one process per library side by side; bench/importredis
# checks the result against the generators' manifests.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-500000}
RATE=${RATE:-1000}           # jobs a second each producer adds during the import
RPORT=${RPORT:-6391} DPORT=${DPORT:-6392}
work=$(mktemp -d)
pids=()
cleanup() {
  exec 7>&- 8>&- 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/delayd" .
go build -o "$work/importredis" ./bench/importredis
(cd bench/rivals && go build -o "$work/asynqgen" ./cmd/asynqgen)
if [ ! -d bench/rivals/bullmq/node_modules/bullmq ]; then
  # npm 11's ci trips over other platforms' optional packages (msgpackr-extract); as run.sh
  (cd bench/rivals/bullmq && { npm ci --no-audit --no-fund --loglevel=error 2>/dev/null ||
    npm install --no-audit --no-fund --no-save --loglevel=error; })
fi

redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)
until redis-cli -p "$RPORT" ping >/dev/null 2>&1; do sleep 0.05; done

echo "filling: $N asynq tasks and $N BullMQ jobs, 100 of each failed once"
t0=$(date +%s)
"$work/asynqgen" -addr "127.0.0.1:$RPORT" -n "$N" -out "$work/asynq.tsv" &
a=$!
(cd bench/rivals/bullmq && node gen.js --port "$RPORT" --n "$N" --schedulers 2 --out "$work/bullmq.tsv") &
b=$!
wait $a $b
"$work/asynqgen" -addr "127.0.0.1:$RPORT" -from "$N" -retries 100 -out "$work/asynq-retry.tsv"
(cd bench/rivals/bullmq && node gen.js --port "$RPORT" --from "$N" --retries 100 --out "$work/bullmq-retry.tsv")
echo "filled in $(( $(date +%s) - t0 )) s; redis holds $(redis-cli -p "$RPORT" dbsize) keys, $(redis-cli -p "$RPORT" info memory | sed -n 's/^used_memory_human:\(.*\)\r$/\1/p')"

"$work/delayd" --port "$DPORT" --bind 127.0.0.1 --http-addr "" --dir "$work/data" --log-level warn >"$work/delayd.log" 2>&1 &
pids+=($!)
until [ "$(redis-cli -p "$DPORT" ping 2>/dev/null)" = PONG ]; do sleep 0.05; done

# The producers keep adding until their stdin (a fifo) closes.
mkfifo "$work/stopa" "$work/stopb"
"$work/asynqgen" -addr "127.0.0.1:$RPORT" -from $((2 * N)) -keep -n 0 -rate "$RATE" -out "$work/asynq-during.tsv" <"$work/stopa" >"$work/keepa.out" &
pids+=($!)
(cd bench/rivals/bullmq && exec node gen.js --port "$RPORT" --from $((2 * N)) --keep --n 0 --rate "$RATE" --out "$work/bullmq-during.tsv") <"$work/stopb" >"$work/keepb.out" &
pids+=($!)
exec 7>"$work/stopa" 8>"$work/stopb"
until grep -q adding "$work/keepa.out" && grep -q adding "$work/keepb.out"; do sleep 0.05; done

import_all() {
  local t0 t1
  t0=$(date +%s.%N)
  local ps=()
  for f in asynq bullmq; do
    "$work/delayd" import --addr "127.0.0.1:$DPORT" --from-redis "redis://127.0.0.1:$RPORT" --format $f 2>&1 |
      grep -v 'jobs/s' | sed "s/^/$f: /" &
    ps+=($!)
  done
  wait "${ps[@]}"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN{printf "import of both took %.2f s\n", b-a}'
}

echo "importing while both producers add $RATE jobs a second each"
import_all
exec 7>&- 8>&-
wait "${pids[@]:2}"

echo "checking"
all="$work/asynq.tsv,$work/asynq-retry.tsv,$work/bullmq.tsv,$work/bullmq-retry.tsv"
some="$work/asynq-during.tsv,$work/bullmq-during.tsv"
"$work/importredis" -to "127.0.0.1:$DPORT" -all "$all" -some "$some"
echo "second pass (the producers stopped): every job, once"
import_all
"$work/importredis" -to "127.0.0.1:$DPORT" -all "$all,$some"
