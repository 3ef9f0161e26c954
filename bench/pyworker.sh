#!/usr/bin/env bash
# pyworker.sh: the Python library's worker (clients/python) against BullMQ's
# and asynq's in the rivals race's burst case, in one run: JOBS jobs all due
# at once, the server pinned to SERVER_CPU, the worker to CLIENT_CPU,
# appendfsync everysec. The rivals run first through bench/rivals/run.sh
# (SYSTEMS, default asynq,bullmq); then, for each MODES entry, a fresh
# delayd, a fill of DELAY.ADDAT jobs (ACKTIMEOUT 30000) due after the fill,
# and one worker process with a handler that does nothing. Its rate counts,
# as the race's does, from the due time to the last completion: here the
# moment DELAY.STATS shows every job acked.
#
#   bench/pyworker.sh                              # 100k jobs; modes sync:8, aio:8, sync:1
#   JOBS=20000 MODES=aio:8 SYSTEMS= bench/pyworker.sh   # the Python worker alone
#   JOBS=20000 RIVALS_ARGS="-burst-lead 60s" bench/pyworker.sh   # on a loaded machine: fills that end before the due time
#
# Needs go, /usr/bin/python3 with redis-py, taskset, and for the rivals what
# bench/rivals/run.sh needs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

JOBS=${JOBS:-100000}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
SYSTEMS=${SYSTEMS-asynq,bullmq}
MODES=${MODES:-sync:8 aio:8 sync:1}
PY=${PY:-/usr/bin/python3}

tmp=$(mktemp -d)
srv= wpid=
cleanup() {
  [ -n "$wpid" ] && kill "$wpid" 2>/dev/null || true
  [ -n "$srv" ] && kill "$srv" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$SYSTEMS" ]; then
  echo "== rivals: $SYSTEMS, burst, $JOBS jobs"
  # shellcheck disable=SC2086 # RIVALS_ARGS is a list of flags
  SYSTEMS=$SYSTEMS CASES=burst JOBS=$JOBS "$here/rivals/run.sh" ${RIVALS_ARGS:-} | tee "$tmp/rivals.txt" | grep -E '^[0-9:]+ +(asynq|bullmq)' || true
fi

(cd "$root" && go build -o "$tmp/delayd" .)

cat > "$tmp/bench.py" <<'EOF'
import asyncio, os, sys, threading, time
import redis
import delayd, delayd.aio

addr, role, mode = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = addr.rsplit(":", 1)
jobs, due_ms = int(os.environ["JOBS"]), int(os.environ["DUE_MS"])
q = "bench"

if role == "fill":
    r = redis.Redis(host=host, port=int(port))
    p = r.pipeline(transaction=False)
    for i in range(jobs):
        p.execute_command("DELAY.ADDAT", q, due_ms, b"x" * 32, "ID", f"j{i}", "ACKTIMEOUT", 30000)
        if i % 1000 == 999:
            p.execute()
    p.execute()
    left = due_ms / 1000 - time.time()
    print(f"filled {jobs} jobs, {left:.1f} s before their due time", flush=True)
    if left < 0:
        sys.exit("the fill overran the due time: raise LEAD_S")
    sys.exit(0)

kind, conc = mode.split(":")
conc = int(conc)
done = 0


def acked():
    r = redis.Redis(host=host, port=int(port), decode_responses=True)
    while True:
        st = dict(zip(*[iter(r.execute_command("DELAY.STATS", q))] * 2))
        if int(st.get("ready", 0)) == 0 and int(st.get("reserved", 0)) == 0 and int(st.get("delayed", 0)) == 0:
            return time.time()
        time.sleep(0.001)


if kind == "sync":
    w = delayd.Worker(redis.Redis(host=host, port=int(port), socket_timeout=5), concurrency=conc)
    finished = threading.Event()

    def ondone(job, s):
        global done
        done += 1
        if done == jobs:
            finished.set()

    w.on_job_done = ondone
    w.handle(q, lambda job: None)
    w.start()
    finished.wait()
    end = acked()
    w.stop()
else:
    async def main():
        w = delayd.aio.Worker(delayd.aio.aredis.Redis(host=host, port=int(port), socket_timeout=5), concurrency=conc)

        def ondone(job, s):
            global done, end
            done += 1
            if done == jobs:
                # The last acks go with the next fetch: time them here, not
                # after run() returns (a stop waits out a blocking fetch).
                t = threading.Thread(target=lambda: ends.append(acked()))
                t.start()
                w.stop()

        w.on_job_done = ondone

        async def nothing(job):
            pass

        w.handle(q, nothing)
        await w.run(install_signals=False)

    ends = []
    asyncio.run(main())
    while not ends:
        time.sleep(0.01)
    end = ends[0]
took = end - due_ms / 1000
print(f"python {mode:7s} burst  completed {done}/{jobs} in {took:.2f} s: {jobs / took:.0f} jobs/s", flush=True)
EOF

for mode in $MODES; do
  port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -rf "$tmp/data"; mkdir "$tmp/data"
  taskset -c "$SERVER_CPU" "$tmp/delayd" --bind 127.0.0.1 --port "$port" --dir "$tmp/data" --http-addr "" \
    --appendonly yes --appendfsync everysec --log-level warn >"$tmp/server.log" 2>&1 &
  srv=$!
  for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  export JOBS PYTHONPATH="$root/clients/python"
  DUE_MS=$(( $(date +%s%3N) + ${LEAD_S:-$(( 2 + JOBS / 5000 ))} * 1000 ))
  export DUE_MS
  taskset -c "$CLIENT_CPU" $PY "$tmp/bench.py" "127.0.0.1:$port" work "$mode" >"$tmp/worker.txt" 2>&1 &
  wpid=$!
  taskset -c "$CLIENT_CPU" $PY "$tmp/bench.py" "127.0.0.1:$port" fill "$mode"
  wait "$wpid" || { cat "$tmp/worker.txt"; exit 1; }
  wpid=
  cat "$tmp/worker.txt"
  kill "$srv"; wait "$srv" 2>/dev/null || true; srv=
done

if [ -s "$tmp/rivals.txt" ]; then
  echo "== the rivals' burst rows (completed/s in the second column)"
  grep -E '^\| (asynq|BullMQ)' "$tmp/rivals.txt" | head -4
fi
