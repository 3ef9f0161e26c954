"""A worker process for the tests that kill or stop one: it works QUEUE with
CONCURRENCY handlers, each job taking SLEEP seconds, and prints "started
<id>" when a handler begins, "done <id> <deliveries>" when it returns (the
job's deliveries read with DELAY.GET at its start, when DELIVERIES=1), and
"exit" when run() returned. DELAYD_TEST_ADDR or DELAYD_TEST_CLUSTER name the
server; AIO=1 runs delayd.aio.Worker instead of delayd.Worker."""

import asyncio
import logging
import os
import sys
import time

import redis

import delayd

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)  # it logs every retried error with a traceback

q = os.environ["QUEUE"]
sleep = float(os.environ.get("SLEEP", "0"))
report = os.environ.get("DELIVERIES") == "1"
if os.environ.get("DELAYD_TEST_CLUSTER"):
    r = delayd.connect_cluster(os.environ["DELAYD_TEST_CLUSTER"], decode_responses=True, socket_timeout=3)
else:
    host, port = os.environ["DELAYD_TEST_ADDR"].rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port), decode_responses=True, socket_timeout=3)
c = delayd.Client(r)
concurrency = int(os.environ.get("CONCURRENCY", "1"))
shutdown_timeout = float(os.environ.get("SHUTDOWN_TIMEOUT", "30"))


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def deliveries_of(job):
    if report:
        for _ in range(100):  # a failover may be under way
            try:
                return (c.get(job.queue, job.id) or {}).get("deliveries", -1)
            except Exception:
                time.sleep(0.1)
    return -1


if os.environ.get("AIO") == "1":
    import redis.asyncio

    import delayd.aio

    async def main():
        ar = redis.asyncio.Redis(host=host, port=int(port), decode_responses=True, socket_timeout=3)
        aw = delayd.aio.Worker(ar, concurrency=concurrency, shutdown_timeout=shutdown_timeout)

        @aw.handler(q)
        async def handle(job):
            out(f"started {job.id}")
            await asyncio.sleep(sleep)
            out(f"done {job.id} -1")

        await aw.run()

    asyncio.run(main())
else:
    w = delayd.Worker(r, concurrency=concurrency, shutdown_timeout=shutdown_timeout)

    @w.handler(q)
    def handle(job):
        deliveries = deliveries_of(job)
        out(f"started {job.id}")
        time.sleep(sleep)
        out(f"done {job.id} {deliveries}")

    w.run()
out("exit")
