// A delayd cluster worker on the delayd package (clients/node) through
// ioredis's Cluster, going on through a failover: a fetch blocked on a
// leader that steps down is answered UNBLOCKED, and while a new leader is
// elected fetches and acks fail (CLUSTERDOWN, TRYAGAIN, a closed
// connection). The package retries each out of the handler's sight (100 ms
// doubling to 2 s) and keeps the acks that failed for its next fetch; a job
// whose ack never arrives is delivered again after its ack timeout. On
// SIGTERM or SIGINT it finishes the job in hand, acks it, and exits within
// 20 s even when no node answers. raw_worker.js is a worker on ioredis alone.
//
//   DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
//   QUEUE           queue to work on (default {jobs}:orders)
//   WORK_MS         how long one job takes (default 100)
//   MAX_JOBS        exit after this many jobs (default 0: never)
'use strict';

const { Worker } = require('delayd');
const { connect, sleep } = require('./cluster_client');

const queue = process.env.QUEUE || '{jobs}:orders';
const work = Number(process.env.WORK_MS || 100);
const maxJobs = Number(process.env.MAX_JOBS || 0);

// ioredis's Cluster holds a command while no node answers (its offline
// queue has no timeout), so with every node down a stop would wait for the
// cluster to come back; after STOP_WAIT_MS the worker exits anyway.
const STOP_WAIT_MS = 20000;

const cluster = connect();
let done = 0;
const worker = new Worker(cluster, queue, async (job) => {
  console.log(`processing ${job.id} ${job.payload}`);
  await sleep(work); // the job's work
}, { concurrency: 1, closeTimeout: 10000 });

let closing = null;
const stop = () => {
  closing ??= worker.close().then(() => {
    console.log(`worker stopped after ${done} jobs`);
    cluster.disconnect();
  });
  return closing;
};
worker.on('completed', (job) => {
  console.log(`acked ${job.id}`); // the ACK's reply is in
  if (++done === maxJobs) stop();
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    console.log('stopping: finishing the job in hand');
    setTimeout(() => {
      console.error(`no answer from the cluster ${STOP_WAIT_MS / 1000} s after the stop; exiting (a job in hand is delivered again after its ack timeout)`);
      process.exit(1);
    }, STOP_WAIT_MS).unref();
    stop();
  });
}
