"""The worker across a failover: a 3-node cluster's leader killed (SIGKILL)
while a worker process works its queue and a producer adds to it. Every job
whose add was acknowledged is completed; a job completed twice must have
been delivered again after its ack timeout (at-least-once: its ack, or the
handler itself, was held up by the failover past the reservation), never
handed out twice in one delivery: no two runs of a job saw the same live
reservation.

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
        w = WorkerProcess(DELAYD_TEST_CLUSTER=CLUSTER, QUEUE=q, SLEEP=0.005, CONCURRENCY=4, DELIVERIES=1,
                          ACK_TIMEOUT_MS=3000)
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
            unknown = 0
            for job, d in doubled.items():
                # Each run's deliveries as read while its own reservation
                # held (-1: the read came after it ended, or failed through
                # the failover): two runs of one delivery would read the same
                # one. The done lines' order is not the deliveries': a run
                # held up by the failover ends after the next delivery's.
                known = [n for n in d if n > 0]
                unknown += len(d) - len(known)
                self.assertEqual(len(known), len(set(known)), f"{job} done twice in one delivery: deliveries {d}")
            print(f"{len(acked)} adds acknowledged, {len(runs)} jobs done, {len(doubled)} done again after "
                  f"an ack timeout ({unknown} of their runs' deliveries unknown); producer errors {len(errors)} "
                  f"{errors[:3]}; deliveries of each run of some {dict(list(doubled.items())[:5])}", file=sys.stderr)
            w.proc.send_signal(signal.SIGTERM)
            self.assertEqual(w.proc.wait(40), 0, w.output())
        finally:
            stop.set()
            w.close()


@need_cluster
class ClusterSlotsTest(unittest.TestCase):
    def test_workers_on_queues_of_two_slots(self):
        """Queues of two hash slots, each fetched from its slot's node: the
        sync and the asyncio worker each do every job once."""
        import asyncio

        import redis.asyncio

        import delayd.aio

        rc = delayd.connect_cluster(CLUSTER, decode_responses=True, socket_timeout=3)
        c = delayd.Client(rc)
        tag = uuid.uuid4().hex[:6]
        qs = [f"{{a{tag}}}:q", f"{{b{tag}}}:q"]
        self.assertNotEqual(rc.keyslot(qs[0]), rc.keyslot(qs[1]))
        for q in qs:
            for i in range(30):
                c.add(q, f"p{i}", id=f"s{i}", ack_timeout=30)
        seen = []
        w = delayd.Worker(rc, concurrency=4)
        for q in qs:
            w.handle(q, lambda job: seen.append((job.queue, job.id)))
        t = threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True)
        t.start()
        try:
            wait_for(lambda: f"{len(seen)} of 60 done", lambda: len(seen) == 60)
            wait_for("not acked", lambda: all(c.stats(q)["reserved"] == 0 and c.stats(q)["ready"] == 0 for q in qs))
        finally:
            w.stop()
            t.join(10)
        self.assertEqual(sorted(seen), sorted((q, f"s{i}") for q in qs for i in range(30)))

        for q in qs:
            for i in range(30):
                c.add(q, f"p{i}", id=f"a{i}", ack_timeout=30)
        aseen = []

        async def main():
            h, p = CLUSTER.split(",")[0].rsplit(":", 1)
            arc = redis.asyncio.cluster.RedisCluster(host=h, port=int(p), decode_responses=True)
            aw = delayd.aio.Worker(arc, concurrency=4)

            async def handle(job):
                aseen.append((job.queue, job.id))
                if len(aseen) == 60:
                    aw.stop()

            for q in qs:
                aw.handle(q, handle)
            await asyncio.wait_for(aw.run(install_signals=False), 30)
            ac = delayd.aio.Client(arc)
            for q in qs:
                st = await ac.stats(q)
                self.assertEqual((st.get("ready", 0), st.get("reserved", 0)), (0, 0), st)
            await arc.close()

        asyncio.run(main())
        self.assertEqual(sorted(aseen), sorted((q, f"a{i}") for q in qs for i in range(30)))
