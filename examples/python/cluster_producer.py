"""Adds delayed jobs to a delayd cluster through redis-py's RedisCluster,
each with an ID, and retries an add that fails until the cluster takes it:
while the leader is lost and a new one is elected, adds fail for a second or
two (CLUSTERDOWN, TRYAGAIN, a refused connection), and the same DELAY.ADD
sent again is safe (delayd replies None when that ID is already there).

    DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
    QUEUE           queue (default {jobs}:orders)
    COUNT           how many jobs (default 3)
    DELAY_MS        delay of each job in ms (default 1000)
    ACK_TIMEOUT     ms a worker has to ACK a job before it is delivered again (default 30000)
    ID_PREFIX       first part of each job's ID (default py)
    RETRY_FOR       ms to keep retrying one add (default 30000)
"""

import os
import sys
import time


from cluster_client import FAILOVER_ERRORS, connect

queue = os.environ.get("QUEUE", "{jobs}:orders")
count = int(os.environ.get("COUNT", "3"))
delay = int(os.environ.get("DELAY_MS", "1000"))
ack_timeout = int(os.environ.get("ACK_TIMEOUT", "30000"))
prefix = os.environ.get("ID_PREFIX", "py")
retry_for = int(os.environ.get("RETRY_FOR", "30000")) / 1000

rc = connect(retry_for)
for i in range(1, count + 1):
    job_id = f"{prefix}-order-{i}"
    deadline = time.monotonic() + retry_for
    while True:
        try:
            reply = rc.execute_command("DELAY.ADD", queue, delay, f'{{"order":{i}}}', "ID", job_id, "ACKTIMEOUT", ack_timeout)
            print(f"added {job_id}" if reply is not None else f"{job_id} was already added", flush=True)
            break
        except FAILOVER_ERRORS as e:
            # A failover is under way; the same ID makes the retry safe.
            if time.monotonic() > deadline:
                sys.exit(f"DELAY.ADD {job_id}: {e}")
            print(f"DELAY.ADD {job_id}: {type(e).__name__}: {e}; retrying with the same ID", file=sys.stderr, flush=True)
            time.sleep(0.2)
