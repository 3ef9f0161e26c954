"""The producer against a real server: each option reaches DELAY.ADD as the
command reference spells it."""

import asyncio
import datetime
import time
import unittest

from support import ADDR, client, need_server, now_ms, queue  # first: it finds delayd

import redis.asyncio

import delayd
import delayd.aio


@need_server
class ClientTest(unittest.TestCase):
    def test_producer_options(self):
        r = client()
        c = delayd.Client(r)
        q, dlq = queue("orders"), queue("dead")
        before = now_ms()
        self.assertEqual(c.add(q, "p1", delay=datetime.timedelta(minutes=1), id="o1", ack_timeout=30, retry=3,
                               dead_letter=dlq, unique=3600, priority=7, group="tenant-a"), "o1")
        self.assertIsNone(c.add(q, "again", id="o1"), "a retried add with the id is a no-op")
        job = c.get(q, "o1")
        self.assertEqual((job["state"], job["payload"], job["priority"], job["group"]),
                         ("delayed", "p1", 7, "tenant-a"))
        self.assertTrue(before + 60000 - 1 <= job["due"] <= now_ms() + 60000 + 1, job)  # the server reads its own ms
        # REPLACE: the options not given return to their defaults, so UNIQUE again.
        self.assertEqual(c.add(q, "p2", id="o1", replace=True, delay=0.25, unique=3600), "o1")
        self.assertEqual(c.get(q, "o1")["payload"], "p2")

        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        self.assertEqual(c.add_at(q, "later", at, id="o2"), "o2")
        self.assertAlmostEqual(c.get(q, "o2")["due"], int(at.timestamp() * 1000), delta=1)
        self.assertTrue(c.reschedule(q, "o2", delay=120))
        self.assertTrue(c.reschedule(q, "o2", at=time.time() + 7200))
        self.assertEqual(c.promote(q, "o2"), 1)
        self.assertEqual(c.get(q, "o2")["state"], "ready")
        self.assertEqual(c.stats(q)["ready"], 1)
        self.assertEqual(c.cancel(q, "o1", "o2", "nope"), 2)
        self.assertIsNone(c.get(q, "o1"))
        self.assertIsNone(c.add(q, "p3", id="o1"), "UNIQUE keeps the id taken after the cancel")

        self.assertEqual(c.add(q, "d1", id="deb", delay=1, debounce=10), "deb")
        self.assertEqual(c.add(q, "d2", id="deb", delay=1, debounce=10), "deb")
        self.assertEqual(c.get(q, "deb")["payload"], "d2")

        self.assertIsNotNone(c.add(q, "generated"))  # a server id
        c.schedule(q, "tick", "t", every=60, ack_timeout=5, misfire="once")
        c.schedule(q, "daily", "d", cron="0 9 * * *", tz="Europe/Berlin")
        names = sorted(s["name"] for s in c.schedules(q))
        self.assertEqual(names, ["daily", "tick"])
        self.assertTrue(c.unschedule(q, "tick"))
        self.assertFalse(c.unschedule(q, "tick"))
        c.limit(q, concurrency=5, rate=(100, 1.0))
        with self.assertRaises(ValueError):
            c.add(q, "x", delay=1, at=time.time())

    def test_aio_client(self):
        async def main():
            host, port = ADDR.rsplit(":", 1)
            r = redis.asyncio.Redis(host=host, port=int(port), decode_responses=True)
            c = delayd.aio.Client(r)
            q = queue("aio")
            self.assertEqual(await c.add(q, "p", id="a1", delay=30, ack_timeout=5), "a1")
            self.assertIsNone(await c.add(q, "p", id="a1"))
            self.assertEqual((await c.get(q, "a1"))["state"], "delayed")
            self.assertEqual(await c.promote(q, "a1"), 1)
            self.assertEqual((await c.stats(q))["ready"], 1)
            self.assertEqual(await c.cancel(q, "a1"), 1)
            await r.close()

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
