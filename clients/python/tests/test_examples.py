"""examples/python/raw_worker.py, the worker on redis-py alone, against a
real server (compat's TestExamples runs the producer and the library's
worker)."""

import os
import subprocess
import sys
import unittest

from support import ADDR, HERE, client, need_server, queue  # first: it finds delayd

import delayd

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "examples", "python")


@need_server
class RawWorkerTest(unittest.TestCase):
    def test_raw_worker_example(self):
        c = delayd.Client(client())
        q = queue("raw")
        for i in range(3):
            c.add(q, f"p{i}", id=f"raw-{i}", ack_timeout=30)
        env = dict(os.environ, DELAYD_ADDR=ADDR, QUEUE=q, MAX_JOBS="3", WORK_MS="10")
        out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "raw_worker.py")], env=env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        for i in range(3):
            self.assertIn(f"acked raw-{i}\n", out.stdout)
        self.assertIn("worker stopped after 3 jobs\n", out.stdout)
        self.assertIsNone(c.get(q, "raw-0"))


if __name__ == "__main__":
    unittest.main()
