"""The worker loop's decisions, shared by the thread worker (worker.py) and
the asyncio one (aio.py): how queues are grouped into fetchers, what a
fetch sends, what its replies mean, how a handler's outcome settles its
job, when a running job's heartbeat acts. Pure functions of their
arguments: no I/O, no clock, no locks; each worker does what they decide
in its own way (threads and queues, or tasks and events)."""

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ._core import SkipRetry, fields, text

#: A queue's finished jobs' ids, waiting for the next fetch's DELAY.ACK.
Acks = Dict[str, List[Any]]


def groups(queues: Sequence[str], concurrency: int,
           keyslot: Optional[Callable[[str], int]] = None) -> List[Tuple[List[str], int]]:
    """The fetchers: (queues, slots) each. One for every queue, or in a
    cluster (keyslot given) one per hash slot, since DELAY.MPOP's keys share
    a slot; each gets its share of the concurrency, at least one."""
    if keyslot is None:
        return [(list(queues), concurrency)]
    by_slot: Dict[int, List[str]] = {}
    for q in queues:
        by_slot.setdefault(keyslot(q), []).append(q)
    share = max(1, concurrency // len(by_slot))
    return [(qs, share) for qs in by_slot.values()]


def mpop_head(block: float, queues: Sequence[str]) -> List[Any]:
    """DELAY.MPOP's arguments up to its COUNT, which the free slots follow."""
    return ["DELAY.MPOP", block, len(queues), *queues, "COUNT"]


def fetch_commands(acks: Acks, head: List[Any], free: int) -> Tuple[List[Tuple[str, List[Any]]], List[List[Any]]]:
    """One pipeline: a DELAY.ACK per queue with finished jobs, then the
    fetch for the free slots. Returns what was acked (to read the replies
    against) and the commands."""
    sent = list(acks.items())
    cmds = [["DELAY.ACK", q, *ids] for q, ids in sent]
    cmds.append([*head, free])
    return sent, cmds


class Fetched(NamedTuple):
    acked: List[Tuple[str, List[Any], int]]  # (queue, ids, how many the server acknowledged)
    unsent: Acks  # acks whose reply was an error: kept for the next fetch
    error: Optional[BaseException]  # the first error of the pipeline, if any
    queue: Optional[str]  # the queue the jobs came from
    jobs: List[Tuple[Any, Any]]  # (id, payload)


def read_fetch(sent: List[Tuple[str, List[Any]]], replies: Sequence[Any]) -> Fetched:
    """What a fetch's replies say (fetch_commands's order, read with
    raise_on_error=False)."""
    acked, unsent, error = [], {}, None
    for (q, ids), n in zip(sent, replies):
        if isinstance(n, BaseException):
            error = error or n
            unsent.setdefault(q, []).extend(ids)
        else:
            acked.append((q, ids, int(n)))
    got = replies[-1]
    if isinstance(got, BaseException):
        return Fetched(acked, unsent, error or got, None, [])
    if got is None:
        return Fetched(acked, unsent, error, None, [])
    return Fetched(acked, unsent, error, text(got[0]), [(id, payload) for id, payload in got[1]])


def acks_lost(ids: Sequence[Any], n: int) -> int:
    """Acks the server did not count: the reservation had expired and the
    job went (or will go) to another worker."""
    return max(0, len(ids) - n)


def add_ack(acks: Acks, queue: str, id: Any) -> None:
    ids = acks.get(queue)
    if ids is None:
        acks[queue] = [id]
    else:
        ids.append(id)


def merge(into: Acks, acks: Acks) -> None:
    for q, ids in acks.items():
        into.setdefault(q, []).extend(ids)


# A handler's outcome.
DONE, DISCARDED, FAILED = "done", "discarded", "failed"


def outcome(exc: Optional[BaseException]) -> str:
    """DONE (acknowledge), DISCARDED (SkipRetry: acknowledge, log) or FAILED
    (NACK with the backoff's delay and the error's text)."""
    if exc is None:
        return DONE
    if isinstance(exc, SkipRetry):
        return DISCARDED
    return FAILED


def deliveries(info: Any) -> int:
    """A job's deliveries from its DELAY.GET reply (1 when unknown): the
    backoff's input."""
    f = fields(info) if info else None
    return int(f["deliveries"]) if f and f.get("deliveries") is not None else 1


#: NACK is tried this many times while the cluster fails over, waiting
#: nack_wait(attempt) seconds between tries.
NACK_TRIES = 3


def nack_wait(attempt: int) -> float:
    return 0.1 * 2 ** attempt


# The heartbeat. A running job carries _started (monotonic s), _fetched_ms
# (unix ms), _next_touch (monotonic s; 0 until its deadline is known),
# _timeout_ms, _touching and _gone.

LEARN, TOUCH = "learn", "touch"

#: The wait before a TOUCH that failed is tried again.
TOUCH_RETRY = 0.2


def heartbeat_due(job: Any, now: float, after: float) -> Optional[str]:
    """What a running job's heartbeat does now: LEARN (DELAY.GET its ack
    deadline, once it has run `after` seconds), TOUCH, or nothing."""
    if not job._touching or job._gone:
        return None
    if job._next_touch == 0.0:
        return LEARN if now - job._started >= after else None
    return TOUCH if now >= job._next_touch else None


def learned(job: Any, info: Any, now: float, now_ms: int) -> None:
    """Sets a job's heartbeat from its DELAY.GET reply: the ack timeout is
    the deadline less the fetch time, both unix ms (this machine's and the
    server's clocks: a skew shortens or lengthens it once, not at every
    touch), and the first TOUCH goes when a third of it is left. A job with
    no ack deadline (no ACKTIMEOUT, or gone) has nothing to keep."""
    f = fields(info) if info else None
    deadline = f.get("ack_deadline") if f else None
    if deadline is None:
        job._touching = False
        return
    job._timeout_ms = max(1, int(deadline) - job._fetched_ms)
    left = int(deadline) - now_ms
    job._next_touch = now + max(0.0, left - job._timeout_ms / 3) / 1000


def touched(job: Any, ok: bool, now: float) -> None:
    """After a TOUCH: the next when a third of the ack timeout is left
    again, or none if the job was no longer reserved."""
    if not ok:
        job._touching = False
        return
    job._next_touch = now + job._timeout_ms * 2 / 3 / 1000
