"""The thread-based worker: one fetching thread per group of queues that
share a node, a pool of handler threads, a heartbeat thread and an ack
flusher, on a redis.Redis or a redis.cluster.RedisCluster.

The fetcher asks for as many jobs as it has free slots (DELAY.MPOP ... COUNT
free) and sends the ids finished since its last fetch as one DELAY.ACK in
the same pipeline, so a busy worker pays one round trip per fetch and
nothing fetched waits unstarted. Finished jobs reach it through a
SimpleQueue, which also wakes it when it is full: SimpleQueue is written in
C and may be fed from a signal handler, which the stop uses."""

import logging
import queue as queuemod
import signal
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import redis

from . import _loop
from ._core import (BackoffFunc, Outage, block_seconds, error_text, exponential_backoff, fix_cluster_client,
                    is_outage, log as default_log, text, to_ms)

try:
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = None  # type: ignore[assignment,misc]

Handler = Callable[["Job"], Any]

# Tokens on a group's done queue besides (queue, id) of a finished job.
_WAKE = ("", None)  # look again (stop requested, or slots freed by the flusher)


class Job:
    """A job handed to a handler. payload is str or bytes as the client's
    decode_responses says. stopping turns True when the worker's stop
    deadline passed while the handler still runs: its job has been given
    back, and a handler that can stop early should (threads cannot be
    interrupted; a long handler polls it)."""

    __slots__ = ("queue", "id", "payload", "stopping", "_group", "_started", "_fetched_ms", "_next_touch",
                 "_timeout_ms", "_touching", "_gone")

    def __init__(self, queue: str, id: Any, payload: Any, group: "_Group", fetched_ms: int) -> None:
        self.queue = queue
        self.id = id
        self.payload = payload
        self.stopping = False
        self._group = group
        self._started = 0.0
        self._fetched_ms = fetched_ms
        self._next_touch = 0.0  # monotonic time of the next TOUCH; 0: not known yet
        self._timeout_ms = 0
        self._touching = True
        self._gone = False  # given back at the stop deadline: its ack or nack is not ours any more

    def __repr__(self) -> str:
        return f"Job(queue={self.queue!r}, id={text(self.id)!r})"


class _Group:
    """Queues fetched together by one thread: every queue of a worker, or in
    a cluster those of one hash slot (DELAY.MPOP's keys share a slot)."""

    def __init__(self, queues: List[str], slots: int) -> None:
        self.queues = queues
        self.slots = slots
        self.done: "queuemod.SimpleQueue[Tuple[str, Any]]" = queuemod.SimpleQueue()
        self.lock = threading.Lock()
        self.fetching = False  # the fetcher is in a round trip
        self.fetch_seq = 0
        self.flush_asked = False
        self.freed = 0  # slots the flusher freed while the fetcher was away
        self.running: Dict[int, Job] = {}


class Worker:
    """Runs handlers for jobs of delayd queues.

    worker = delayd.Worker(redis.Redis(...), concurrency=8)

    @worker.handler("emails")
    def send(job): ...

    worker.run()  # until SIGTERM or SIGINT, then a graceful stop

    concurrency: jobs run at once (threads); default 1, one job at a time.
    block: seconds a fetch waits for a job (default 1, kept under the
    client's socket_timeout). shutdown_timeout: seconds a stop lets running
    handlers finish before it gives their jobs back. backoff: the retry
    policy of a failed job (default: exponential with full jitter, 1 s
    doubling to 1 h). heartbeat_after: seconds a job runs before the worker
    looks up its ack deadline and starts TOUCHing it.

    Hooks, called from the handler's thread (on_error from any): on_job_done(job,
    seconds), on_job_failed(job, exc, retry_in_seconds or None when
    discarded), on_error(exc, what) for errors outside handlers.
    """

    def __init__(self, redis_client: Union["redis.Redis", "RedisCluster"], *, concurrency: int = 1,
                 block: Optional[float] = None, shutdown_timeout: float = 30.0,
                 backoff: Optional[BackoffFunc] = None, heartbeat_after: float = 1.0,
                 logger: Optional[logging.Logger] = None,
                 on_job_done: Optional[Callable[[Job, float], None]] = None,
                 on_job_failed: Optional[Callable[[Job, BaseException, Optional[float]], None]] = None,
                 on_error: Optional[Callable[[BaseException, str], None]] = None) -> None:
        if concurrency < 1:
            raise ValueError("delayd: concurrency must be at least 1")
        self.redis = redis_client
        self.cluster = RedisCluster is not None and isinstance(redis_client, RedisCluster)
        if self.cluster:
            fix_cluster_client()
            timeout = redis_client.nodes_manager.connection_kwargs.get("socket_timeout")
        else:
            timeout = redis_client.connection_pool.connection_kwargs.get("socket_timeout")
        self.block = block_seconds(timeout, block)
        self.concurrency = concurrency
        self.shutdown_timeout = shutdown_timeout
        self.backoff = backoff or exponential_backoff()
        self.heartbeat_after = heartbeat_after
        self.log = logger or default_log
        self.on_job_done = on_job_done
        self.on_job_failed = on_job_failed
        self.on_error = on_error
        self.handlers: Dict[str, Handler] = {}
        #: Counters: jobs done, failed (NACKed), discarded (SkipRetry),
        #: acks the server answered 0 to (the reservation had expired).
        self.counts = {"done": 0, "failed": 0, "discarded": 0, "acks_lost": 0}
        self._count_lock = threading.Lock()  # handler threads count side by side
        self._control: "queuemod.SimpleQueue[str]" = queuemod.SimpleQueue()
        self._jobs: "queuemod.SimpleQueue[Optional[Job]]" = queuemod.SimpleQueue()
        self._flush: "queuemod.SimpleQueue[Optional[_Group]]" = queuemod.SimpleQueue()
        self._groups: List[_Group] = []
        self._threads: List[threading.Thread] = []
        self._stopping = False
        self._stop_event = threading.Event()  # set with _stopping, for sleeps a stop cuts short
        self._stopped = threading.Event()
        self._started = False
        self._in_run = False
        self._inline = False
        self._shutdown_lock = threading.Lock()

    # Registration.

    def handle(self, queue: str, fn: Handler) -> None:
        """Runs fn(job) for each job of queue. A return acknowledges the
        job; an exception NACKs it with the backoff policy's delay and the
        exception as its failure reason; SkipRetry acknowledges it."""
        if self._started:
            raise RuntimeError("delayd: handlers are registered before the worker starts")
        self.handlers[queue] = fn

    def handler(self, queue: str) -> Callable[[Handler], Handler]:
        """The decorator form of handle."""

        def register(fn: Handler) -> Handler:
            self.handle(queue, fn)
            return fn

        return register

    # Life cycle.

    def run(self, install_signals: bool = True) -> None:
        """Works until SIGTERM or SIGINT (installed here, in the main thread)
        or stop(); then stops gracefully and returns."""
        if install_signals and threading.current_thread() is threading.main_thread():
            previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        else:
            previous = {}
        try:
            self._in_run = True
            self.start()
            while self._control.get() != "stop":
                pass
            self._shutdown()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def start(self) -> None:
        """Starts the worker's threads and returns; stop() ends them."""
        if self._started:
            raise RuntimeError("delayd: the worker has started already")
        if not self.handlers:
            raise RuntimeError("delayd: no handler registered")
        self._started = True
        self._groups = self._group_queues()
        spawn = self._spawn
        # One job at a time needs no pool: the fetcher runs it, and saves
        # two thread switches a job.
        self._inline = self.concurrency == 1 and len(self._groups) == 1
        if not self._inline:
            for i in range(self.concurrency):
                spawn(self._pool_loop, None, f"delayd-handler-{i}")
        for g in self._groups:
            spawn(self._fetch_loop, g, f"delayd-fetch-{g.queues[0]}")
        spawn(self._heartbeat_loop, None, "delayd-heartbeat")
        spawn(self._flush_loop, None, "delayd-acks")

    def stop(self, wait: bool = True) -> None:
        """Stops fetching at once; running jobs get shutdown_timeout to
        finish (and their acks are sent), then the rest are given back. With
        wait, returns once that is done."""
        self._control.put("stop")
        if not self._started:
            return
        if threading.current_thread() in self._threads:
            wait = False  # a handler or hook of this worker: waiting would wait for itself
        if not self._in_run:
            if wait:
                self._shutdown()
            else:
                threading.Thread(target=self._shutdown, name="delayd-stop", daemon=True).start()
        elif wait:
            self._stopped.wait()

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Only reentrant-safe work here: SimpleQueue.put is.
        self._control.put("stop")

    def _spawn(self, fn: Callable[..., None], arg: Any, name: str) -> None:
        t = threading.Thread(target=fn, args=(arg,) if arg is not None else (), name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def _shutdown(self) -> None:
        with self._shutdown_lock:
            if self._stopping:
                self._stopped.wait()
                return
            self._stopping = True
        self._stop_event.set()
        self.log.info("delayd: stopping: finishing %d running jobs within %.0f s",
                      sum(len(g.running) for g in self._groups), self.shutdown_timeout)
        deadline = time.monotonic() + self.shutdown_timeout
        for g in self._groups:
            g.done.put(_WAKE)
        # A fetcher drains its group (it sends the acks of the jobs that
        # finish) until the deadline; one that runs its jobs itself
        # (concurrency 1) may still be in a handler then.
        for t in self._threads:
            if t.name.startswith("delayd-fetch-"):
                t.join(max(0.0, deadline - time.monotonic()) + 1.0)
        for g in self._groups:
            for job in list(g.running.values()):
                job._gone = True
                job.stopping = True
                self.log.warning("delayd: %r still running at the stop deadline: given back", job)
                self._nack(job, 0, "worker shutting down")
        for _ in range(0 if self._inline else self.concurrency):
            self._jobs.put(None)
        self._flush.put(None)
        self._stopped.set()
        self.log.info("delayd: stopped")

    def _group_queues(self) -> List[_Group]:
        keyslot = self.redis.keyslot if self.cluster else None
        return [_Group(qs, n) for qs, n in _loop.groups(list(self.handlers), self.concurrency, keyslot)]

    # The fetcher.

    def _node(self, g: _Group) -> "redis.Redis":
        if not self.cluster:
            return self.redis
        return self.redis.get_node_from_key(g.queues[0]).redis_connection

    def _fetch_loop(self, g: _Group) -> None:
        inflight = 0
        acks: Dict[str, List[Any]] = {}
        outage = Outage(self.log, "fetch " + ",".join(g.queues))
        head = _loop.mpop_head(self.block, g.queues)
        node = None
        while True:
            # What finished: wait for it when every slot is taken.
            if inflight >= g.slots and not self._stopping:
                inflight -= self._take(g.done.get(), acks)
            while True:
                try:
                    tok = g.done.get_nowait()
                except queuemod.Empty:
                    break
                inflight -= self._take(tok, acks)
            with g.lock:
                inflight -= g.freed
                g.freed = 0
            if self._stopping:
                break
            free = g.slots - inflight
            if free <= 0:
                continue
            try:
                if node is None:
                    node = self._node(g)
                pipe = node.pipeline(transaction=False)
                sent, cmds = _loop.fetch_commands(acks, head, free)
                for cmd in cmds:
                    pipe.execute_command(*cmd)
                g.fetching = True
                try:
                    replies = pipe.execute(raise_on_error=False)
                finally:
                    g.fetching = False
                    g.fetch_seq += 1
            except Exception as e:
                node = None
                self._outage(outage, e, "fetch")
                continue
            f = _loop.read_fetch(sent, replies)
            acks = f.unsent
            for q, ids, n in f.acked:
                self._acked(q, ids, n)
            if f.jobs:
                now_ms = int(time.time() * 1000)
                inflight += len(f.jobs)
                if self._inline:
                    for id, payload in f.jobs:
                        self._run(Job(f.queue, id, payload, g, now_ms))
                else:
                    put = self._jobs.put
                    for id, payload in f.jobs:
                        put(Job(f.queue, id, payload, g, now_ms))
                    # Hand the GIL to the handler threads before the next
                    # fetch goes out: fast jobs end now, and their acks ride
                    # with it rather than alone 2 ms later.
                    time.sleep(0)
            if f.error is not None:
                node = None
                self._outage(outage, f.error, "fetch")
            else:
                outage.ok()
        self._drain(g, inflight, acks)

    def _take(self, tok: Tuple[str, Any], acks: Dict[str, List[Any]]) -> int:
        q, id = tok
        if not q:
            return 0  # _WAKE
        if id is not None:
            _loop.add_ack(acks, q, id)
        return 1

    def _acked(self, q: str, ids: List[Any], n: Any) -> None:
        lost = _loop.acks_lost(ids, int(n))
        if lost > 0:
            # The reservation expired and the job went to another worker (or
            # will): at-least-once, the handler may run twice.
            with self._count_lock:
                self.counts["acks_lost"] += lost
            self.log.warning("delayd: %d of %d acks of %s came after the job's ack timeout", lost, len(ids), q)

    def _outage(self, outage: Outage, e: BaseException, what: str) -> None:
        wait = outage.failed(e)
        self._hook_error(e, what)
        if self.cluster and is_outage(e):
            self._refresh_slots()
        if self._stopping:
            time.sleep(wait)  # the drain's acks, until its deadline
        else:
            self._stop_event.wait(wait)

    def _refresh_slots(self) -> None:
        try:
            self.redis.nodes_manager.initialize()
        except Exception as e:  # no node gives a map yet: the next failure tries again
            self.log.debug("delayd: re-reading the slot map: %s: %s", type(e).__name__, e)

    def _drain(self, g: _Group, inflight: int, acks: Dict[str, List[Any]]) -> None:
        """The stop: no more fetches; acks sent as jobs finish, until none
        runs or the deadline passes; then the jobs still running are given
        back."""
        deadline = time.monotonic() + self.shutdown_timeout
        outage = Outage(self.log, "ack " + ",".join(g.queues))
        while True:
            if acks:
                if self._send_acks(g, acks, outage):
                    acks.clear()
                elif time.monotonic() > deadline:
                    break
            with g.lock:
                inflight -= g.freed
                g.freed = 0
            if inflight <= 0 and not acks:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                inflight -= self._take(g.done.get(timeout=min(left, 0.5) if acks else left), acks)
            except queuemod.Empty:
                continue
            while True:
                try:
                    inflight -= self._take(g.done.get_nowait(), acks)
                except queuemod.Empty:
                    break

    def _send_acks(self, g: _Group, acks: Dict[str, List[Any]], outage: Outage) -> bool:
        try:
            pipe = self._node(g).pipeline(transaction=False)
            items = list(acks.items())
            for q, ids in items:
                pipe.execute_command("DELAY.ACK", q, *ids)
            for (q, ids), n in zip(items, pipe.execute()):
                self._acked(q, ids, n)
            outage.ok()
            return True
        except Exception as e:
            self._outage(outage, e, "ack")
            return False

    # Handlers.

    def _pool_loop(self) -> None:
        get = self._jobs.get
        while True:
            job = get()
            if job is None:
                return
            self._run(job)

    def _run(self, job: Job) -> None:
        g = job._group
        key = id(job)
        job._started = time.monotonic()
        g.running[key] = job
        exc: Optional[BaseException] = None
        try:
            self.handlers[job.queue](job)
        except BaseException as e:  # SystemExit too: uncaught, it would end the thread, and its slot
            exc = e
        del g.running[key]
        kind = _loop.outcome(exc)
        with self._count_lock:
            self.counts[kind] += 1
        if kind == _loop.DONE:
            self._finished(job, g)
            if self.on_job_done is not None:
                self._hook(self.on_job_done, job, time.monotonic() - job._started)
            return
        assert exc is not None
        if kind == _loop.DISCARDED:
            self.log.info("delayd: %r discarded: %s", job, exc)
            self._finished(job, g)
            self._hook(self.on_job_failed, job, exc, None)
            return
        self.log.error("delayd: %r failed:\n%s", job, "".join(traceback.format_exception(type(exc), exc,
                                                                                        exc.__traceback__)))
        retry_in = self._retry_in(job, exc)
        if not job._gone:
            self._nack(job, to_ms(retry_in), error_text(exc))
            g.done.put((job.queue, None))
        self._hook(self.on_job_failed, job, exc, retry_in)

    def _finished(self, job: Job, g: _Group) -> None:
        if job._gone:
            return
        g.done.put((job.queue, job.id))
        # A fetch in flight may block for a while: the flusher sends this
        # ack on its own if the fetch has not taken it within 2 ms.
        if g.fetching and not g.flush_asked:
            g.flush_asked = True
            self._flush.put(g)

    def _retry_in(self, job: Job, e: BaseException) -> float:
        try:
            deliveries = _loop.deliveries(self.redis.execute_command("DELAY.GET", job.queue, job.id))
            return max(0.0, float(self.backoff(deliveries, e)))
        except Exception as ge:
            self._hook_error(ge, "get")
            return max(0.0, float(self.backoff(1, e)))

    def _nack(self, job: Job, delay_ms: int, reason: str) -> None:
        for attempt in range(_loop.NACK_TRIES):
            try:
                n = self.redis.execute_command("DELAY.NACK", job.queue, job.id, delay_ms, "ERROR", reason)
                if not n:
                    self.log.warning("delayd: NACK of %r: not reserved any more (its ack timeout passed)", job)
                return
            except Exception as e:
                self._hook_error(e, "nack")
                if not is_outage(e) or attempt == _loop.NACK_TRIES - 1:
                    self.log.error("delayd: NACK of %r: %s: %s; it comes back after its ack timeout", job,
                                   type(e).__name__, e)
                    return
                time.sleep(_loop.nack_wait(attempt))

    def _hook(self, fn: Optional[Callable[..., None]], *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:
            self.log.exception("delayd: hook %s raised", getattr(fn, "__name__", fn))

    def _hook_error(self, e: BaseException, what: str) -> None:
        self._hook(self.on_error, e, what)

    # The ack flusher: acks of jobs that finished while the fetcher waits in a
    # blocking fetch.

    def _flush_loop(self) -> None:
        outage = Outage(self.log, "ack")
        while True:
            g = self._flush.get()
            if g is None:
                return
            seq = g.fetch_seq
            time.sleep(0.002)
            g.flush_asked = False
            if not g.fetching or g.fetch_seq != seq:
                continue  # the fetcher took them
            acks: Dict[str, List[Any]] = {}
            toks = []
            while True:
                try:
                    tok = g.done.get_nowait()
                except queuemod.Empty:
                    break
                toks.append(tok)
                self._take(tok, acks)
            if not toks:
                continue
            if acks and not self._send_acks(g, acks, outage):
                for tok in toks:  # the fetcher sends them with its next fetch
                    g.done.put(tok)
                continue
            with g.lock:
                g.freed += sum(1 for q, _ in toks if q)
            g.done.put(_WAKE)

    # The heartbeat.

    def _heartbeat_loop(self) -> None:
        while not self._stopped.wait(0.1):
            now = time.monotonic()
            for g in self._groups:
                for job in list(g.running.values()):
                    act = _loop.heartbeat_due(job, now, self.heartbeat_after)
                    if act == _loop.LEARN:
                        self._learn_deadline(job)
                    elif act == _loop.TOUCH:
                        self._touch(job)

    def _learn_deadline(self, job: Job) -> None:
        try:
            info = self.redis.execute_command("DELAY.GET", job.queue, job.id)
        except Exception as e:
            self._hook_error(e, "heartbeat")
            return  # tried again on the next beat
        _loop.learned(job, info, time.monotonic(), int(time.time() * 1000))

    def _touch(self, job: Job) -> None:
        try:
            n = self.redis.execute_command("DELAY.TOUCH", job.queue, job.id)
        except Exception as e:
            self._hook_error(e, "heartbeat")
            job._next_touch = time.monotonic() + _loop.TOUCH_RETRY
            return
        _loop.touched(job, bool(n), time.monotonic())
        if not n:
            self.log.warning("delayd: TOUCH of %r: not reserved any more (its ack timeout passed)", job)
