"""The producer: every DELAY.ADD option as a keyword argument, and the
commands that change or read jobs and schedules, on a redis.Redis or a
redis.cluster.RedisCluster."""

from typing import Any, Dict, List, Optional, Tuple, Union

import redis

from ._core import (Duration, Payload, When, add_args, fields, fix_cluster_client, limit_args, reschedule_args,
                    schedule_args, text)

try:
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover - redis-py without cluster support
    RedisCluster = None  # type: ignore[assignment,misc]

RedisLike = Union["redis.Redis", "RedisCluster"]


class Client:
    """A delayd producer on a redis-py client (redis.Redis or RedisCluster).

    Durations are seconds (int or float) or datetime.timedelta; absolute
    times are datetimes or unix seconds. Replies keep the client's
    decode_responses for payloads; ids and fields are str."""

    def __init__(self, redis_client: RedisLike) -> None:
        if RedisCluster is not None and isinstance(redis_client, RedisCluster):
            fix_cluster_client()
        self.redis = redis_client

    def add(self, queue: str, payload: Payload, *, delay: Optional[Duration] = None, at: Optional[When] = None,
            id: Optional[str] = None, replace: bool = False, unique: Optional[Duration] = None,
            debounce: Optional[Duration] = None, priority: Optional[int] = None, group: Optional[str] = None,
            retry: Optional[int] = None, dead_letter: Optional[str] = None,
            ack_timeout: Optional[Duration] = None) -> Optional[str]:
        """Adds a job due after delay (default 0: ready now) or at a time.
        Returns its id, or None when id was given, a job with it exists (or
        its UNIQUE time holds it) and replace was not set: a retried add is
        safe."""
        return text(self.redis.execute_command(*add_args(
            queue, payload, delay, at, id, replace, unique, debounce, priority, group, retry, dead_letter,
            ack_timeout)))

    def add_at(self, queue: str, payload: Payload, at: When, **options: Any) -> Optional[str]:
        """add with an absolute due time (DELAY.ADDAT); a past time means
        ready now."""
        return self.add(queue, payload, at=at, **options)

    def cancel(self, queue: str, *ids: str) -> int:
        """Removes jobs whatever their state; returns how many existed."""
        return int(self.redis.execute_command("DELAY.CANCEL", queue, *ids))

    def reschedule(self, queue: str, id: str, *, delay: Optional[Duration] = None,
                   at: Optional[When] = None) -> bool:
        """Moves a delayed or ready job to a new due time, keeping its id,
        payload, options and deliveries. False if it is not delayed or
        ready."""
        return bool(self.redis.execute_command(*reschedule_args(queue, id, delay, at)))

    def promote(self, queue: str, *ids: str) -> int:
        """Makes delayed jobs ready now; returns how many moved."""
        return int(self.redis.execute_command("DELAY.PROMOTE", queue, *ids))

    def get(self, queue: str, id: str) -> Optional[Dict[str, Any]]:
        """The job's fields (id, queue, state, due, payload, deliveries, and
        ack_deadline, group, priority, error when it has them; times in unix
        ms), or None when there is no such job."""
        return fields(self.redis.execute_command("DELAY.GET", queue, id))

    def stats(self, queue: str) -> Dict[str, int]:
        """DELAY.STATS: delayed, ready, reserved, latency and the counters."""
        return fields(self.redis.execute_command("DELAY.STATS", queue)) or {}

    def schedule(self, queue: str, name: str, payload: Payload, *, cron: Optional[str] = None,
                 tz: Optional[str] = None, every: Optional[Duration] = None, ack_timeout: Optional[Duration] = None,
                 retry: Optional[int] = None, dead_letter: Optional[str] = None, misfire: Optional[str] = None,
                 start: Optional[When] = None, end: Optional[When] = None) -> None:
        """Creates or replaces (by name) a recurring schedule: cron (with tz)
        or every. Each firing adds a job with id name:<fire unix ms>."""
        self.redis.execute_command(*schedule_args(queue, name, payload, cron, tz, every, ack_timeout, retry,
                                                  dead_letter, misfire, start, end))

    def unschedule(self, queue: str, name: str) -> bool:
        """Removes a schedule (the jobs it made stay); False if there was
        none."""
        return bool(self.redis.execute_command("DELAY.UNSCHEDULE", queue, name))

    def schedules(self, queue: str) -> List[Dict[str, Any]]:
        """The queue's schedules: name, spec, next, last, fired, ..."""
        return [fields(s) or {} for s in self.redis.execute_command("DELAY.SCHEDULES", queue) or []]

    def limit(self, queue: str, *, concurrency: Optional[int] = None, rate: Optional[Tuple[int, Duration]] = None,
              group_concurrency: Optional[int] = None, off: bool = False) -> None:
        """DELAY.LIMIT: the fleet's ceiling on the queue's reserved jobs,
        takes per window (rate=(n, per)) and reserved jobs per group."""
        self.redis.execute_command(*limit_args(queue, concurrency, rate, group_concurrency, off))
