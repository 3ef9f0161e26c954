"""redis-py checks of delayd's client compatibility suite (compat/doc.go).

Run by the Go test as `/usr/bin/python3 checks.py FEATURE` against a server it
started: DELAYD_COMPAT_ADDR is host:port, DELAYD_COMPAT_PASSWORD the
requirepass of the AUTH check's server, DELAYD_COMPAT_TARGET `delayd` or
`redis` (redis-server, to prove a check of plain Redis behaviour is real).
Exit 0: pass; exit 3 after printing `N/A: reason`: this redis-py has no such
feature; anything else: fail. Printing RESTART asks the Go test to restart the
server; it answers with a line on stdin once the server is back.

The cluster checks get every node of a delayd cluster in DELAYD_COMPAT_ADDRS
(comma-separated host:port); printing KILL_LEADER asks the Go test to kill the
leader (SIGKILL), RESTART_KILLED to start it again, PAUSE_LEADER to freeze the
leader for a while (SIGSTOP, SIGCONT), each answered on stdin
(compat/harness_test.go, scriptCheck).
"""

import inspect
import logging
import os
import sys
import threading
import time
import traceback

import redis

HOST, PORT = os.environ["DELAYD_COMPAT_ADDR"].rsplit(":", 1)
PORT = int(PORT)
PASSWORD = os.environ.get("DELAYD_COMPAT_PASSWORD") or None
# The Raft groups the cluster splits its slots over: each node serves each
# group at an address of its own.
GROUPS = int(os.environ.get("DELAYD_COMPAT_GROUPS", "1"))
ADDRS = [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in os.environ.get("DELAYD_COMPAT_ADDRS", "").split(",") if a)]
AGAINST_REDIS = os.environ.get("DELAYD_COMPAT_TARGET") == "redis"


# redis.cluster logs every error it retries with a traceback (log.exception);
# the checks count the errors that reach them instead.
logging.getLogger("redis.cluster").addHandler(logging.NullHandler())
logging.getLogger("redis.cluster").propagate = False


class NotApplicable(Exception):
    pass


def client(**kw):
    """A client with redis-py's defaults, changed only by kw."""
    kw.setdefault("decode_responses", True)
    return redis.Redis(host=HOST, port=PORT, **kw)


def ready(queue, payload):
    """The command that adds a ready job: DELAY.ADD with delay 0, or RPUSH on
    redis-server (delayd defines them as the same thing)."""
    if AGAINST_REDIS:
        return ("RPUSH", queue, payload)
    return ("DELAY.ADD", queue, 0, payload)


def expect(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def raises(what, exc_type, fn):
    try:
        fn()
    except exc_type as e:
        return e
    except Exception as e:  # the wrong exception is a failure too
        raise AssertionError(f"{what}: raised {type(e).__name__}: {e}, want {exc_type.__name__}") from e
    raise AssertionError(f"{what}: no exception, want {exc_type.__name__}")


def check_handshake():
    r = client()
    expect("PING", r.ping(), True)
    r.execute_command(*ready("q", "job"))
    expect("LLEN", r.llen("q"), 1)


def check_resp3():
    if "protocol" not in inspect.signature(redis.Redis.__init__).parameters:
        raise NotApplicable(f"redis-py {redis.__version__} has no RESP3 (protocol=3 came in 5.0)")
    r = client(protocol=3)
    hello = r.execute_command("HELLO", 3)
    expect("HELLO proto", hello.get("proto"), 3)
    expect("HELLO server", hello.get("server"), "redis")
    if not AGAINST_REDIS:
        r.execute_command("DELAY.ADD", "q", 60000, "p", "ID", "j1")
        job = r.execute_command("DELAY.GET", "q", "j1")
        expect("DELAY.GET under RESP3 is a map", isinstance(job, dict), True)
        expect("DELAY.GET state", job.get("state"), "delayed")


def check_auth():
    # redis-py maps NOAUTH to AuthenticationRequiredError by its code; 4.3
    # leaves WRONGPASS a plain ResponseError, its text as the server sent it.
    raises("PING without a password", redis.exceptions.AuthenticationError, lambda: client().ping())
    e = raises("PING with a wrong password", redis.exceptions.ResponseError, lambda: client(password="wrong").ping())
    expect("the error", str(e).split(" ")[0], "WRONGPASS")
    expect("PING with the password", client(password=PASSWORD).ping(), True)


def check_delay():
    r = client()
    add = ("DELAY.ADD", "emails", 60000, "welcome", "ID", "welcome-42")
    expect("DELAY.ADD", r.execute_command(*add), "welcome-42")
    expect("DELAY.ADD retry with the same ID", r.execute_command(*add), None)
    flat = r.execute_command("DELAY.GET", "emails", "welcome-42")
    job = dict(zip(flat[::2], flat[1::2]))
    expect("state", job.get("state"), "delayed")
    expect("payload", job.get("payload"), "welcome")
    flat = r.execute_command("DELAY.STATS", "emails")
    expect("DELAY.STATS delayed", dict(zip(flat[::2], flat[1::2])).get("delayed"), 1)
    expect("DELAY.CANCEL", r.execute_command("DELAY.CANCEL", "emails", "welcome-42"), 1)
    expect("DELAY.GET after CANCEL", r.execute_command("DELAY.GET", "emails", "welcome-42"), None)
    raw = client(decode_responses=False)
    payload = b"\x00\xff\r\nbytes"
    raw.execute_command("DELAY.ADD", "bin", 0, payload)
    popped = raw.execute_command("DELAY.POP", "bin", 1)
    expect("DELAY.POP payload", popped[2], payload)


def fired_by(job_id, name):
    prefix = name + ":"
    if not job_id.startswith(prefix):
        raise AssertionError(f"fired job id {job_id!r}, want {prefix}<fire unix ms>")
    if int(job_id[len(prefix):]) > int(time.time() * 1000):
        raise AssertionError(f"fired job {job_id!r} handed out before its fire time")


def check_schedule():
    r = client(socket_timeout=8)
    expect("DELAY.SCHEDULE EVERY", r.execute_command("DELAY.SCHEDULE", "ticks", "tick", "EVERY", 100, "hello"), "OK")
    expect("DELAY.SCHEDULE CRON", r.execute_command(
        "DELAY.SCHEDULE", "reports", "daily", "CRON", "0 9 * * *", "TZ", "Europe/Berlin", "report"), "OK")
    listed = r.execute_command("DELAY.SCHEDULES", "ticks")
    expect("DELAY.SCHEDULES count", len(listed), 1)
    entry = listed[0]
    if not isinstance(entry, dict):
        entry = dict(zip(entry[::2], entry[1::2]))
    expect("DELAY.SCHEDULES name", entry.get("name"), "tick")
    job = r.execute_command("DELAY.POP", "ticks", 5)
    expect("fired payload", job[2], "hello")
    fired_by(job[1], "tick")
    expect("DELAY.UNSCHEDULE", r.execute_command("DELAY.UNSCHEDULE", "ticks", "tick"), 1)

    unique = ("DELAY.ADD", "orders", 60000, "o1", "ID", "order-1", "UNIQUE", 60000)
    expect("DELAY.ADD UNIQUE", r.execute_command(*unique), "order-1")
    expect("DELAY.PROMOTE", r.execute_command("DELAY.PROMOTE", "orders", "order-1"), 1)
    expect("promoted id", r.execute_command("DELAY.POP", "orders", 1)[1], "order-1")
    expect("re-add of a finished UNIQUE id", r.execute_command(*unique), None)
    r.execute_command("DELAY.ADD", "orders", 0, "o2", "ID", "order-2")
    expect("DELAY.RESCHEDULE", r.execute_command("DELAY.RESCHEDULE", "orders", "order-2", 60000), 1)
    flat = r.execute_command("DELAY.GET", "orders", "order-2")
    got = flat if isinstance(flat, dict) else dict(zip(flat[::2], flat[1::2]))
    expect("state after RESCHEDULE", got.get("state"), "delayed")

    r.execute_command("DELAY.ADD", "mail", 0, "low")
    r.execute_command("DELAY.ADD", "mail", 0, "high", "PRIORITY", 9)
    expect("DELAY.LIMIT", r.execute_command("DELAY.LIMIT", "mail", "CONCURRENCY", 5, "RATE", 100, 1000), "OK")
    key, jobs = r.execute_command("DELAY.MPOP", 1, 1, "mail", "COUNT", 2)
    expect("DELAY.MPOP key", key, "mail")
    expect("DELAY.MPOP payloads", [p for _, p in jobs], ["high", "low"])


def check_pipeline():
    r = client()
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.execute_command(*ready("q", f"job-{i}"))
    expect("replies", len(p.execute()), 100)
    expect("LLEN after the pipeline", r.llen("q"), 100)


def check_transaction():
    r = client()
    # pipeline() is a MULTI/EXEC transaction by default: the case the issue
    # names, where a server without MULTI ran every command anyway.
    p = r.pipeline()
    for i in range(100):
        p.execute_command(*ready("q", f"job-{i}"))
    expect("replies", len(p.execute()), 100)
    expect("LLEN after the transaction", r.llen("q"), 100)

    p = r.pipeline()
    p.execute_command(*ready("aborted", "job"))
    p.execute_command("RPUSH", "aborted")  # wrong arity: refused while queuing
    e = raises("a transaction with a wrong-arity command", redis.exceptions.ResponseError, p.execute)
    expect("the error names the refused command", "wrong number of arguments" in str(e), True)
    expect("LLEN after EXECABORT (nothing may run)", r.llen("aborted"), 0)

    other = client()
    with r.pipeline() as p:
        p.watch("watched")
        other.execute_command(*ready("watched", "theirs"))
        p.multi()
        p.execute_command(*ready("watched", "mine"))
        raises("EXEC after the watched queue changed", redis.exceptions.WatchError, p.execute)
    expect("LLEN after the failed EXEC", r.llen("watched"), 1)


def check_blpop():
    worker, producer = client(), client()

    def produce():
        time.sleep(0.3)
        producer.execute_command(*ready("q", "job"))

    start = time.monotonic()
    threading.Thread(target=produce, daemon=True).start()
    expect("BLPOP", worker.blpop("q", timeout=5), ("q", "job"))
    took = time.monotonic() - start
    if took < 0.25:
        raise AssertionError(f"BLPOP returned after {took:.3f}s, before the job was added")
    expect("BLPOP of an empty queue", worker.blpop("empty", timeout=1), None)


def check_popack():
    # DELAY.POP through execute_command is cut by socket_timeout (redis-py
    # stretches it only for its own blocking helpers), so the worker pops
    # with 1 s, well below its 3 s read timeout (examples/python/raw_worker.py).
    r = client(socket_timeout=3)
    start = time.monotonic()
    job_id = r.execute_command("DELAY.ADD", "q", 1500, "job", "ACKTIMEOUT", 30000)
    job, empty = None, 0
    while job is None:
        job = r.execute_command("DELAY.POP", "q", 1)
        if job is None:
            empty += 1
    took = time.monotonic() - start
    if took < 1.5:
        raise AssertionError(f"the job came after {took:.3f}s, before its delay of 1.5 s")
    expect("empty pops before the job", empty > 0, True)
    expect("DELAY.POP", list(job), ["q", job_id, "job"])
    flat = r.execute_command("DELAY.GET", "q", job_id)
    expect("state after the pop", dict(zip(flat[::2], flat[1::2])).get("state"), "reserved")
    expect("DELAY.ACK", r.execute_command("DELAY.ACK", "q", job_id), 1)
    expect("DELAY.GET after ACK", r.execute_command("DELAY.GET", "q", job_id), None)


def check_lmove():
    r = client()
    r.execute_command(*ready("q", "job-1"))
    r.execute_command(*ready("q", "job-2"))
    expect("BLMOVE", r.blmove("q", "q:processing", 1, "LEFT", "RIGHT"), "job-1")
    expect("RPOPLPUSH", r.rpoplpush("q", "q:processing"), "job-2")
    expect("LLEN q:processing", r.llen("q:processing"), 2)
    expect("LREM job-1", r.lrem("q:processing", 1, "job-1"), 1)
    expect("LREM job-2", r.lrem("q:processing", 1, "job-2"), 1)
    expect("EXISTS when done", r.exists("q", "q:processing"), 0)


def check_scan():
    r = client()
    for q in ("jobs:a", "jobs:b", "other"):
        r.execute_command(*ready(q, "job"))
    expect("SCAN MATCH jobs:*", sorted(r.scan_iter(match="jobs:*", count=1)), ["jobs:a", "jobs:b"])
    expect("KEYS jobs:*", sorted(r.keys("jobs:*")), ["jobs:a", "jobs:b"])
    expect("DBSIZE", r.dbsize(), 3)


def check_clientinfo():
    r = client(client_name="compat-worker")
    info = r.client_info()  # redis-py parses Redis's fields: KeyError without them
    expect("name", info.get("name"), "compat-worker")
    expect("id > 0", int(info["id"]) > 0, True)
    names = [c.get("name") for c in r.client_list()]
    expect("CLIENT LIST has this client", "compat-worker" in names, True)


def check_cache():
    params = inspect.signature(redis.Redis.__init__).parameters
    if "cache_config" not in params:
        raise NotApplicable(f"redis-py {redis.__version__} has no client-side cache (cache_config came in 5.1)")
    from redis.cache import CacheConfig

    r = client(protocol=3, cache_config=CacheConfig())
    other = client()
    expect("LLEN", r.llen("q"), 0)
    expect("cached LLEN", r.llen("q"), 0)
    expect("entries in the cache", r.get_cache().size >= 1, True)
    other.execute_command(*ready("q", "job"))
    deadline = time.monotonic() + 3
    while r.llen("q") != 1:
        if time.monotonic() > deadline:
            raise AssertionError("cached LLEN still 0 3 s after another client added a job: no invalidation")
        time.sleep(0.02)


def check_tls():
    """Mutual TLS: DELAYD_COMPAT_ADDR is the TLS port, DELAYD_COMPAT_TLS_CA,
    _CERT and _KEY the CA and the client's PEM files."""
    ca, cert, key = (os.environ["DELAYD_COMPAT_TLS_" + k] for k in ("CA", "CERT", "KEY"))
    r = client(ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key)
    expect("PING", r.ping(), True)
    expect("DELAY.ADD", r.execute_command("DELAY.ADD", "q", 0, "over-tls", "ID", "tls-1"), "tls-1")
    expect("DELAY.POP", r.execute_command("DELAY.POP", "q", 1), ["q", "tls-1", "over-tls"])
    e = raises("PING without a client certificate", redis.exceptions.ConnectionError,
               lambda: client(ssl=True, ssl_ca_certs=ca, socket_timeout=5).ping())
    print(f"without a client certificate: {e!r}", file=sys.stderr)


def check_reconnect():
    r = client()
    r.execute_command(*ready("q", "job"))
    print("RESTART", flush=True)
    sys.stdin.readline()
    expect("LLEN after the restart", r.llen("q"), 1)


def note(line):
    """Writes a line to stderr in one write, so that it does not interleave
    with the stdout lines the Go test copies into the same log."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def redis_version():
    return tuple(int(x) for x in redis.__version__.split(".")[:2])


def ask_go(line):
    """Asks the Go test for a step (KILL_LEADER, RESTART_KILLED) and returns
    its answer."""
    print(line, flush=True)
    answer = sys.stdin.readline().strip()
    if answer.startswith("error:") or not answer:
        raise AssertionError(f"{line}: {answer or 'no answer'}")
    return answer


def cluster_client(addrs):
    """redis-py's RedisCluster with its defaults, the startup nodes the
    addresses given: a command that met a ConnectionError, TimeoutError or
    CLUSTERDOWN is tried again (cluster_error_retry_attempts, 3), each time
    after redis-py re-read its slot map (CLUSTER SLOTS) on its own; before
    that, a refused connection is retried 5 times 0.25 s apart. MOVED is
    followed without counting, TRYAGAIN is retried within the request's 16
    tries. The README names the one line 4.3 needs, below."""
    from redis.cluster import ClusterNode, RedisCluster

    if redis_version() < (4, 4):
        # redis-py 4.3's NodesManager.initialize, re-reading the slot map
        # after a connection error, deep-copies its connection kwargs, which
        # hold RedisCluster.on_connect, a bound method: the copy reaches the
        # client's locks and fails with "cannot pickle '_thread.lock'
        # object" (wrapped in RedisClusterException "ERROR sending 'cluster
        # slots' command"), every time, so a 4.3 client never finds the new
        # leader. redis-py 4.4.0 dropped that deepcopy (redis-py #2377); on
        # 4.3 this one line is the workaround a user needs: the client copies
        # as itself. (4.3 has a second failover bug, fixed in 4.4.2 by
        # redis-py #2549: a replica promoted to master keeps its replica role
        # in the node cache, so the re-read raises IndexError from
        # get_nodes_by_server_type(PRIMARY)[0] once; the caller's retry gets
        # through, as the workload's does.)
        RedisCluster.__deepcopy__ = lambda self, memo: self
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in addrs], decode_responses=True)


def leader_addr():
    """The node whose INFO replication says role:master."""
    for h, p in ADDRS:
        try:
            if redis.Redis(host=h, port=p, socket_timeout=2).info("replication").get("role") == "master":
                return (h, p)
        except redis.exceptions.RedisError:
            pass
    raise AssertionError("no node says role:master")


def check_cluster():
    # Given one follower only, the client finds the leader from the slot map.
    lead = leader_addr()
    seed = next(a for a in ADDRS if a != lead)
    rc = cluster_client([seed])
    expect("DELAY.ADD", rc.execute_command("DELAY.ADD", "orders", 0, "hello", "ID", "order-1", "ACKTIMEOUT", 30000), "order-1")
    flat = rc.execute_command("DELAY.GET", "orders", "order-1")
    expect("DELAY.GET state", dict(zip(flat[::2], flat[1::2])).get("state"), "ready")
    expect("DELAY.POP", list(rc.execute_command("DELAY.POP", "orders", 1)), ["orders", "order-1", "hello"])
    expect("DELAY.ACK", rc.execute_command("DELAY.ACK", "orders", "order-1"), 1)
    # The cluster pipeline groups the commands by node: 20 queues, 20 slots.
    p = rc.pipeline()
    for i in range(20):
        p.execute_command("DELAY.ADD", f"queue-{i}", 0, "job")
    expect("pipeline replies", len(p.execute()), 20)
    for i in range(20):
        expect(f"LLEN queue-{i}", rc.llen(f"queue-{i}"), 1)
    expect("the client knows every node", len(rc.get_nodes()), len(ADDRS) * GROUPS)


RESUME_BOUND = 15  # seconds
DRAIN_BOUND = 9


def wait_for(timeout, what, cond):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout} s: {what()}")
        time.sleep(0.05)


def check_failover():
    """The failover workload of compat/cluster_test.go, step by step: a
    producer and a consumer thread, each with its own RedisCluster."""
    lock = threading.Lock()
    sent, delay, acked, delivered, errs, first_errs, early = {}, {}, {}, {}, {}, [], []
    stop_producer, stop_consumer = threading.Event(), threading.Event()

    def errored(op, e):
        kind = f"{op} {type(e).__name__}"
        with lock:
            errs[kind] = errs.get(kind, 0) + 1
            if len(first_errs) < 20:
                line = f"{time.strftime('%H:%M:%S')} {op}: {type(e).__name__}: {e}"
                if not isinstance(e, redis.exceptions.RedisError):  # a bug: where
                    line += "\n" + "".join(traceback.format_tb(e.__traceback__)[-4:])
                first_errs.append(line)

    def produce():
        rc = cluster_client(ADDRS)
        i = 0
        while not stop_producer.is_set():
            job, d = f"job-{i}", i * 137 % 2001
            with lock:
                sent[job], delay[job] = time.monotonic(), d
            while not stop_producer.is_set():
                try:
                    # The id, or None: a job with that ID is already there
                    # (an earlier try went through); both acknowledge it.
                    rc.execute_command("DELAY.ADD", "jobs", d, job, "ID", job, "ACKTIMEOUT", 5000)
                    with lock:
                        acked[job] = time.monotonic()
                    break
                except Exception as e:
                    errored("DELAY.ADD", e)
                    time.sleep(0.1)
            time.sleep(0.02)
            i += 1

    def consume():
        rc = cluster_client(ADDRS)
        while not stop_consumer.is_set():
            try:
                got = rc.execute_command("DELAY.POP", "jobs", 1)
            except Exception as e:
                errored("DELAY.POP", e)
                time.sleep(0.1)
                continue
            if got is None:
                continue
            job, now = got[1], time.monotonic()
            with lock:
                if job not in delivered:
                    delivered[job] = now
                    if job in sent and now < sent[job] + delay[job] / 1000:
                        early.append(f"{job} (delay {delay[job]} ms) after {now - sent[job]:.3f} s")
            try:
                rc.execute_command("DELAY.ACK", "jobs", job)
            except Exception as e:
                errored("DELAY.ACK", e)  # the job comes again after its ack timeout

    def count(since):
        with lock:
            return sum(t >= since for t in acked.values()), sum(t >= since for t in delivered.values())

    def missing():
        with lock:
            return sorted(set(acked) - set(delivered))

    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
    for t in threads:
        t.start()
    try:
        start = time.monotonic()
        wait_for(10, lambda: f"{count(start)} adds acknowledged and jobs delivered, want 25 and 5 before the kill",
                 lambda: count(start)[0] >= 25 and count(start)[1] >= 5)
        killed = ask_go("KILL_LEADER")
        kill = time.monotonic()
        note(f"killed the leader {killed}")
        # 200 ms: a reply sent by the old leader just before it died is not
        # a resumption (no election ends that fast).
        wait_for(RESUME_BOUND, lambda: f"since the kill (acknowledged adds, deliveries) = {count(kill + 0.2)}, want both > 0",
                 lambda: min(count(kill + 0.2)) > 0)
        note(f"resumed {time.monotonic() - kill:.3f} s after the kill")
        ask_go("RESTART_KILLED")
        back = time.monotonic()
        wait_for(10, lambda: f"{count(back)[0]} adds acknowledged since the restart, want 10",
                 lambda: count(back)[0] >= 10)
        paused = ask_go("PAUSE_LEADER")
        cont = time.monotonic()
        note(f"paused the leader {paused}")
        wait_for(RESUME_BOUND, lambda: f"since the paused leader went on (acknowledged adds, deliveries) = {count(cont)}, want 10 and 1",
                 lambda: count(cont)[0] >= 10 and count(cont)[1] >= 1)
        stop_producer.set()
        threads[0].join(15)
        wait_for(DRAIN_BOUND, lambda: f"{len(missing())} acknowledged adds not delivered: {missing()}",
                 lambda: not missing())
    finally:
        stop_producer.set()
        stop_consumer.set()
        for t in threads:
            t.join(5)
        with lock:
            note(f"adds acknowledged: {len(acked)}, jobs delivered: {len(delivered)}, errors the client let through: {errs}")
            for line in first_errs:
                note("  " + line)
    if early:
        raise AssertionError(f"jobs delivered before their delay: {early}")


def check_writer():
    """The writer of compat/failover_test.go: adds jobs {fo}py-0, {fo}py-1,
    ... (delayed an hour, each with its ID, a failed add retried with it)
    through RedisCluster, and prints "ack <id>" for each the server
    acknowledged and "err <kind>" for a failure, until it is killed. With
    DELAYD_FAILOVER_SETTINGS=defaults the client has redis-py's defaults
    only; otherwise those of cluster_client, which the README names."""
    from redis.cluster import ClusterNode, RedisCluster

    if os.environ.get("DELAYD_FAILOVER_SETTINGS") == "defaults":
        rc = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in ADDRS], decode_responses=True)
    else:
        rc = cluster_client(ADDRS)
    i = 0
    while True:
        job = f"py-{i}"
        try:
            rc.execute_command("DELAY.ADD", "{fo}py", 3600000, "x", "ID", job)
            print(f"ack {job}", flush=True)
            i += 1
        except Exception as e:
            print(f"err {type(e).__name__}: {str(e)[:120]}", flush=True)
            time.sleep(0.05)
        time.sleep(0.01)


def main():
    name = sys.argv[1]
    check = globals().get("check_" + name)
    if check is None:
        print(f"no such check: {name}", file=sys.stderr)
        sys.exit(2)
    print(f"redis-py {redis.__version__}: {name}", file=sys.stderr)
    try:
        check()
    except NotApplicable as e:
        print(f"N/A: {e}", flush=True)
        sys.exit(3)
    except Exception:
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
