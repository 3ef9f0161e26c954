// A worker process for the tests that kill or signal one: the library's
// Worker on QUEUE, each job taking WORK_MS, closed on SIGTERM by
// closeOnSignal. It prints "start <id> <deliveries>" as a handler begins
// (deliveries from DELAY.GET, so a test can tell a redelivery from a double),
// "done <id>" once the job's ACK is answered and "closed" at the end.
//
//   DELAYD_TEST_ADDR or DELAYD_TEST_CLUSTER, QUEUE, WORK_MS (default 0),
//   CONCURRENCY (default 10), CLOSE_TIMEOUT (default 30000)
'use strict';

const { Worker } = require('..');
const { addr, connect, connectCluster, sleep } = require('./helpers');

const queue = process.env.QUEUE;
const work = Number(process.env.WORK_MS || 0);
const redis = addr ? connect() : connectCluster();
const out = (line) => process.stdout.write(line + '\n');

const worker = new Worker(redis, queue, async (job) => {
  let deliveries = '?';
  for (let tries = 0; deliveries === '?' && tries < 100; tries++) {
    try {
      const info = await redis.call('DELAY.GET', queue, job.id);
      if (info) deliveries = info[info.indexOf('deliveries') + 1];
      else break; // gone: its reservation expired and another delivery ended it
    } catch {
      await sleep(100); // a failover
    }
  }
  out(`start ${job.id} ${deliveries}`);
  await sleep(work);
}, {
  concurrency: Number(process.env.CONCURRENCY || 10),
  closeTimeout: Number(process.env.CLOSE_TIMEOUT || 30000),
  logger: { info: (...a) => console.error(...a), warn: (...a) => console.error(...a), error: (...a) => console.error(...a) },
});
worker.on('completed', (job) => out(`done ${job.id}`));
worker.closeOnSignal({ onClosed: () => { out('closed'); redis.disconnect(); } });
