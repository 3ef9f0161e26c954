"""A stock Redis list worker: BLPOP on a delayd queue, unchanged from a
worker of a Redis list. delayd moves each job to the queue's ready list when
its time comes; BLPOP removes it (at-most-once: a list pop needs no ACK,
whatever the job's ack timeout).

redis-py applies socket_timeout to blpop too: keep the pop's timeout below it
(this client sets none, as redis-py 4 does by default).

    DELAYD_ADDR   server (default 127.0.0.1:6380)
    QUEUE         queue (default jobs:email)
    MAX_JOBS      exit after this many jobs (default 0: never)
"""

import os
import signal

import redis

host, port = os.environ.get("DELAYD_ADDR", "127.0.0.1:6380").rsplit(":", 1)
queue = os.environ.get("QUEUE", "jobs:email")
max_jobs = int(os.environ.get("MAX_JOBS", "0"))

r = redis.Redis(host=host, port=int(port), decode_responses=True)

stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)

done = 0
while not stopping and (max_jobs == 0 or done < max_jobs):
    item = r.blpop(queue, timeout=2)
    if item is None:
        continue
    print(f"got {item[1]}", flush=True)
    done += 1
print(f"list worker stopped after {done} jobs", flush=True)
