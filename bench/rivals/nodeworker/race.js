'use strict';
// The delayd Node library's side of the rivals race (system delayd-node):
// one case of bench/rivals's plan (JSON in argv[2]) with clients/node's
// Client and Worker, printing every completion as JSON for the Go harness to
// score, as bullmq/race.js does for BullMQ; keep the two alike. One Worker
// with concurrency plan.workers (BullMQ's is the same), its defaults
// otherwise; a job counts as done once its ACK is answered (the 'completed'
// event).
const path = require('node:path');
const { createRequire } = require('node:module');
const { performance } = require('node:perf_hooks');

const lib = path.join(__dirname, '..', '..', '..', 'clients', 'node');
const { Client, Worker } = require(lib);
const Redis = createRequire(path.join(lib, 'index.js'))('ioredis');

const plan = JSON.parse(process.argv[2]);
const queue = 'rivals';
const connect = () => new Redis({ host: '127.0.0.1', port: Number(plan.port) });

const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const nowMs = () => Math.floor(nowUs() / 1000);
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

const spreadHash = (id) => Math.imul(id + 1, 0x9e3779b1) >>> 0;
function delayMs(id) {
  if (plan.case === 'spread') return spreadHash(id) % (plan.spanMs + 1);
  if (plan.case === 'steady') return plan.minDelayMs + (spreadHash(id) % (plan.maxDelayMs - plan.minDelayMs + 1));
  return 0;
}

const out = { fillStart: 0, fillEnd: 0, dueMs: 0, added: 0, addErrors: 0, errors: 0, firstError: '', recs: [] };
const seen = new Uint8Array(plan.jobs);
let unique = 0;
let lastProgress = 0;
let allDone;
const all = new Promise((r) => { allDone = r; });
function fail(err) {
  if (out.errors++ === 0) out.firstError = String(err && err.message ? err.message : err);
}

async function main() {
  const producers = [];
  for (let i = 0; i < plan.producers; i++) producers.push(new Client(connect()));
  const wconn = connect();
  // The handler parses the due time from the payload, as every worker of
  // the race does.
  const w = new Worker(wconn, queue, (job) => {
    const p = job.payload;
    const i = p.indexOf(':');
    return [Number(p.slice(0, i)), Number(p.slice(i + 1))];
  }, { concurrency: plan.workers, logger: null });
  w.on('completed', (_job, [id, due]) => {
    const done = nowUs();
    out.recs.push(id, due, done);
    lastProgress = done;
    if (seen[id]++ === 0 && ++unique === plan.jobs) allDone();
  });
  w.on('error', fail);
  w.on('failed', (_job, err) => fail(err));
  await sleep(200); // the worker's fetch is waiting before the first add
  const start = nowUs();
  out.fillStart = start;
  if (plan.case === 'burst') out.dueMs = Math.floor((start / 1000) + plan.burstLeadMs) + 1;
  let lastDue = 0;
  await Promise.all(producers.map(async (c, i) => {
    for (let id = i; id < plan.jobs; id += plan.producers) {
      if (plan.rate > 0) await sleep(start / 1000 + (id / plan.rate) * 1000 - nowUs() / 1000);
      const due = plan.case === 'burst' ? out.dueMs : nowMs() + delayMs(id);
      try {
        await c.addAt(queue, due, `${id}:${due}`, { ackTimeout: 30000 });
        out.added++;
        if (due > lastDue) lastDue = due;
      } catch (err) {
        if (out.addErrors++ === 0) fail(err);
      }
    }
  }));
  out.fillEnd = nowUs();
  const due = plan.case === 'burst' ? out.dueMs : lastDue;
  let finished = false;
  all.then(() => { finished = true; });
  while (!finished) {
    await sleep(100);
    const now = nowUs() / 1000;
    if (now > due + plan.graceMs && now - lastProgress / 1000 > plan.graceMs) break;
  }
  await Promise.race([w.close(5000), sleep(6000)]);
  wconn.disconnect();
  for (const c of producers) c.redis.disconnect();
}

main().then(
  () => process.stdout.write(JSON.stringify(out), () => process.exit(0)),
  (err) => { console.error(err); process.exit(1); },
);
