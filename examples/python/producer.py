"""Adds delayed jobs to a delayd queue with DELAY.ADD, each with an ID of its
own choosing, so that a retry is safe: when a reply is lost (a timeout, a
dropped connection) the producer sends the same DELAY.ADD again, and delayd
replies None if the job is already there instead of adding it twice. UNIQUE
keeps the ID taken for a day after the job is done, so even a retry that comes
after a worker finished the job is a no-op. It also registers a recurring job,
a daily digest at 09:00 Berlin time, which the server fires exactly once per
day however many producers register it (DELAY.SCHEDULE is an upsert by name).

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
import time

import redis

host, port = os.environ.get("DELAYD_ADDR", "127.0.0.1:6380").rsplit(":", 1)
queue = os.environ.get("QUEUE", "jobs:email")
count = int(os.environ.get("COUNT", "3"))
delay = int(os.environ.get("DELAY_MS", "1000"))
ack_timeout = int(os.environ.get("ACK_TIMEOUT", "30000"))
unique = int(os.environ.get("UNIQUE_MS", "86400000"))
prefix = os.environ.get("ID_PREFIX", "py")

r = redis.Redis(host=host, port=int(port), decode_responses=True)


def add(job_id, payload):
    """DELAY.ADD with retries; True if added, False if it was already there."""
    for attempt in range(1, 4):
        try:
            reply = r.execute_command("DELAY.ADD", queue, delay, payload,
                                      "ID", job_id, "ACKTIMEOUT", ack_timeout, "UNIQUE", unique)
            return reply is not None
        except redis.ConnectionError as e:
            if attempt == 3:
                raise
            print(f"DELAY.ADD {job_id}: {e}; retrying with the same ID", flush=True)
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
r.execute_command("DELAY.SCHEDULE", os.environ.get("DIGEST_QUEUE", "jobs:digest"), "daily-digest",
                  "CRON", "0 9 * * *", "TZ", "Europe/Berlin", '{"mail":"digest"}',
                  "ACKTIMEOUT", ack_timeout, "MISFIRE", "once")
print("scheduled daily-digest", flush=True)
