"""What the tests share: the server's address from the environment, clients,
a worker process to kill, and waits bounded in time.

DELAYD_TEST_ADDR (host:port) names a delayd server, DELAYD_TEST_CLUSTER the
comma-separated nodes of a 3-node cluster; a test whose server is not given
is skipped. integration_test/pylib_test.go starts them and runs this suite:

    go test ./integration_test -run TestPythonLibrary -v
    DELAYD_TEST_ADDR=127.0.0.1:6380 PYTHONPATH=clients/python /usr/bin/python3 -m unittest discover clients/python/tests
"""

import os
import subprocess
import sys
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the delayd package, when PYTHONPATH does not name it

import redis  # noqa: E402


ADDR = os.environ.get("DELAYD_TEST_ADDR", "")
CLUSTER = os.environ.get("DELAYD_TEST_CLUSTER", "")


def need_server(cls):
    return unittest.skipUnless(ADDR, "DELAYD_TEST_ADDR names no delayd server")(cls)


def need_cluster(cls):
    return unittest.skipUnless(CLUSTER, "DELAYD_TEST_CLUSTER names no delayd cluster")(cls)


def client(**kw) -> redis.Redis:
    host, port = ADDR.rsplit(":", 1)
    kw.setdefault("decode_responses", True)
    kw.setdefault("socket_timeout", 5)
    return redis.Redis(host=host, port=int(port), **kw)


def queue(name: str) -> str:
    """A queue of its own for each test (the suite shares one server)."""
    return f"{name}:{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_for(what, cond, timeout=15.0, every=0.02):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what() if callable(what) else what}")
        time.sleep(every)


class WorkerProcess:
    """tests/worker_proc.py in a process of its own, its stdout lines
    collected ("started <id>", "done <id> <deliveries>", "exit")."""

    def __init__(self, **env):
        e = dict(os.environ)
        e["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + e.get("PYTHONPATH", "")
        e.update({k: str(v) for k, v in env.items()})
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "worker_proc.py")], env=e,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.err = []
        self.lock = threading.Lock()
        self.readers = [threading.Thread(target=self._read, args=(f, into), daemon=True)
                        for f, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.err))]
        for t in self.readers:
            t.start()

    def _read(self, f, into):
        for line in f:
            with self.lock:
                into.append(line.rstrip("\n"))

    def seen(self, prefix):
        with self.lock:
            return [line for line in self.lines if line.startswith(prefix)]

    def output(self):
        with self.lock:
            return "\n".join(self.lines) + "\n--- stderr ---\n" + "\n".join(self.err[-60:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self.readers:
            t.join(5)
        self.proc.stdout.close()
        self.proc.stderr.close()
