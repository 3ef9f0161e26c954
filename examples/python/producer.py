"""Adds delayed jobs to a delayd queue with the delayd library, each with an
ID of its own choosing, so that a retry is safe: when a reply is lost (a
timeout, a dropped connection) the producer sends the same add again, and
delayd answers None if the job is already there instead of adding it twice.
unique keeps the ID taken for a day after the job is done, so even a retry
that comes after a worker finished the job is a no-op. It also registers a
recurring job, a daily digest at 09:00 Berlin time, which the server fires
exactly once per day however many producers register it (a schedule is an
upsert by name).

    pip install ./clients/python      # or PYTHONPATH=clients/python

    DELAYD_ADDR   server (default 127.0.0.1:6380)
    QUEUE         queue (default jobs:email)
    COUNT         how many jobs (default 3)
    DELAY_MS      delay of each job in ms (default 1000)
    ACK_TIMEOUT   ms a worker has to ACK a job before it is delivered again (default 30000)
    UNIQUE_MS     ms an ID stays taken after its job is done (default 86400000)
    DIGEST_QUEUE  queue of the daily digest (default jobs:digest)
    ID_PREFIX     first part of each job's ID (default py): producers in other
                  languages use their own, so running two adds both sets
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
count = int(os.environ.get("COUNT", "3"))
delay = int(os.environ.get("DELAY_MS", "1000")) / 1000
ack_timeout = int(os.environ.get("ACK_TIMEOUT", "30000")) / 1000
unique = int(os.environ.get("UNIQUE_MS", "86400000")) / 1000
prefix = os.environ.get("ID_PREFIX", "py")

client = delayd.Client(redis.Redis(host=host, port=int(port), decode_responses=True))


def add(job_id, payload):
    """add with retries; True if added, False if it was already there."""
    for attempt in range(1, 4):
        try:
            return client.add(queue, payload, delay=delay, id=job_id, ack_timeout=ack_timeout,
                              unique=unique) is not None
        except redis.ConnectionError as e:
            if attempt == 3:
                raise
            print(f"add {job_id}: {e}; retrying with the same ID", flush=True)
            time.sleep(0.2 * attempt)


for i in range(1, count + 1):
    # The ID comes from the producer's own data (an order number, a message
    # id), so the same job always has the same ID.
    job_id = f"{prefix}-welcome-{i}"
    if add(job_id, f'{{"user":{i},"mail":"welcome"}}'):
        print(f"added {job_id}", flush=True)
    else:
        print(f"{job_id} was already added", flush=True)

# A retry of the first job, as after a lost reply: nothing changes.
if not add(f"{prefix}-welcome-1", "again"):
    print(f"retry of {prefix}-welcome-1: already added, nothing changed", flush=True)

# The recurring job: each firing is a job with the ID
# daily-digest:<fire time in unix ms>, so it is never doubled.
client.schedule(os.environ.get("DIGEST_QUEUE", "jobs:digest"), "daily-digest", '{"mail":"digest"}',
                cron="0 9 * * *", tz="Europe/Berlin", ack_timeout=ack_timeout, misfire="once")
print("scheduled daily-digest", flush=True)
