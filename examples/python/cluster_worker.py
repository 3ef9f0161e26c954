"""A delayd cluster worker through redis-py's RedisCluster: DELAY.POP a job,
do it, DELAY.ACK it, and go on through a failover. A pop blocked on a leader
that steps down is answered UNBLOCKED, and while a new leader is elected pops
and acks fail (CLUSTERDOWN, TRYAGAIN, a refused connection): the worker
treats each as an empty pop and pops again, and sends a failed ACK again
(acking twice is harmless; a job whose ACK never arrives is delivered again
after its ack timeout). As raw_worker.py, it pops with a short timeout under a
longer socket timeout, and on SIGTERM or SIGINT finishes the job in hand.

    DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
    QUEUE           queue to work on (default {jobs}:orders)
    WORK_MS         how long one job takes (default 100)
    MAX_JOBS        exit after this many jobs (default 0: never)
"""

import os
import signal
import sys
import time


from cluster_client import FAILOVER_ERRORS, connect

POP_TIMEOUT = 2  # seconds

queue = os.environ.get("QUEUE", "{jobs}:orders")
work = int(os.environ.get("WORK_MS", "100")) / 1000
max_jobs = int(os.environ.get("MAX_JOBS", "0"))

rc = connect(socket_timeout=POP_TIMEOUT + 3)  # longer than the pop
stopping = False


def stop(signum, frame):
    global stopping
    print("stopping: finishing the job in hand", flush=True)
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)


def ack(job_id):
    deadline = time.monotonic() + 30
    while True:
        try:
            rc.execute_command("DELAY.ACK", queue, job_id)
            print(f"acked {job_id}", flush=True)
            return
        except FAILOVER_ERRORS as e:
            if time.monotonic() > deadline:
                print(f"DELAY.ACK {job_id}: {e} (it will be delivered again after its ack timeout)", file=sys.stderr, flush=True)
                return
            time.sleep(0.2)


done = 0
while not stopping and (max_jobs == 0 or done < max_jobs):
    try:
        job = rc.execute_command("DELAY.POP", queue, POP_TIMEOUT)
    except FAILOVER_ERRORS as e:
        # UNBLOCKED, CLUSTERDOWN, TRYAGAIN, a refused connection: a failover.
        print(f"DELAY.POP: {type(e).__name__}: {e}; popping again", file=sys.stderr, flush=True)
        time.sleep(0.2)
        continue
    if job is None:
        continue  # nothing within POP_TIMEOUT
    _, job_id, payload = job
    print(f"processing {job_id} {payload}", flush=True)
    time.sleep(work)  # the job's work
    ack(job_id)
    done += 1
print(f"worker stopped after {done} jobs", flush=True)
