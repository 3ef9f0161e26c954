"""A worker process for the tests that kill or stop one: it works QUEUE with
CONCURRENCY handlers, each job taking SLEEP seconds, and prints "started
<id>" when a handler begins, "done <id> <deliveries>" when it returns (with
DELIVERIES=1, the delivery the handler ran, read with DELAY.GET at its
start; -1 when that cannot be told: see deliveries_of), and "exit" when
run() returned. DELAYD_TEST_ADDR or DELAYD_TEST_CLUSTER name the server;
AIO=1 runs delayd.aio.Worker instead of delayd.Worker."""

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
ack_timeout_ms = int(os.environ.get("ACK_TIMEOUT_MS", "0"))  # the jobs' ack timeout, for deliveries_of
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


def deliveries_of(job, started_ms):
    """The delivery this handler runs: the job's deliveries while this
    delivery's reservation holds, else -1 (unknown).

    A failover may be under way: the read is retried for 10 s, and it may
    come after this reservation expired (the read failing meanwhile), when
    the job is ready again, reserved by its next delivery, or done. This
    reservation's ack deadline is at most started_ms + ACK_TIMEOUT_MS (the
    pop came before the handler started); a later delivery's is past that
    (it was popped after this one expired): a read showing one is not this
    delivery's."""
    if not report:
        return -1
    give_up = time.monotonic() + 10
    while True:
        try:
            f = c.get(job.queue, job.id) or {}
            break
        except Exception:
            if time.monotonic() > give_up:
                return -1
            time.sleep(0.1)
    if f.get("state") != "reserved":
        return -1
    if ack_timeout_ms and int(f.get("ack_deadline", 0)) > started_ms + ack_timeout_ms:
        return -1
    return int(f.get("deliveries", -1))


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
        deliveries = deliveries_of(job, int(time.time() * 1000) + 1)
        out(f"started {job.id}")
        time.sleep(sleep)
        out(f"done {job.id} {deliveries}")

    w.run()
out("exit")
