"""The worker loop's decisions (delayd._loop), without a server: both
workers act on these, so each case here holds for the sync and the asyncio
worker alike."""

import unittest

from delayd import _loop
from delayd._core import SkipRetry


class _Job:
    def __init__(self, started=0.0, fetched_ms=0):
        self._started = started
        self._fetched_ms = fetched_ms
        self._next_touch = 0.0
        self._timeout_ms = 0
        self._touching = True
        self._gone = False


class LoopTest(unittest.TestCase):
    def test_groups_by_slot_share_the_concurrency(self):
        self.assertEqual(_loop.groups(["a", "b"], 8), [(["a", "b"], 8)])
        slot = {"a": 1, "b": 2, "c": 1}.get
        self.assertEqual(_loop.groups(["a", "b", "c"], 8, slot), [(["a", "c"], 4), (["b"], 4)])
        self.assertEqual(_loop.groups(["a", "b"], 1, slot), [(["a"], 1), (["b"], 1)])

    def test_fetch_sends_acks_then_the_pop_for_the_free_slots(self):
        head = _loop.mpop_head(1.0, ["q", "r"])
        sent, cmds = _loop.fetch_commands({"q": ["1", "2"]}, head, 3)
        self.assertEqual(sent, [("q", ["1", "2"])])
        self.assertEqual(cmds, [["DELAY.ACK", "q", "1", "2"], ["DELAY.MPOP", 1.0, 2, "q", "r", "COUNT", 3]])

    def test_read_fetch(self):
        sent = [("q", ["1", "2"]), ("r", ["3"])]
        down = ConnectionError("down")
        f = _loop.read_fetch(sent, [1, down, [b"q", [[b"4", b"x"]]]])
        self.assertEqual(f.acked, [("q", ["1", "2"], 1)])
        self.assertEqual(f.unsent, {"r": ["3"]})
        self.assertIs(f.error, down)
        # Jobs a fetch brought are run even when an ack beside it failed.
        self.assertEqual((f.queue, f.jobs), ("q", [(b"4", b"x")]))
        self.assertEqual(_loop.acks_lost(["1", "2"], 1), 1)
        f = _loop.read_fetch([], [None])
        self.assertEqual((f.error, f.queue, f.jobs), (None, None, []))

    def test_outcome(self):
        self.assertEqual(_loop.outcome(None), _loop.DONE)
        self.assertEqual(_loop.outcome(SkipRetry("bad")), _loop.DISCARDED)
        self.assertEqual(_loop.outcome(ValueError("x")), _loop.FAILED)

    def test_deliveries(self):
        self.assertEqual(_loop.deliveries([b"deliveries", b"3", b"state", b"reserved"]), 3)
        self.assertEqual(_loop.deliveries({"deliveries": 2}), 2)
        self.assertEqual(_loop.deliveries(None), 1)

    def test_heartbeat_learns_after_then_touches_at_a_third_left(self):
        job = _Job(started=100.0, fetched_ms=1_000_000)
        self.assertIsNone(_loop.heartbeat_due(job, 100.5, 1.0))
        self.assertEqual(_loop.heartbeat_due(job, 101.0, 1.0), _loop.LEARN)
        # Ack timeout 30 s (deadline 30 s after the fetch), learned 1 s in:
        # the first TOUCH when 10 s are left, 19 s from now.
        _loop.learned(job, {"ack_deadline": 1_030_000}, 101.0, 1_001_000)
        self.assertEqual(job._timeout_ms, 30_000)
        self.assertAlmostEqual(job._next_touch, 120.0)
        self.assertIsNone(_loop.heartbeat_due(job, 119.9, 1.0))
        self.assertEqual(_loop.heartbeat_due(job, 120.0, 1.0), _loop.TOUCH)
        _loop.touched(job, True, 120.0)
        self.assertAlmostEqual(job._next_touch, 140.0)
        _loop.touched(job, False, 140.0)
        self.assertIsNone(_loop.heartbeat_due(job, 200.0, 1.0))

    def test_heartbeat_of_a_job_without_ack_deadline_stops(self):
        job = _Job()
        _loop.learned(job, [b"state", b"ready"], 5.0, 5000)
        self.assertFalse(job._touching)
        self.assertIsNone(_loop.heartbeat_due(job, 10.0, 1.0))


if __name__ == "__main__":
    unittest.main()
