"""A delayd worker on the delayd library (clients/python): a handler per
queue; the library fetches as many jobs as it has free slots, sends each
ACK with its next fetch, TOUCHes jobs that run long, NACKs a failed job
with a backoff and its error as the reason, and on SIGTERM or SIGINT
finishes the jobs in hand, acks them and returns. raw_worker.py is the same
loop on redis-py alone.

    pip install ./clients/python      # or PYTHONPATH=clients/python

    DELAYD_ADDR   server (default 127.0.0.1:6380)
    QUEUE         queue to work on (default jobs:email)
    CONCURRENCY   most jobs of the queue in flight at once, across every worker (default 10)
    THREADS       jobs this worker runs at once (default 1)
    WORK_MS       how long one job takes, to see a graceful stop (default 100)
    MAX_JOBS      exit after this many jobs (default 0: never)
"""

import os
import sys
import time

import redis

try:
    import delayd
except ImportError:  # run from a checkout without pip install
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    import delayd

host, port = os.environ.get("DELAYD_ADDR", "127.0.0.1:6380").rsplit(":", 1)
queue = os.environ.get("QUEUE", "jobs:email")
work = int(os.environ.get("WORK_MS", "100")) / 1000
max_jobs = int(os.environ.get("MAX_JOBS", "0"))

r = redis.Redis(host=host, port=int(port), decode_responses=True, socket_timeout=5)

# Flow control is the server's: DELAY.LIMIT caps the jobs of the queue
# reserved at once over the whole fleet. Every worker sets the same value.
concurrency = int(os.environ.get("CONCURRENCY", "10"))
delayd.Client(r).limit(queue, concurrency=concurrency)
print(f"limit: at most {concurrency} jobs of {queue} in flight", flush=True)

done = 0


def finished(job, seconds):
    # The ACK goes with the worker's next fetch, or on its own at a stop.
    global done
    done += 1
    print(f"acked {job.id}", flush=True)
    if done == max_jobs:
        worker.stop(wait=False)


worker = delayd.Worker(r, concurrency=int(os.environ.get("THREADS", "1")), on_job_done=finished)


@worker.handler(queue)
def process(job):
    print(f"processing {job.id} {job.payload}", flush=True)
    time.sleep(work)  # the job's work; an exception here NACKs the job for a retry


worker.run()  # until SIGTERM or SIGINT (or MAX_JOBS), then a graceful stop
print(f"worker stopped after {done} jobs", flush=True)
