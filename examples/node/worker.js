// A delayd worker on the delayd package (clients/node): a handler per job,
// ten at a time; the package fetches with DELAY.MPOP, sends each ACK with the
// next fetch, TOUCHes long jobs, NACKs failures with a backoff and retries
// through a failover. raw_worker.js is the same worker on ioredis alone.
//
// Graceful stop: on SIGTERM or SIGINT (closeOnSignal) the jobs in hand are
// finished and acked, then the worker exits 0.
//
//   DELAYD_ADDR   server (default 127.0.0.1:6380)
//   QUEUE         queue to work on (default jobs:email)
//   CONCURRENCY   most jobs of the queue in flight at once, across every worker (default 10)
//   WORK_MS       how long one job takes, to see a graceful stop (default 100)
//   MAX_JOBS      exit after this many jobs (default 0: never)
'use strict';

const Redis = require('ioredis');
const { Worker } = require('delayd');

const [host, port] = (process.env.DELAYD_ADDR || '127.0.0.1:6380').split(':');
const queue = process.env.QUEUE || 'jobs:email';
const workMs = Number(process.env.WORK_MS || 100);
const maxJobs = Number(process.env.MAX_JOBS || 0);
const concurrency = Number(process.env.CONCURRENCY || 10);

// commandTimeout is optional; when set, the worker keeps its blocking fetch
// shorter than it, so ioredis never cuts a fetch that is only waiting.
const redis = new Redis({ host, port: Number(port), commandTimeout: 5000 });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  // Flow control is the server's: DELAY.LIMIT sets how many jobs of the
  // queue may be reserved at once over the whole fleet; a worker's fetch
  // waits while the queue is at its limit. Every worker sets the same value.
  await redis.call('DELAY.LIMIT', queue, 'CONCURRENCY', concurrency);
  console.log(`limit: at most ${concurrency} jobs of ${queue} in flight`);

  let done = 0;
  const worker = new Worker(redis, queue, async (job) => {
    console.log(`processing ${job.id} ${job.payload}`);
    await sleep(workMs); // the job's work; a throw here is retried later
  }, { concurrency });
  const stopped = () => {
    console.log(`worker stopped after ${done} jobs`);
    redis.disconnect();
  };
  worker.on('completed', (job) => {
    console.log(`acked ${job.id}`);
    if (++done === maxJobs) worker.close().then(stopped);
  });
  worker.closeOnSignal({ onClosed: stopped });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
