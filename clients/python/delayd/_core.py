"""What the sync and asyncio halves share: argument building for the
producer's commands, durations, job info parsing, the backoff policy, which
errors are an outage rather than a bug, and the redis-py 4.3 cluster fix."""

import datetime
import logging
import random
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import redis
from redis import exceptions as rexc

log = logging.getLogger("delayd")

#: A duration: seconds as a number, or a timedelta.
Duration = Union[int, float, datetime.timedelta]
#: An absolute time: a datetime (naive means local time, as
#: datetime.timestamp() reads it) or unix seconds.
When = Union[int, float, datetime.datetime]
Payload = Union[str, bytes]

#: A backoff policy: the delay in seconds before a failed job's next try,
#: from its deliveries so far (1 on its first failure) and the exception.
BackoffFunc = Callable[[int, BaseException], float]

#: The server keeps at most this much of a failure reason (DELAY.NACK ERROR).
MAX_ERROR_BYTES = 1024


class SkipRetry(Exception):
    """Raised by a handler for a job that must not be tried again: the job
    is acknowledged (done) and the reason logged, as asynq's SkipRetry."""


#: Another name for SkipRetry, for handlers that read better with it.
Discard = SkipRetry


def to_ms(d: Duration) -> int:
    """A duration in whole milliseconds (rounded; never negative)."""
    s = d.total_seconds() if isinstance(d, datetime.timedelta) else float(d)
    return max(0, int(round(s * 1000)))


def to_unix_ms(at: When) -> int:
    if isinstance(at, datetime.datetime):
        return int(round(at.timestamp() * 1000))
    return int(round(float(at) * 1000))


def text(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def add_args(queue: str, payload: Payload, delay: Optional[Duration], at: Optional[When], id: Optional[str],
             replace: bool, unique: Optional[Duration], debounce: Optional[Duration], priority: Optional[int],
             group: Optional[str], retry: Optional[int], dead_letter: Optional[str],
             ack_timeout: Optional[Duration]) -> List[Any]:
    """DELAY.ADD or DELAY.ADDAT with its options, in the order COMMAND DOCS
    lists them."""
    if delay is not None and at is not None:
        raise ValueError("delayd: give delay or at, not both")
    if at is not None:
        args: List[Any] = ["DELAY.ADDAT", queue, to_unix_ms(at), payload]
    else:
        args = ["DELAY.ADD", queue, to_ms(delay or 0), payload]
    if id is not None:
        args += ["ID", id]
    if replace:
        args.append("REPLACE")
    if ack_timeout is not None:
        args += ["ACKTIMEOUT", to_ms(ack_timeout)]
    if retry is not None:
        args += ["RETRY", int(retry)]
    if dead_letter is not None:
        args += ["DEADLETTER", dead_letter]
    if unique is not None:
        args += ["UNIQUE", to_ms(unique)]
    if debounce is not None:
        args += ["DEBOUNCE", to_ms(debounce)]
    if group is not None:
        args += ["GROUP", group]
    if priority is not None:
        args += ["PRIORITY", int(priority)]
    return args


def reschedule_args(queue: str, id: str, delay: Optional[Duration], at: Optional[When]) -> List[Any]:
    if (delay is None) == (at is None):
        raise ValueError("delayd: give delay or at")
    if at is not None:
        return ["DELAY.RESCHEDULEAT", queue, id, to_unix_ms(at)]
    return ["DELAY.RESCHEDULE", queue, id, to_ms(delay or 0)]


def schedule_args(queue: str, name: str, payload: Payload, cron: Optional[str], tz: Optional[str],
                  every: Optional[Duration], ack_timeout: Optional[Duration], retry: Optional[int],
                  dead_letter: Optional[str], misfire: Optional[str], start: Optional[When],
                  end: Optional[When]) -> List[Any]:
    if (cron is None) == (every is None):
        raise ValueError("delayd: give cron or every")
    args: List[Any] = ["DELAY.SCHEDULE", queue, name]
    if cron is not None:
        args += ["CRON", cron]
        if tz is not None:
            args += ["TZ", tz]
    else:
        if tz is not None:
            raise ValueError("delayd: tz goes with cron")
        args += ["EVERY", to_ms(every or 0)]
    args.append(payload)
    if ack_timeout is not None:
        args += ["ACKTIMEOUT", to_ms(ack_timeout)]
    if retry is not None:
        args += ["RETRY", int(retry)]
    if dead_letter is not None:
        args += ["DEADLETTER", dead_letter]
    if misfire is not None:
        args += ["MISFIRE", misfire.upper()]
    if start is not None:
        args += ["START", to_unix_ms(start)]
    if end is not None:
        args += ["END", to_unix_ms(end)]
    return args


def limit_args(queue: str, concurrency: Optional[int], rate: Optional[Tuple[int, Duration]],
               group_concurrency: Optional[int], off: bool) -> List[Any]:
    args: List[Any] = ["DELAY.LIMIT", queue]
    if off:
        return args + ["OFF"]
    if concurrency is not None:
        args += ["CONCURRENCY", int(concurrency)]
    if rate is not None:
        args += ["RATE", int(rate[0]), to_ms(rate[1])]
    if group_concurrency is not None:
        args += ["GROUPCONCURRENCY", int(group_concurrency)]
    return args


# Fields of DELAY.GET and DELAY.STATS that are numbers.
_INT_FIELDS = {"due", "deliveries", "ack_deadline", "priority", "delayed", "ready", "reserved", "latency",
               "next", "last", "fired", "start", "end", "added", "acks", "nacks", "redeliveries", "expired",
               "dead_lettered", "paused"}


def fields(reply: Any) -> Optional[Dict[str, Any]]:
    """A flat field/value reply (or a RESP3 map) as a dict with str keys;
    numeric fields as ints. The payload keeps the client's type."""
    if reply is None:
        return None
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    out: Dict[str, Any] = {}
    for k, v in items:
        k = text(k)
        if k in _INT_FIELDS and v is not None:
            try:
                v = int(v)
            except (TypeError, ValueError):
                pass
        elif k != "payload":
            v = text(v)
        out[k] = v
    return out


def exponential_backoff(base: float = 1.0, factor: float = 2.0, cap: float = 3600.0,
                        jitter: bool = True) -> BackoffFunc:
    """The default policy: base * factor**(deliveries-1) seconds, at most
    cap, and with full jitter (a uniform draw between 0 and that), which
    spreads a failing burst instead of retrying it in lockstep."""

    def backoff(deliveries: int, exc: BaseException) -> float:
        n = max(1, deliveries) - 1
        # factor**n overflows a float long before it matters: stop at cap.
        d = cap if n > 64 else min(cap, base * factor ** n)
        return random.uniform(0, d) if jitter else d

    return backoff


def error_text(exc: BaseException) -> str:
    """The failure reason DELAY.NACK ERROR keeps: the exception's type and
    message, cut to the server's 1 KiB on a character boundary."""
    msg = str(exc)
    s = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    b = s.encode("utf-8", "replace")
    if len(b) <= MAX_ERROR_BYTES:
        return s
    return b[:MAX_ERROR_BYTES].decode("utf-8", "ignore")


# The replies a failover or a restart gives for a moment; each is retried,
# never passed to a handler. UNBLOCKED: a pop ended by a node that lost its
# leadership (or CLIENT UNBLOCK ... ERROR).
_OUTAGE_PREFIXES = ("UNBLOCKED", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MOVED", "ASK ", "READONLY",
                    "MASTERDOWN")
_OUTAGE_TYPES: Tuple[type, ...] = (rexc.ConnectionError, rexc.TimeoutError, rexc.ClusterError,
                                   rexc.TryAgainError, rexc.AskError, rexc.RedisClusterException,
                                   ConnectionError, TimeoutError, OSError)


def is_outage(e: BaseException) -> bool:
    """An error that passes by itself (a failover, a restart, a slot map
    being re-read) rather than one in the caller's command."""
    if isinstance(e, _OUTAGE_TYPES):
        return True
    if isinstance(e, rexc.ResponseError):
        return str(e).startswith(_OUTAGE_PREFIXES)
    # redis-py 4.3 raises IndexError once from a slot map re-read after a
    # replica became master (redis-py #2549, fixed in 4.4.2).
    return isinstance(e, IndexError)


class Outage:
    """Backoff and logging for one loop's outages: 100 ms doubling to 2 s,
    the first error of an outage logged as a warning, the rest at debug
    level, and the recovery once."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.log = logger
        self.what = what
        self.since: Optional[float] = None
        self.delay = 0.0
        self.errors = 0

    def failed(self, e: BaseException) -> float:
        """Records e and returns how long to wait before trying again."""
        self.errors += 1
        if self.since is None:
            self.since = time.monotonic()
            self.delay = 0.1
            if is_outage(e):
                self.log.warning("delayd: %s: %s: %s; retrying", self.what, type(e).__name__, e)
            else:
                self.log.error("delayd: %s: %s: %s; retrying", self.what, type(e).__name__, e)
        else:
            self.log.debug("delayd: %s: %s: %s", self.what, type(e).__name__, e)
            self.delay = min(2.0, self.delay * 2)
        return self.delay

    def ok(self) -> None:
        if self.since is not None:
            self.log.info("delayd: %s: recovered after %.1f s and %d errors", self.what,
                          time.monotonic() - self.since, self.errors)
            self.since, self.errors = None, 0


def block_seconds(socket_timeout: Optional[float], wanted: Optional[float]) -> float:
    """The DELAY.MPOP timeout: 1 s (or what was asked), and always under the
    client's socket_timeout, which cuts a blocking command like any other."""
    b = 1.0 if wanted is None else float(wanted)
    if socket_timeout:
        b = min(b, float(socket_timeout) - 0.5) if socket_timeout > 1.0 else float(socket_timeout) / 2
    return max(0.01, round(b, 3))


def redis_py_version() -> Tuple[int, int, int]:
    parts = (redis.__version__.split(".") + ["0", "0"])[:3]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)  # type: ignore[return-value]


_patched = False


def fix_cluster_client() -> None:
    """On redis-py < 4.4, makes RedisCluster deep-copy as itself.

    redis-py 4.3's NodesManager.initialize, re-reading the slot map after a
    connection error, deep-copies its connection kwargs, which hold a bound
    method of the client: the copy reaches the client's locks and fails
    ("cannot pickle '_thread.lock' object"), every time, so a 4.3 client
    never finds a new leader (redis-py #2377, fixed in 4.4.0). Called by
    connect_cluster and by a Worker or Client given a RedisCluster; it
    changes nothing on 4.4 and later."""
    global _patched
    if _patched or redis_py_version() >= (4, 4, 0):
        return
    from redis.cluster import RedisCluster

    RedisCluster.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]
    try:
        from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

        AsyncRedisCluster.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]
    except ImportError:
        pass
    _patched = True


def parse_nodes(nodes: Union[str, Sequence[Union[str, Tuple[str, int]]]]) -> List[Tuple[str, int]]:
    if isinstance(nodes, str):
        nodes = [n for n in nodes.split(",") if n]
    out = []
    for n in nodes:
        if isinstance(n, str):
            h, p = n.rsplit(":", 1)
            out.append((h, int(p)))
        else:
            out.append((n[0], int(n[1])))
    return out
