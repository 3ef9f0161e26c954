// Adds delayed jobs to a delayd cluster through ioredis's Cluster, each with
// an ID, and retries an add that fails until the cluster takes it: while the
// leader is lost and a new one is elected, adds fail for a second or two
// (CLUSTERDOWN, TRYAGAIN, a closed connection), and the same DELAY.ADD sent
// again is safe (delayd replies null when that ID is already there).
//
//   DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
//   QUEUE           queue (default {jobs}:orders)
//   COUNT           how many jobs (default 3)
//   DELAY_MS        delay of each job in ms (default 1000)
//   ACK_TIMEOUT     ms a worker has to ACK a job before it is delivered again (default 30000)
//   ID_PREFIX       first part of each job's ID (default node)
//   RETRY_FOR       ms to keep retrying one add (default 30000)
'use strict';

const { connect, sleep } = require('./cluster_client');

const queue = process.env.QUEUE || '{jobs}:orders';
const count = Number(process.env.COUNT || 3);
const delayMs = Number(process.env.DELAY_MS || 1000);
const ackTimeout = Number(process.env.ACK_TIMEOUT || 30000);
const prefix = process.env.ID_PREFIX || 'node';
const retryFor = Number(process.env.RETRY_FOR || 30000);

async function main() {
  const cluster = connect();
  for (let i = 1; i <= count; i++) {
    const id = `${prefix}-order-${i}`;
    const deadline = Date.now() + retryFor;
    for (;;) {
      try {
        const reply = await cluster.call('DELAY.ADD', queue, delayMs, JSON.stringify({ order: i }), 'ID', id, 'ACKTIMEOUT', ackTimeout);
        console.log(reply !== null ? `added ${id}` : `${id} was already added`);
        break;
      } catch (e) {
        // CLUSTERDOWN, TRYAGAIN, a closed connection: a failover is under
        // way. The same ID makes the retry safe.
        if (Date.now() > deadline) throw e;
        console.error(`DELAY.ADD ${id}: ${e.message}; retrying with the same ID`);
        await sleep(200);
      }
    }
  }
  cluster.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
