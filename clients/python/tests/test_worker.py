"""The worker contract's tests against a real server (support.py says how
to run them): a worker killed mid-job, a job outliving its ack timeout
under its heartbeat, retries with the policy's delays into the dead-letter
queue, and a graceful stop on SIGTERM."""

import os
import signal
import threading
import time
import unittest

from support import WorkerProcess, client, need_server, now_ms, queue, wait_for  # first: it finds delayd

import delayd


def run_worker(w):
    t = threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True)
    t.start()
    return t


@need_server
class KillTest(unittest.TestCase):
    def test_kill9_mid_job_redelivered_once(self):
        """A worker killed (SIGKILL) mid-job: the job comes back after its
        ack timeout, not before, and once."""
        r = client()
        c = delayd.Client(r)
        q = queue("kill")
        c.add(q, "work", id="job-1", ack_timeout=1.5)
        p = WorkerProcess(DELAYD_TEST_ADDR=os.environ["DELAYD_TEST_ADDR"], QUEUE=q, SLEEP=3600)
        try:
            wait_for(lambda: "the worker never started job-1:\n" + p.output(), lambda: p.seen("started job-1"))
            job = c.get(q, "job-1")
            self.assertEqual(job["state"], "reserved")
            deadline = job["ack_deadline"]
            p.proc.send_signal(signal.SIGKILL)
            p.proc.wait()
        finally:
            p.close()

        runs = []
        w = delayd.Worker(r)

        @w.handler(q)
        def again(j):
            runs.append((now_ms(), c.get(q, j.id)))

        t = run_worker(w)
        try:
            wait_for("job-1 not delivered again", lambda: runs, timeout=10)
            # Once: the second delivery is acked, so there is no third.
            wait_for("job-1 not acked", lambda: c.get(q, "job-1") is None, timeout=5)
        finally:
            w.stop()
            t.join(10)
        self.assertEqual(len(runs), 1, runs)
        at, info = runs[0]
        # 1 ms: the server reads its own millisecond.
        self.assertGreaterEqual(at, deadline - 1, "delivered again before the killed worker's ack deadline")
        self.assertEqual(info["deliveries"], 2)


@need_server
class HeartbeatTest(unittest.TestCase):
    def test_job_3x_its_ack_timeout_not_redelivered(self):
        """A job that runs 3.2x its ack timeout keeps its reservation
        while the heartbeat TOUCHes it; a second worker on the queue never
        gets it."""
        r = client()
        c = delayd.Client(r)
        q = queue("beat")
        c.add(q, "slow", id="slow-1", ack_timeout=3)
        starts = []
        w1, w2 = delayd.Worker(r), delayd.Worker(r)

        stats = []

        def slow(j):
            starts.append(time.monotonic())
            time.sleep(9.5)
            stats.append(c.stats(q))

        w1.handle(q, slow)
        t1 = run_worker(w1)
        wait_for("w1 did not take slow-1", lambda: starts)
        w2.handle(q, slow)  # would take it the moment its reservation expired
        t2 = run_worker(w2)
        try:
            wait_for("slow-1 was not acked", lambda: c.get(q, "slow-1") is None, timeout=15)
        finally:
            w1.stop()
            w2.stop()
            t1.join(10)
            t2.join(10)
        self.assertEqual(len(starts), 1, "slow-1 was delivered again while its heartbeat ran")
        st = stats[0]  # at the handler's end: an empty queue has no counters
        self.assertEqual((st["expired"], st["redeliveries"], st["reserved"]), (0, 0, 1), st)
        self.assertEqual(w1.counts["acks_lost"], 0)


@need_server
class RetryTest(unittest.TestCase):
    def test_failing_job_retried_with_policy_then_dead_lettered(self):
        """Each failure is a NACK whose due time is the policy's delay after
        the failure; at its RETRY limit the job goes to its dead-letter queue
        with the exception as its reason."""
        r = client()
        c = delayd.Client(r)
        q, dlq = queue("retry"), queue("dead")
        c.add(q, "bad", id="bad-1", retry=2, dead_letter=dlq, ack_timeout=30)
        seen = []  # (deliveries, ms before the raise, job info after the NACK, ms then)
        raised = {}

        def policy(deliveries, exc):
            return 0.4 * deliveries

        def failed(job, exc, retry_in):
            seen.append((retry_in, raised["at"], c.get(q, job.id), now_ms()))

        w = delayd.Worker(r, backoff=policy, on_job_failed=failed)

        @w.handler(q)
        def boom(job):
            raised["at"] = now_ms()
            raise ValueError("bad input 42")

        t = run_worker(w)
        try:
            wait_for(lambda: f"not dead-lettered: {seen}", lambda: c.get(dlq, "bad-1"), timeout=10)
            wait_for("three failures", lambda: len(seen) == 3)
        finally:
            w.stop()
            t.join(10)
        for n, (retry_in, before, info, after) in enumerate(seen[:2], start=1):
            self.assertAlmostEqual(retry_in, 0.4 * n)
            self.assertEqual(info["deliveries"], n)
            self.assertEqual(info["state"], "delayed")
            self.assertEqual(info["error"], "ValueError: bad input 42")
            # 1 ms either side: the server's clock reads its own millisecond.
            self.assertGreaterEqual(info["due"], before + 400 * n - 1, f"failure {n}: due before the policy's delay")
            self.assertLessEqual(info["due"], after + 400 * n + 1, f"failure {n}: due after the policy's delay")
        self.assertIsNone(seen[2][2], "after its last try the job left its queue")
        dead = c.get(dlq, "bad-1")
        self.assertEqual(dead["error"], "ValueError: bad input 42")
        self.assertEqual(dead["payload"], "bad")
        self.assertEqual(w.counts["failed"], 3)

    def test_skip_retry_acks(self):
        r = client()
        c = delayd.Client(r)
        q = queue("skip")
        c.add(q, "x", id="s-1", ack_timeout=30)
        got = []
        w = delayd.Worker(r, on_job_failed=lambda j, e, d: got.append((j.id, type(e).__name__, d)))

        @w.handler(q)
        def skip(job):
            raise delayd.SkipRetry("malformed, dropping")

        t = run_worker(w)
        try:
            wait_for("not discarded", lambda: got)
            wait_for("not acked", lambda: c.get(q, "s-1") is None)
        finally:
            w.stop()
            t.join(10)
        self.assertEqual(got, [("s-1", "SkipRetry", None)])
        self.assertEqual(c.stats(q)["nacks"], 0)

    def test_default_backoff(self):
        b = delayd.exponential_backoff(jitter=False)
        e = ValueError()
        self.assertEqual([b(n, e) for n in (1, 2, 3, 13, 100)], [1, 2, 4, 3600, 3600])
        j = delayd.exponential_backoff()
        for n in (1, 4, 20):
            for _ in range(50):
                self.assertTrue(0 <= j(n, e) <= min(3600, 2 ** (n - 1)))

    def test_error_text_cut_to_1k(self):
        t = delayd.error_text(ValueError("é" * 2000))
        self.assertLessEqual(len(t.encode()), 1024)
        self.assertTrue(t.startswith("ValueError: é"))
        self.assertEqual(delayd.error_text(KeyError()), "KeyError")


@need_server
class StopTest(unittest.TestCase):
    def test_sigterm_finishes_running_takes_nothing_more(self):
        """SIGTERM: the two running jobs finish and are acked, no other job
        is taken, the process exits 0."""
        self.sigterm(aio=False)

    def test_aio_sigterm_finishes_running_takes_nothing_more(self):
        """The same with delayd.aio.Worker: run() installs the handler on the
        loop."""
        self.sigterm(aio=True)

    def sigterm(self, aio):
        r = client()
        c = delayd.Client(r)
        q = queue("stop")
        for i in range(5):
            c.add(q, "x", id=f"j{i}", ack_timeout=30)
        p = WorkerProcess(DELAYD_TEST_ADDR=os.environ["DELAYD_TEST_ADDR"], QUEUE=q, SLEEP=1.5, CONCURRENCY=2,
                          AIO=int(aio))
        try:
            started = wait_for(lambda: p.output(), lambda: len(p.seen("started")) == 2 and p.seen("started"))
            p.proc.send_signal(signal.SIGTERM)
            code = p.proc.wait(20)
        finally:
            p.close()
        self.assertEqual(code, 0, p.output())
        self.assertEqual(len(p.seen("started")), 2, p.output())
        self.assertEqual(len(p.seen("done")), 2, p.output())
        self.assertEqual(p.seen("exit"), ["exit"], p.output())
        for line in started:
            self.assertIsNone(c.get(q, line.split()[1]), f"{line}: not acked")
        st = c.stats(q)
        self.assertEqual((st["ready"], st["reserved"], st["deliveries"]), (3, 0, 2), st)

    def test_stop_deadline_gives_back_running_job(self):
        r = client()
        c = delayd.Client(r)
        q = queue("deadline")
        c.add(q, "x", id="long-1", ack_timeout=60)
        flags = []
        w = delayd.Worker(r, shutdown_timeout=0.5)

        @w.handler(q)
        def long(job):
            while not job.stopping:
                time.sleep(0.01)
            flags.append(job.stopping)

        t = run_worker(w)
        wait_for("not started", lambda: (c.get(q, "long-1") or {}).get("state") == "reserved")
        w.stop()
        t.join(10)
        info = c.get(q, "long-1")
        self.assertEqual((info["state"], info.get("error")), ("ready", "worker shutting down"), info)
        wait_for("the handler was not told to stop", lambda: flags == [True], timeout=2)


@need_server
class FetchTest(unittest.TestCase):
    def test_batches_by_free_slots_and_acks_with_next_fetch(self):
        """Fast jobs are fetched as many as there are free slots, and each
        is acked."""
        r = client()
        c = delayd.Client(r)
        q = queue("batch")
        p = r.pipeline(transaction=False)
        for i in range(500):
            p.execute_command("DELAY.ADD", q, 0, f"p{i}", "ID", f"b{i}", "ACKTIMEOUT", 30000)
        p.execute()
        seen = []
        lock = threading.Lock()
        w = delayd.Worker(r, concurrency=4)

        @w.handler(q)
        def fast(job):
            with lock:
                seen.append(job.id)

        t = run_worker(w)
        try:
            wait_for(lambda: f"{len(seen)} jobs seen", lambda: len(seen) == 500)
            # Acked: an empty queue's stats are all 0.
            wait_for(lambda: f"{c.stats(q)}", lambda: not any(c.stats(q).values()))
        finally:
            w.stop()
            t.join(10)
        self.assertEqual(sorted(seen), sorted(f"b{i}" for i in range(500)))
        self.assertEqual(w.counts["done"], 500)

    def test_acks_of_jobs_due_one_by_one_ride_with_the_fetch(self):
        """Jobs that come due one at a time, each taken by a fetch parked
        on the queue: the handler ends before the next fetch goes out, and
        its ack rides with it instead of going alone."""
        r = client()
        q = queue("onebyone")
        base = now_ms() + 300
        p = r.pipeline(transaction=False)
        for i in range(40):
            p.execute_command("DELAY.ADDAT", q, base + i * 10, "p", "ID", f"j{i}", "ACKTIMEOUT", 30000)
        p.execute()
        done = []
        w = delayd.Worker(r, concurrency=4, on_job_done=lambda j, s: done.append(j.id))
        alone = []
        send = w._send_acks

        def counting(g, acks, outage):  # the flusher's and the stop's sends
            if not w._stopping:
                alone.append(sum(len(ids) for ids in acks.values()))
            return send(g, acks, outage)

        w._send_acks = counting
        w.handle(q, lambda job: None)
        t = run_worker(w)
        try:
            wait_for(lambda: f"{len(done)} jobs done", lambda: len(done) == 40)
        finally:
            w.stop()
            t.join(10)
        self.assertLessEqual(sum(alone), 10, f"{sum(alone)} of 40 acks went alone")

    def test_block_under_socket_timeout(self):
        w = delayd.Worker(client(socket_timeout=0.8))
        self.assertEqual(w.block, 0.4)
        w = delayd.Worker(client(socket_timeout=5))
        self.assertEqual(w.block, 1.0)
        w = delayd.Worker(client(socket_timeout=1.2))
        self.assertAlmostEqual(w.block, 0.7)


if __name__ == "__main__":
    unittest.main()
