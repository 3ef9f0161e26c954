"""delayd: producer and worker for delayd, the Redis-protocol delay queue,
on redis-py.

    import redis, delayd

    client = delayd.Client(redis.Redis(port=6380))
    client.add("emails", '{"to": "a@example.com"}', delay=60, id="welcome-42", ack_timeout=30)

    worker = delayd.Worker(redis.Redis(port=6380, decode_responses=True), concurrency=8)

    @worker.handler("emails")
    def send(job):
        ...

    worker.run()

delayd.aio has the same Client and Worker on redis.asyncio."""

from ._core import (BackoffFunc, Discard, Duration, SkipRetry, When, error_text, exponential_backoff,
                    fix_cluster_client)
from .client import Client
from .cluster import connect_cluster
from .worker import Job, Worker

__version__ = "0.3.0"

__all__ = ["BackoffFunc", "Client", "Discard", "Duration", "Job", "SkipRetry", "When", "Worker", "__version__",
           "connect_cluster", "error_text", "exponential_backoff", "fix_cluster_client"]
