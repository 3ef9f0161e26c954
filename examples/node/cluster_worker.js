// A delayd cluster worker through ioredis's Cluster: DELAY.POP a job, do it,
// DELAY.ACK it, and go on through a failover. A pop blocked on a leader that
// steps down is answered UNBLOCKED, and while a new leader is elected pops and
// acks fail (CLUSTERDOWN, TRYAGAIN, a closed connection): the worker treats
// each as an empty pop and pops again, and sends a failed ACK again (acking
// twice is harmless; a job whose ACK never arrives is delivered again after
// its ack timeout). On SIGTERM or SIGINT it finishes the job in hand, and
// exits within 20 s even when no node answers.
//
//   DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
//   QUEUE           queue to work on (default {jobs}:orders)
//   WORK_MS         how long one job takes (default 100)
//   MAX_JOBS        exit after this many jobs (default 0: never)
'use strict';

const { connect, sleep } = require('./cluster_client');

const POP_TIMEOUT = 2; // seconds
const queue = process.env.QUEUE || '{jobs}:orders';
const work = Number(process.env.WORK_MS || 100);
const maxJobs = Number(process.env.MAX_JOBS || 0);

// ioredis's Cluster holds a command while no node answers (its offline
// queue has no timeout), so with every node down a stop would wait for the
// cluster to come back; after STOP_WAIT_MS the worker exits anyway.
const STOP_WAIT_MS = 20000;

let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    console.log('stopping: finishing the job in hand');
    stopping = true;
    setTimeout(() => {
      console.error(`no answer from the cluster ${STOP_WAIT_MS / 1000} s after the stop; exiting (a job in hand is delivered again after its ack timeout)`);
      process.exit(1);
    }, STOP_WAIT_MS).unref();
  });
}

async function ack(cluster, id) {
  const deadline = Date.now() + 30000;
  for (;;) {
    try {
      await cluster.call('DELAY.ACK', queue, id);
      console.log(`acked ${id}`);
      return;
    } catch (e) {
      if (Date.now() > deadline) {
        console.error(`DELAY.ACK ${id}: ${e.message} (it will be delivered again after its ack timeout)`);
        return;
      }
      await sleep(200);
    }
  }
}

async function main() {
  const cluster = connect();
  let done = 0;
  while (!stopping && (maxJobs === 0 || done < maxJobs)) {
    let job;
    try {
      job = await cluster.call('DELAY.POP', queue, POP_TIMEOUT);
    } catch (e) {
      // UNBLOCKED, CLUSTERDOWN, TRYAGAIN, a closed connection: a failover.
      console.error(`DELAY.POP: ${e.message}; popping again`);
      await sleep(200);
      continue;
    }
    if (job === null) continue; // nothing within POP_TIMEOUT
    const [, id, payload] = job;
    console.log(`processing ${id} ${payload}`);
    await sleep(work); // the job's work
    await ack(cluster, id);
    done++;
  }
  console.log(`worker stopped after ${done} jobs`);
  cluster.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
