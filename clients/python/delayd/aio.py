"""delayd on redis.asyncio: the same Client and Worker, with coroutines.

The Worker runs one fetch task per group of queues (all of them, or in a
cluster those of one hash slot) and a task per job; an async handler that
is still running at the stop deadline is cancelled. Everything runs on the
caller's event loop: handlers must not block it."""

import asyncio
import logging
import signal
import time
import traceback
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import redis.asyncio as aredis

from . import _loop
from ._core import (BackoffFunc, Duration, Outage, Payload, When, add_args, block_seconds, error_text,
                    exponential_backoff, fields, fix_cluster_client, is_outage, limit_args, log as default_log,
                    reschedule_args, schedule_args, text, to_ms)

try:
    from redis.asyncio.cluster import RedisCluster
except ImportError:  # pragma: no cover - redis-py before 4.3
    RedisCluster = None  # type: ignore[assignment,misc]

__all__ = ["Client", "Job", "Worker"]

AsyncHandler = Callable[["Job"], Awaitable[Any]]


class Client:
    """The producer of delayd.Client on a redis.asyncio client (Redis or
    RedisCluster); every method is a coroutine with the same arguments."""

    def __init__(self, redis_client: Any) -> None:
        if RedisCluster is not None and isinstance(redis_client, RedisCluster):
            fix_cluster_client()
        self.redis = redis_client

    async def add(self, queue: str, payload: Payload, *, delay: Optional[Duration] = None,
                  at: Optional[When] = None, id: Optional[str] = None, replace: bool = False,
                  unique: Optional[Duration] = None, debounce: Optional[Duration] = None,
                  priority: Optional[int] = None, group: Optional[str] = None, retry: Optional[int] = None,
                  dead_letter: Optional[str] = None, ack_timeout: Optional[Duration] = None) -> Optional[str]:
        """See delayd.Client.add."""
        return text(await self.redis.execute_command(*add_args(
            queue, payload, delay, at, id, replace, unique, debounce, priority, group, retry, dead_letter,
            ack_timeout)))

    async def add_at(self, queue: str, payload: Payload, at: When, **options: Any) -> Optional[str]:
        return await self.add(queue, payload, at=at, **options)

    async def cancel(self, queue: str, *ids: str) -> int:
        return int(await self.redis.execute_command("DELAY.CANCEL", queue, *ids))

    async def reschedule(self, queue: str, id: str, *, delay: Optional[Duration] = None,
                         at: Optional[When] = None) -> bool:
        return bool(await self.redis.execute_command(*reschedule_args(queue, id, delay, at)))

    async def promote(self, queue: str, *ids: str) -> int:
        return int(await self.redis.execute_command("DELAY.PROMOTE", queue, *ids))

    async def get(self, queue: str, id: str) -> Optional[Dict[str, Any]]:
        return fields(await self.redis.execute_command("DELAY.GET", queue, id))

    async def stats(self, queue: str) -> Dict[str, int]:
        return fields(await self.redis.execute_command("DELAY.STATS", queue)) or {}

    async def schedule(self, queue: str, name: str, payload: Payload, *, cron: Optional[str] = None,
                       tz: Optional[str] = None, every: Optional[Duration] = None,
                       ack_timeout: Optional[Duration] = None, retry: Optional[int] = None,
                       dead_letter: Optional[str] = None, misfire: Optional[str] = None,
                       start: Optional[When] = None, end: Optional[When] = None) -> None:
        await self.redis.execute_command(*schedule_args(queue, name, payload, cron, tz, every, ack_timeout, retry,
                                                        dead_letter, misfire, start, end))

    async def unschedule(self, queue: str, name: str) -> bool:
        return bool(await self.redis.execute_command("DELAY.UNSCHEDULE", queue, name))

    async def schedules(self, queue: str) -> List[Dict[str, Any]]:
        return [fields(s) or {} for s in await self.redis.execute_command("DELAY.SCHEDULES", queue) or []]

    async def limit(self, queue: str, *, concurrency: Optional[int] = None,
                    rate: Optional[Tuple[int, Duration]] = None, group_concurrency: Optional[int] = None,
                    off: bool = False) -> None:
        await self.redis.execute_command(*limit_args(queue, concurrency, rate, group_concurrency, off))


class Job:
    """A job handed to a handler: queue, id, payload (str or bytes as the
    client's decode_responses says)."""

    __slots__ = ("queue", "id", "payload", "_group", "_task", "_started", "_fetched_ms", "_next_touch",
                 "_timeout_ms", "_touching", "_gone")

    def __init__(self, queue: str, id: Any, payload: Any, group: "_Group", fetched_ms: int) -> None:
        self.queue = queue
        self.id = id
        self.payload = payload
        self._group = group
        self._task: Optional["asyncio.Task[None]"] = None
        self._started = 0.0
        self._fetched_ms = fetched_ms
        self._next_touch = 0.0
        self._timeout_ms = 0
        self._touching = True
        self._gone = False

    def __repr__(self) -> str:
        return f"Job(queue={self.queue!r}, id={text(self.id)!r})"


class _Group:
    def __init__(self, queues: List[str], slots: int) -> None:
        self.queues = queues
        self.slots = slots
        self.inflight = 0
        self.acks: Dict[str, List[Any]] = {}
        self.wake = asyncio.Event()
        self.fetching = False
        self.fetch_seq = 0
        self.flush_asked = False
        self.running: Dict[int, Job] = {}


class Worker:
    """delayd.Worker on redis.asyncio, with async handlers:

    worker = delayd.aio.Worker(redis.asyncio.Redis(...), concurrency=10)

    @worker.handler("emails")
    async def send(job): ...

    await worker.run()  # until SIGTERM or SIGINT, or stop()

    The options and hooks are delayd.Worker's (hooks are plain functions,
    called on the loop); concurrency defaults to 10 tasks. A handler still
    running at the stop deadline is cancelled and its job given back."""

    def __init__(self, redis_client: Any, *, concurrency: int = 10, block: Optional[float] = None,
                 shutdown_timeout: float = 30.0, backoff: Optional[BackoffFunc] = None,
                 heartbeat_after: float = 1.0, logger: Optional[logging.Logger] = None,
                 on_job_done: Optional[Callable[[Job, float], None]] = None,
                 on_job_failed: Optional[Callable[[Job, BaseException, Optional[float]], None]] = None,
                 on_error: Optional[Callable[[BaseException, str], None]] = None) -> None:
        if concurrency < 1:
            raise ValueError("delayd: concurrency must be at least 1")
        self.redis = redis_client
        self.cluster = RedisCluster is not None and isinstance(redis_client, RedisCluster)
        if self.cluster:
            fix_cluster_client()
            timeout = redis_client.connection_kwargs.get("socket_timeout")
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
        self.handlers: Dict[str, AsyncHandler] = {}
        self.counts = {"done": 0, "failed": 0, "discarded": 0, "acks_lost": 0}
        self._groups: List[_Group] = []
        self._nodes: Dict[str, Any] = {}
        self._stopping = False
        self._stop_event: Optional[asyncio.Event] = None
        self._started = False

    def handle(self, queue: str, fn: AsyncHandler) -> None:
        """Runs await fn(job) for each job of queue (see delayd.Worker.handle)."""
        if self._started:
            raise RuntimeError("delayd: handlers are registered before the worker starts")
        self.handlers[queue] = fn

    def handler(self, queue: str) -> Callable[[AsyncHandler], AsyncHandler]:
        def register(fn: AsyncHandler) -> AsyncHandler:
            self.handle(queue, fn)
            return fn

        return register

    def stop(self) -> None:
        """Stops fetching at once; run() then lets running handlers finish
        within shutdown_timeout, gives back the rest and returns. Safe to
        call from the loop's thread only (a signal handler run() installed
        is)."""
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        for g in self._groups:
            g.wake.set()

    async def run(self, install_signals: bool = True) -> None:
        """Works until SIGTERM or SIGINT (when install_signals; on the
        running loop) or stop(), then stops gracefully and returns."""
        if self._started:
            raise RuntimeError("delayd: the worker has started already")
        if not self.handlers:
            raise RuntimeError("delayd: no handler registered")
        self._started = True
        loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        if self._stopping:
            self._stop_event.set()
        installed = []
        if install_signals:
            for s in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(s, self.stop)
                    installed.append(s)
                except (NotImplementedError, RuntimeError):  # not the main thread, or Windows
                    pass
        self._groups = self._group_queues()
        heartbeat = asyncio.ensure_future(self._heartbeat_loop())
        try:
            await asyncio.gather(*(self._fetch_loop(g) for g in self._groups))
            await self._drain()
        finally:
            heartbeat.cancel()
            for s in installed:
                loop.remove_signal_handler(s)
            for client in self._nodes.values():  # the per-node clients of a cluster
                await client.close()
            self.log.info("delayd: stopped")

    def _group_queues(self) -> List[_Group]:
        keyslot = self.redis.keyslot if self.cluster else None
        return [_Group(qs, n) for qs, n in _loop.groups(list(self.handlers), self.concurrency, keyslot)]

    async def _node(self, g: _Group) -> Any:
        if not self.cluster:
            return self.redis
        rc = self.redis
        await rc.initialize()  # once; later calls return at once
        node = rc.get_node_from_key(g.queues[0])
        client = self._nodes.get(node.name)
        if client is None:
            kw = dict(node.connection_kwargs)
            for k in ("redis_connect_func", "response_callbacks"):
                kw.pop(k, None)
            cls = kw.pop("connection_class", None)
            pool = aredis.ConnectionPool(**({"connection_class": cls} if cls else {}), **kw)
            client = self._nodes[node.name] = aredis.Redis(connection_pool=pool)
        return client

    async def _refresh_slots(self) -> None:
        try:
            await self.redis.nodes_manager.initialize()
        except Exception as e:
            self.log.debug("delayd: re-reading the slot map: %s: %s", type(e).__name__, e)

    async def _outage(self, outage: Outage, e: BaseException, what: str) -> None:
        wait = outage.failed(e)
        self._hook(self.on_error, e, what)
        if self.cluster and is_outage(e):
            await self._refresh_slots()
        if self._stopping or self._stop_event is None:
            await asyncio.sleep(wait)
            return
        try:
            await asyncio.wait_for(self._stop_event.wait(), wait)
        except asyncio.TimeoutError:
            pass

    async def _fetch_loop(self, g: _Group) -> None:
        outage = Outage(self.log, "fetch " + ",".join(g.queues))
        head = _loop.mpop_head(self.block, g.queues)
        node = None
        while not self._stopping:
            if g.inflight >= g.slots:
                g.wake.clear()
                await g.wake.wait()
                continue
            acks, g.acks = g.acks, {}
            try:
                if node is None:
                    node = await self._node(g)
                pipe = node.pipeline(transaction=False)
                sent, cmds = _loop.fetch_commands(acks, head, g.slots - g.inflight)
                for cmd in cmds:
                    pipe.execute_command(*cmd)
                g.fetching = True
                try:
                    replies = await pipe.execute(raise_on_error=False)
                finally:
                    g.fetching = False
                    g.fetch_seq += 1
            except Exception as e:
                _loop.merge(g.acks, acks)
                node = None
                await self._outage(outage, e, "fetch")
                continue
            f = _loop.read_fetch(sent, replies)
            _loop.merge(g.acks, f.unsent)
            for q, ids, n in f.acked:
                self._acked(q, ids, n)
            if f.jobs:
                now_ms = int(time.time() * 1000)
                g.inflight += len(f.jobs)
                spawn, run = asyncio.get_running_loop().create_task, self._run
                for id, payload in f.jobs:
                    job = Job(f.queue, id, payload, g, now_ms)
                    job._task = spawn(run(job))
                # Let the handlers just started run before the next fetch
                # goes out: fast ones end now, and their acks ride with it
                # rather than alone a few ms later.
                await asyncio.sleep(0)
            if f.error is not None:
                node = None
                await self._outage(outage, f.error, "fetch")
            else:
                outage.ok()

    def _acked(self, q: str, ids: List[Any], n: Any) -> None:
        lost = _loop.acks_lost(ids, int(n))
        if lost > 0:
            self.counts["acks_lost"] += lost
            self.log.warning("delayd: %d of %d acks of %s came after the job's ack timeout", lost, len(ids), q)

    async def _run(self, job: Job) -> None:
        g = job._group
        key = id(job)
        job._started = time.monotonic()
        g.running[key] = job
        exc: Optional[BaseException] = None
        try:
            try:
                await self.handlers[job.queue](job)
            except asyncio.CancelledError:
                self._finished(job, False)  # given back by the stop
                raise
            except Exception as e:
                exc = e
            kind = _loop.outcome(exc)
            self.counts[kind] += 1
            if kind == _loop.DONE:
                self._finished(job, True)
                if self.on_job_done is not None:
                    self._hook(self.on_job_done, job, time.monotonic() - job._started)
                return
            assert exc is not None
            if kind == _loop.DISCARDED:
                self.log.info("delayd: %r discarded: %s", job, exc)
                self._finished(job, True)
                self._hook(self.on_job_failed, job, exc, None)
                return
            self.log.error("delayd: %r failed:\n%s", job,
                           "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            retry_in = await self._retry_in(job, exc)
            if not job._gone:
                await self._nack(job, to_ms(retry_in), error_text(exc))
            self._finished(job, False)
            self._hook(self.on_job_failed, job, exc, retry_in)
        finally:
            g.running.pop(key, None)

    def _finished(self, job: Job, ack: bool) -> None:
        g = job._group
        if job._gone:
            return
        job._gone = True
        g.inflight -= 1
        if ack:
            _loop.add_ack(g.acks, job.queue, job.id)
            # A fetch in flight may block for a while: if it has not taken
            # this ack within 2 ms, it goes on its own.
            if g.fetching and not g.flush_asked:
                g.flush_asked = True
                asyncio.get_running_loop().call_later(0.002, self._flush_soon, g, g.fetch_seq)
        g.wake.set()

    def _flush_soon(self, g: _Group, seq: int) -> None:
        g.flush_asked = False
        if (g.fetching and g.fetch_seq == seq) or self._stopping:
            if g.acks:
                asyncio.ensure_future(self._flush(g))

    async def _flush(self, g: _Group) -> bool:
        acks, g.acks = g.acks, {}
        if not acks:
            return True
        try:
            node = await self._node(g)
            pipe = node.pipeline(transaction=False)
            items = list(acks.items())
            for q, ids in items:
                pipe.execute_command("DELAY.ACK", q, *ids)
            for (q, ids), n in zip(items, await pipe.execute()):
                self._acked(q, ids, n)
            return True
        except Exception as e:
            _loop.merge(g.acks, acks)  # sent with the next fetch, or by the drain
            self._hook(self.on_error, e, "ack")
            self.log.warning("delayd: ACK: %s: %s", type(e).__name__, e)
            return False

    async def _drain(self) -> None:
        running = [j._task for g in self._groups for j in g.running.values() if j._task is not None]
        self.log.info("delayd: stopping: finishing %d running jobs within %.0f s", len(running),
                      self.shutdown_timeout)
        deadline = time.monotonic() + self.shutdown_timeout
        outage = Outage(self.log, "ack")
        while True:
            for g in self._groups:
                if g.acks and not await self._flush(g):
                    await asyncio.sleep(outage.failed(RuntimeError("ack failed")))
            tasks = [j._task for g in self._groups for j in g.running.values() if j._task is not None]
            left = deadline - time.monotonic()
            if not tasks and not any(g.acks for g in self._groups):
                return
            if left <= 0:
                break
            if tasks:
                await asyncio.wait(tasks, timeout=min(left, 0.5), return_when=asyncio.FIRST_COMPLETED)
        for g in self._groups:
            for job in list(g.running.values()):
                self.log.warning("delayd: %r still running at the stop deadline: cancelled and given back", job)
                job._gone = True
                if job._task is not None:
                    job._task.cancel()
                await self._nack(job, 0, "worker shutting down")

    async def _retry_in(self, job: Job, e: BaseException) -> float:
        deliveries = 1
        try:
            deliveries = _loop.deliveries(await self.redis.execute_command("DELAY.GET", job.queue, job.id))
        except Exception as ge:
            self._hook(self.on_error, ge, "get")
        return max(0.0, float(self.backoff(deliveries, e)))

    async def _nack(self, job: Job, delay_ms: int, reason: str) -> None:
        for attempt in range(_loop.NACK_TRIES):
            try:
                n = await self.redis.execute_command("DELAY.NACK", job.queue, job.id, delay_ms, "ERROR", reason)
                if not n:
                    self.log.warning("delayd: NACK of %r: not reserved any more (its ack timeout passed)", job)
                return
            except Exception as e:
                self._hook(self.on_error, e, "nack")
                if not is_outage(e) or attempt == _loop.NACK_TRIES - 1:
                    self.log.error("delayd: NACK of %r: %s: %s; it comes back after its ack timeout", job,
                                   type(e).__name__, e)
                    return
                await asyncio.sleep(_loop.nack_wait(attempt))

    def _hook(self, fn: Optional[Callable[..., None]], *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:
            self.log.exception("delayd: hook %s raised", getattr(fn, "__name__", fn))

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            for g in self._groups:
                for job in list(g.running.values()):
                    act = _loop.heartbeat_due(job, now, self.heartbeat_after)
                    if act == _loop.LEARN:
                        await self._learn_deadline(job)
                    elif act == _loop.TOUCH:
                        await self._touch(job)

    async def _learn_deadline(self, job: Job) -> None:
        try:
            info = await self.redis.execute_command("DELAY.GET", job.queue, job.id)
        except Exception as e:
            self._hook(self.on_error, e, "heartbeat")
            return
        _loop.learned(job, info, time.monotonic(), int(time.time() * 1000))

    async def _touch(self, job: Job) -> None:
        try:
            n = await self.redis.execute_command("DELAY.TOUCH", job.queue, job.id)
        except Exception as e:
            self._hook(self.on_error, e, "heartbeat")
            job._next_touch = time.monotonic() + _loop.TOUCH_RETRY
            return
        _loop.touched(job, bool(n), time.monotonic())
        if not n:
            self.log.warning("delayd: TOUCH of %r: not reserved any more (its ack timeout passed)", job)
