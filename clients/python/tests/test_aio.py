"""delayd.aio.Worker against a real server: jobs done and acked, a failure
NACKed with the policy's delay and its reason, a handler past the stop
deadline cancelled and its job given back."""

import asyncio
import unittest

from support import ADDR, need_server, now_ms, queue  # first: it finds delayd

import redis.asyncio

import delayd.aio


def aclient():
    host, port = ADDR.rsplit(":", 1)
    return redis.asyncio.Redis(host=host, port=int(port), decode_responses=True, socket_timeout=5)


async def until(cond, timeout=15.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not await cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("not within %s s" % timeout)
        await asyncio.sleep(0.02)


@need_server
class AioWorkerTest(unittest.TestCase):
    def test_aio_worker(self):
        async def main():
            r = aclient()
            c = delayd.aio.Client(r)
            q = queue("aiow")
            p = r.pipeline(transaction=False)
            for i in range(300):
                p.execute_command("DELAY.ADD", q, 0, f"p{i}", "ID", f"j{i}", "ACKTIMEOUT", 30000)
            p.execute_command("DELAY.ADD", q, 0, "bad", "ID", "bad", "ACKTIMEOUT", 30000)
            await p.execute()
            seen, failed = [], []
            w = delayd.aio.Worker(r, concurrency=8, backoff=lambda n, e: 5.0,
                                  on_job_failed=lambda j, e, d: failed.append((j.id, now_ms())))

            @w.handler(q)
            async def handle(job):
                if job.id == "bad":
                    raise RuntimeError("no good")
                await asyncio.sleep(0.001)
                seen.append(job.id)

            task = asyncio.ensure_future(w.run(install_signals=False))

            async def drained():
                st = await c.stats(q)
                return len(seen) == 300 and failed and st["ready"] == 0 and st["reserved"] == 0

            await until(drained)
            w.stop()
            await asyncio.wait_for(task, 10)
            self.assertEqual(sorted(seen), sorted(f"j{i}" for i in range(300)))
            bad = await c.get(q, "bad")
            self.assertEqual((bad["state"], bad["error"], bad["deliveries"]), ("delayed", "RuntimeError: no good", 1))
            self.assertTrue(failed[0][1] + 5000 - 1000 <= bad["due"] <= failed[0][1] + 5000 + 1, (bad, failed))
            self.assertEqual(w.counts["done"], 300)
            await r.close()

        asyncio.run(main())

    def test_aio_acks_of_jobs_due_one_by_one_ride_with_the_fetch(self):
        async def main():
            r = aclient()
            q = queue("aio1by1")
            base = now_ms() + 300
            p = r.pipeline(transaction=False)
            for i in range(40):
                p.execute_command("DELAY.ADDAT", q, base + i * 10, "p", "ID", f"j{i}", "ACKTIMEOUT", 30000)
            await p.execute()
            done = []
            w = delayd.aio.Worker(r, on_job_done=lambda j, s: done.append(j.id))
            alone = []
            flush = w._flush

            async def counting(g):  # acks sent on their own, not with a fetch
                if g.acks:
                    alone.append(sum(len(ids) for ids in g.acks.values()))
                return await flush(g)

            w._flush = counting

            @w.handler(q)
            async def handle(job):
                pass

            task = asyncio.ensure_future(w.run(install_signals=False))

            async def all_done():
                return len(done) == 40

            await until(all_done)
            w.stop()
            await asyncio.wait_for(task, 10)
            self.assertLessEqual(sum(alone), 10, f"{sum(alone)} of 40 acks went alone")
            await r.close()

        asyncio.run(main())

    def test_aio_stop_deadline_cancels(self):
        async def main():
            r = aclient()
            c = delayd.aio.Client(r)
            q = queue("aiostop")
            await c.add(q, "x", id="long", ack_timeout=60)
            cancelled = []
            w = delayd.aio.Worker(r, shutdown_timeout=0.3)

            @w.handler(q)
            async def long(job):
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    cancelled.append(job.id)
                    raise

            task = asyncio.ensure_future(w.run(install_signals=False))

            async def reserved():
                return ((await c.get(q, "long")) or {}).get("state") == "reserved"

            await until(reserved)
            w.stop()
            await asyncio.wait_for(task, 10)
            info = await c.get(q, "long")
            self.assertEqual((info["state"], info.get("error")), ("ready", "worker shutting down"))
            self.assertEqual(cancelled, ["long"])
            await r.close()

        asyncio.run(main())

    def test_aio_heartbeat(self):
        """A job running 2.2x its ack timeout keeps its reservation while
        the heartbeat TOUCHes it."""
        async def main():
            r = aclient()
            c = delayd.aio.Client(r)
            q = queue("aiobeat")
            await c.add(q, "x", id="slow", ack_timeout=2.5)
            runs, stats = [], []
            w = delayd.aio.Worker(r, concurrency=2)

            @w.handler(q)
            async def slow(job):
                runs.append(job.id)
                await asyncio.sleep(5.5)
                stats.append(await c.stats(q))
                w.stop()

            await asyncio.wait_for(w.run(install_signals=False), 20)
            self.assertEqual(runs, ["slow"])
            self.assertEqual((stats[0]["expired"], stats[0]["redeliveries"], stats[0]["reserved"]), (0, 0, 1))
            self.assertIsNone(await c.get(q, "slow"))
            await r.close()

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
