"""A delayd cluster worker on the delayd library (clients/python) through
redis-py's RedisCluster, going on through a failover: a fetch blocked on a
leader that steps down is answered UNBLOCKED, and while a new leader is
elected fetches and acks fail (CLUSTERDOWN, TRYAGAIN, a refused
connection). The library retries each out of the handler's sight (100 ms
doubling to 2 s), re-reads the slot map, and keeps the acks that failed for
its next fetch; a job whose ack never arrives is delivered again after its
ack timeout. As worker.py, on SIGTERM or SIGINT it finishes the job in hand,
acks it and exits. raw_worker.py is a worker on redis-py alone.

    DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
    QUEUE           queue to work on (default {jobs}:orders)
    WORK_MS         how long one job takes (default 100)
    MAX_JOBS        exit after this many jobs (default 0: never)
"""

import logging
import os
import signal
import sys
import time

try:
    import delayd
except ImportError:  # run from a checkout without pip install
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    import delayd

from cluster_client import connect

queue = os.environ.get("QUEUE", "{jobs}:orders")
work = int(os.environ.get("WORK_MS", "100")) / 1000
max_jobs = int(os.environ.get("MAX_JOBS", "0"))

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # the library's failover warnings
rc = connect()
done = 0


def finished(job, seconds):
    # The ACK goes with the worker's next fetch, retried through a failover.
    global done
    done += 1
    print(f"acked {job.id}", flush=True)
    if done == max_jobs:
        worker.stop(wait=False)


# A stop while no node answers gives up on the job in hand after 10 s (it
# is delivered again after its ack timeout) rather than wait for the cluster.
worker = delayd.Worker(rc, on_job_done=finished, shutdown_timeout=10)


@worker.handler(queue)
def process(job):
    print(f"processing {job.id} {job.payload}", flush=True)
    time.sleep(work)  # the job's work


def stop(signum, frame):
    print("stopping: finishing the job in hand", flush=True)
    worker.stop(wait=False)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
worker.run(install_signals=False)
print(f"worker stopped after {done} jobs", flush=True)
