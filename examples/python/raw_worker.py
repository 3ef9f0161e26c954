"""A delayd worker on redis-py alone, for those who want no other
dependency: DELAY.POP a job, do it, DELAY.ACK it (at-least-once for jobs
added with ACKTIMEOUT). worker.py does the same with the delayd library,
which adds batches, acks sent with the next fetch, heartbeats, retries with
backoff and failover handling.

The read timeout rule: redis-py gives up on a reply after socket_timeout
(none by default in redis-py 4; newer versions and many apps set one, and
recent versions also retry a timed-out command). It applies to every
command, a blocking one included: a DELAY.POP 5 with socket_timeout=5 is
cut, retried or raised, and a job handed over at that moment waits for its
ack timeout before it is delivered again (or is lost, without one). So this worker pops with a short
timeout (POP_TIMEOUT) in a loop and sets socket_timeout longer than it. The
short pop is also how a stop request is noticed.

Graceful stop: on SIGTERM or SIGINT the job in hand is finished and acked,
then the worker exits 0 (after at most POP_TIMEOUT when it is waiting).

    DELAYD_ADDR   server (default 127.0.0.1:6380)
    QUEUE         queue to work on (default jobs:email)
    CONCURRENCY   most jobs of the queue in flight at once, across every worker (default 10)
    WORK_MS       how long one job takes, to see a graceful stop (default 100)
    MAX_JOBS      exit after this many jobs (default 0: never)
"""

import os
import signal
import time

import redis

POP_TIMEOUT = 2  # seconds

host, port = os.environ.get("DELAYD_ADDR", "127.0.0.1:6380").rsplit(":", 1)
queue = os.environ.get("QUEUE", "jobs:email")
work = int(os.environ.get("WORK_MS", "100")) / 1000
max_jobs = int(os.environ.get("MAX_JOBS", "0"))

r = redis.Redis(host=host, port=int(port), decode_responses=True,
                socket_timeout=POP_TIMEOUT + 3)  # longer than the pop, see above

stopping = False


def stop(signum, frame):
    global stopping
    print("stopping: finishing the job in hand", flush=True)
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)

# Flow control is the server's: DELAY.LIMIT sets how many jobs of the queue
# may be reserved at once over the whole fleet; a worker's pop waits while the
# queue is at its limit. Every worker sets the same value at start.
concurrency = int(os.environ.get("CONCURRENCY", "10"))
r.execute_command("DELAY.LIMIT", queue, "CONCURRENCY", concurrency)
print(f"limit: at most {concurrency} jobs of {queue} in flight", flush=True)

done = 0
while not stopping and (max_jobs == 0 or done < max_jobs):
    try:
        job = r.execute_command("DELAY.POP", queue, POP_TIMEOUT)
    except redis.ConnectionError as e:
        print(f"DELAY.POP: {e}; retrying in 1 s", flush=True)
        time.sleep(1)
        continue
    if job is None:
        continue  # nothing within POP_TIMEOUT: pop again
    _, job_id, payload = job
    print(f"processing {job_id} {payload}", flush=True)
    time.sleep(work)  # the job's work
    # ACK replies 0 when the job was not reserved (added without ACKTIMEOUT:
    # the pop removed it already).
    r.execute_command("DELAY.ACK", queue, job_id)
    print(f"acked {job_id}", flush=True)
    done += 1
print(f"worker stopped after {done} jobs", flush=True)
