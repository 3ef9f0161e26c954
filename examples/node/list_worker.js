// A stock Redis list worker: BLPOP on a delayd queue, unchanged from a
// worker of a Redis list. delayd moves each job to the queue's ready list
// when its time comes; BLPOP removes it (at-most-once: a list pop needs no
// ACK, whatever the job's ack timeout).
//
//   DELAYD_ADDR   server (default 127.0.0.1:6380)
//   QUEUE         queue (default jobs:email)
//   MAX_JOBS      exit after this many jobs (default 0: never)
'use strict';

const Redis = require('ioredis');

const [host, port] = (process.env.DELAYD_ADDR || '127.0.0.1:6380').split(':');
const queue = process.env.QUEUE || 'jobs:email';
const maxJobs = Number(process.env.MAX_JOBS || 0);

const redis = new Redis({ host, port: Number(port) });

let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => { stopping = true; });

async function main() {
  let done = 0;
  while (!stopping && (maxJobs === 0 || done < maxJobs)) {
    const item = await redis.blpop(queue, 2);
    if (item === null) continue;
    console.log(`got ${item[1]}`);
    done++;
  }
  console.log(`list worker stopped after ${done} jobs`);
  redis.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
