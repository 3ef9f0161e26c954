// What the tests share: the server's address from the environment (the Go
// test integration_test/nodelib_test.go starts the server and sets it), a
// connection, queue names of their own, and a worker process to signal and
// kill for real.
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const Redis = require('ioredis');

const addr = process.env.DELAYD_TEST_ADDR || '';
const cluster = process.env.DELAYD_TEST_CLUSTER || '';

function hostPort(a) {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
}

function connect() {
  const r = new Redis({ ...hostPort(addr), maxRetriesPerRequest: 3 });
  r.on('error', () => {});
  return r;
}

// connectCluster is ioredis's Cluster as the README's cluster section sets
// it: a node that does not come back within a few tries is given up, so the
// slot map from a live node takes over.
function connectCluster() {
  const c = new Redis.Cluster(cluster.split(',').map(hostPort), {
    redisOptions: { retryStrategy: (times) => (times > 3 ? null : 100) },
  });
  c.on('error', () => {});
  return c;
}

let seq = 0;
function queueName(what) {
  return `nodelib:${what}:${process.pid}:${++seq}`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// waitFor polls cond every 20 ms until it returns a truthy value, or fails
// with what after within ms.
async function waitFor(within, what, cond) {
  const deadline = Date.now() + within;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${within} ms waiting for ${what}`);
    await sleep(20);
  }
}

// startWorker runs test/worker_process.js with env added. Its stdout lines
// ("start id deliveries", "done id", "closed") are kept in lines
// and given to onLine; exited resolves to [code, signal].
function startWorker(env, onLine = () => {}) {
  const child = spawn(process.execPath, [path.join(__dirname, 'worker_process.js')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const w = { child, lines: [], stderr: '' };
  child.stderr.on('data', (b) => { w.stderr += b; });
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    w.lines.push(line);
    onLine(line);
  });
  w.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve([code, signal])));
  w.has = (prefix) => w.lines.filter((l) => l.startsWith(prefix));
  return w;
}

module.exports = { addr, cluster, connect, connectCluster, queueName, sleep, waitFor, startWorker };
