#!/usr/bin/env bash
# nodeworker.sh: the Node library's Worker (clients/node, its defaults, one
# Worker of concurrency 8) against BullMQ's Worker (concurrency 8) and asynq
# (Concurrency 8) in one run of the rivals race: 100k jobs all due at once,
# servers pinned to CPU 0 with appendfsync everysec, clients to CPU 1.
# Issue 35 asks for at least 2x both completion rates.
#
#   bench/nodeworker.sh                     # burst, 100k jobs
#   JOBS=20000 bench/nodeworker.sh          # shorter
#   CASES=burst,spread bench/nodeworker.sh  # lateness too
set -euo pipefail
export SYSTEMS=${SYSTEMS:-delayd-node,bullmq,asynq}
export CASES=${CASES:-burst}
export JOBS=${JOBS:-100000}
exec "$(dirname "$0")/rivals/run.sh" "$@"
