// A delayd worker with nothing but ioredis: DELAY.POP a job, do it,
// DELAY.ACK it (at-least-once for jobs added with ACKTIMEOUT). worker.js
// does the same with the delayd package (clients/node), which adds
// concurrency, one round trip a job, heartbeats and retries; this one is
// for those who want no dependency.
//
// The read timeout rule: ioredis has no command timeout by default, but
// apps often set `commandTimeout`, and it applies to every command. Its own
// blpop is no different there, and DELAY.POP goes through call(), so the
// client cannot know it blocks: with commandTimeout 5000, a DELAY.POP 5 is
// rejected while the server may be handing over a job, which then waits
// for its ack timeout before it is delivered again. So this worker pops with
// a short timeout (POP_TIMEOUT) in a loop and keeps commandTimeout longer
// than it. The short pop is also how a stop request is noticed.
//
// Graceful stop: on SIGTERM or SIGINT the job in hand is finished and acked,
// then the worker exits 0 (after at most POP_TIMEOUT when it is waiting).
//
//   DELAYD_ADDR   server (default 127.0.0.1:6380)
//   QUEUE         queue to work on (default jobs:email)
//   CONCURRENCY   most jobs of the queue in flight at once, across every worker (default 10)
//   WORK_MS       how long one job takes, to see a graceful stop (default 100)
//   MAX_JOBS      exit after this many jobs (default 0: never)
'use strict';

const Redis = require('ioredis');

const POP_TIMEOUT = 2; // seconds

const [host, port] = (process.env.DELAYD_ADDR || '127.0.0.1:6380').split(':');
const queue = process.env.QUEUE || 'jobs:email';
const workMs = Number(process.env.WORK_MS || 100);
const maxJobs = Number(process.env.MAX_JOBS || 0);

const redis = new Redis({
  host,
  port: Number(port),
  commandTimeout: (POP_TIMEOUT + 3) * 1000, // longer than the pop, see above
  // A pop resent after a reconnect could take a second job while the
  // first one's reply was lost.
  maxRetriesPerRequest: 0,
});

let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    console.log('stopping: finishing the job in hand');
    stopping = true;
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  // Flow control is the server's: DELAY.LIMIT sets how many jobs of the
  // queue may be reserved at once over the whole fleet; a worker's pop waits
  // while the queue is at its limit. Every worker sets the same value.
  const concurrency = Number(process.env.CONCURRENCY || 10);
  await redis.call('DELAY.LIMIT', queue, 'CONCURRENCY', concurrency);
  console.log(`limit: at most ${concurrency} jobs of ${queue} in flight`);
  let done = 0;
  while (!stopping && (maxJobs === 0 || done < maxJobs)) {
    let job;
    try {
      job = await redis.call('DELAY.POP', queue, POP_TIMEOUT);
    } catch (e) {
      console.log(`DELAY.POP: ${e.message}; retrying in 1 s`);
      await sleep(1000);
      continue;
    }
    if (job === null) continue; // nothing within POP_TIMEOUT: pop again
    const [, id, payload] = job;
    console.log(`processing ${id} ${payload}`);
    await sleep(workMs); // the job's work
    // ACK replies 0 when the job was not reserved (added without
    // ACKTIMEOUT: the pop removed it already).
    await redis.call('DELAY.ACK', queue, id);
    console.log(`acked ${id}`);
    done++;
  }
  console.log(`worker stopped after ${done} jobs`);
  redis.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
