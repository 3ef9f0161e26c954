"""The worker across a failover: a 3-node cluster's leader killed (SIGKILL)
while a worker process works its queue and a producer adds to it. Every job
whose add was acknowledged is completed; a job completed twice must have
been delivered again after its ack timeout (its deliveries went up), never
handed out twice in one delivery.

The leader is killed by the Go test that started the cluster
(integration_test/pylib_test.go) when DELAYD_TEST_KILL=go: the test prints
"DELAYD_TEST KILL_LEADER" and reads the killed node's address from stdin.
Otherwise it kills the leader itself, by the process id INFO gives (the
nodes run on this machine)."""

import logging
import os
import signal
import sys
import threading
import time
import unittest
import uuid

from support import CLUSTER, WorkerProcess, need_cluster, wait_for  # first: it finds delayd

import redis

import delayd

logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)  # it logs each retried error with a traceback


def leader_addr():
    for a in CLUSTER.split(","):
        h, p = a.rsplit(":", 1)
        try:
            r = redis.Redis(host=h, port=int(p), socket_timeout=2)
            if r.info("replication").get("role") == "master":
                return a, r.info("server").get("process_id")
        except redis.RedisError:
            pass
    raise AssertionError("no node says role:master")


def kill_leader():
    if os.environ.get("DELAYD_TEST_KILL") == "go":
        print("DELAYD_TEST KILL_LEADER", flush=True)
        answer = sys.stdin.readline().strip()
        if not answer or answer.startswith("error"):
            raise AssertionError(f"KILL_LEADER: {answer or 'no answer'}")
        return answer
    addr, pid = leader_addr()
    os.kill(int(pid), signal.SIGKILL)
    return addr


@need_cluster
class FailoverTest(unittest.TestCase):
    def test_leader_killed_under_load(self):
        rc = delayd.connect_cluster(CLUSTER, decode_responses=True, socket_timeout=3)
        c = delayd.Client(rc)
        q = "{pyfo}:" + uuid.uuid4().hex[:8]
        w = WorkerProcess(DELAYD_TEST_CLUSTER=CLUSTER, QUEUE=q, SLEEP=0.005, CONCURRENCY=4, DELIVERIES=1)
        acked, errors, stop = [], [], threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                job = f"job-{i}"
                try:
                    # The id, or None: an earlier try went through.
                    c.add(q, "x", id=job, ack_timeout=3)
                    acked.append(job)
                    i += 1
                    time.sleep(0.005)
                except Exception as e:
                    errors.append(f"{type(e).__name__}: {e}")
                    time.sleep(0.1)

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        try:
            wait_for(lambda: "the worker did no job before the kill:\n" + w.output(),
                     lambda: len(w.seen("done")) >= 50, timeout=30)
            killed = kill_leader()
            at = len(w.seen("done"))
            print(f"killed the leader {killed} after {at} jobs done", file=sys.stderr)
            wait_for(lambda: "the worker did not resume:\n" + w.output(),
                     lambda: len(w.seen("done")) >= at + 100 and len(acked) > at + 100, timeout=45)
            stop.set()
            t.join(15)

            def missing():
                done = {line.split()[1] for line in w.seen("done")}
                return [j for j in acked if j not in done]

            wait_for(lambda: f"{len(missing())} of {len(acked)} acknowledged adds never done: {missing()[:10]}",
                     lambda: not missing(), timeout=45)
            runs = {}
            for line in w.seen("done"):
                _, job, deliveries = line.split()
                runs.setdefault(job, []).append(int(deliveries))
            doubled = {j: d for j, d in runs.items() if len(d) > 1}
            for job, d in doubled.items():
                self.assertEqual(d, sorted(set(d)), f"{job} done twice in one delivery: deliveries {d}")
                self.assertGreater(min(d), 0, f"{job}: deliveries unknown: {d}")
            print(f"{len(acked)} adds acknowledged, {len(runs)} jobs done, {len(doubled)} done again after "
                  f"an ack timeout; producer errors {len(errors)} {errors[:3]}", file=sys.stderr)
            w.proc.send_signal(signal.SIGTERM)
            self.assertEqual(w.proc.wait(40), 0, w.output())
        finally:
            stop.set()
            w.close()
