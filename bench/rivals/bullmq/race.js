'use strict';
// The BullMQ side of the rivals race: one case of bench/rivals's plan
// (JSON in argv[2]), run with BullMQ's own Queue and Worker, printing every
// completion as JSON for the Go harness to score. It follows runGo in
// main.go step for step; keep the two alike.
const { Queue, Worker } = require('bullmq');
const { performance } = require('node:perf_hooks');

const plan = JSON.parse(process.argv[2]);
const connection = { host: '127.0.0.1', port: Number(plan.port), maxRetriesPerRequest: null };
const name = 'rivals';

// One clock for due times and completions: the wall clock with µs.
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const nowMs = () => Math.floor(nowUs() / 1000);
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

// spreadHash and delayMs are main.go's, so the same id gets the same delay.
const spreadHash = (id) => Math.imul(id + 1, 0x9e3779b1) >>> 0;
function delayMs(id) {
  if (plan.case === 'spread') return spreadHash(id) % (plan.spanMs + 1);
  if (plan.case === 'steady') return plan.minDelayMs + (spreadHash(id) % (plan.maxDelayMs - plan.minDelayMs + 1));
  return 0;
}

const out = { fillStart: 0, fillEnd: 0, dueMs: 0, added: 0, addErrors: 0, errors: 0, firstError: '', recs: [] };
const seen = new Uint8Array(plan.jobs);
let unique = 0;
let lastProgress = 0; // unix µs of the latest completion
let allDone;
const all = new Promise((r) => { allDone = r; });
function fail(err) {
  if (out.errors++ === 0) out.firstError = String(err && err.message ? err.message : err);
}

async function startWorkers() {
  // One Worker with concurrency 8, as BullMQ's docs run a worker process
  // (and as asynq's Concurrency 8): eight Workers of concurrency 1 in one
  // process each wake on every add's marker and run moveToActive for
  // nothing, which cut adds to a third here. The processor does nothing;
  // a job counts as done once BullMQ has moved it to completed.
  const w = new Worker(name, async () => {}, { connection, concurrency: plan.workers, autorun: false });
  w.on('completed', (job) => {
    const done = nowUs();
    const { id, due } = job.data;
    out.recs.push(id, due, done);
    lastProgress = done;
    if (seen[id]++ === 0 && ++unique === plan.jobs) allDone();
  });
  w.on('error', fail);
  w.on('failed', (_job, err) => fail(err));
  await w.waitUntilReady();
  w.run().catch(fail);
  return [w];
}

async function main() {
  const queues = [];
  for (let i = 0; i < plan.producers; i++) {
    const q = new Queue(name, { connection });
    await q.waitUntilReady();
    queues.push(q);
  }
  // Workers are up and waiting before the first add, in every case.
  const workers = await startWorkers();
  const start = nowUs();
  out.fillStart = start;
  if (plan.case === 'burst') out.dueMs = Math.floor((start / 1000) + plan.burstLeadMs) + 1;
  let lastDue = 0;
  await Promise.all(queues.map(async (q, i) => {
    for (let id = i; id < plan.jobs; id += plan.producers) {
      if (plan.rate > 0) await sleep(start / 1000 + (id / plan.rate) * 1000 - nowUs() / 1000);
      // BullMQ takes a relative delay; with the job's timestamp given, its
      // due time is exactly timestamp + delay, the same unix ms as the others'.
      const ts = nowMs();
      const due = plan.case === 'burst' ? out.dueMs : ts + delayMs(id);
      try {
        await q.add('race', { id, due }, { timestamp: ts, delay: Math.max(0, due - ts), removeOnComplete: true, removeOnFail: true });
        out.added++;
        if (due > lastDue) lastDue = due;
      } catch (err) {
        if (out.addErrors++ === 0) fail(err);
      }
    }
  }));
  out.fillEnd = nowUs();
  // drain, as main.go's: wait while jobs keep completing; stop once the last
  // due time plus the grace has passed and nothing completed for a grace.
  const due = plan.case === 'burst' ? out.dueMs : lastDue;
  let finished = false;
  all.then(() => { finished = true; });
  while (!finished) {
    await sleep(100);
    const now = nowUs() / 1000;
    if (now > due + plan.graceMs && now - lastProgress / 1000 > plan.graceMs) break;
  }
  // Closing waits for blocking calls; bound it, the figures are taken.
  await Promise.race([Promise.all([...workers, ...queues].map((x) => x.close().catch(() => {}))), sleep(5000)]);
}

main().then(
  () => process.stdout.write(JSON.stringify(out), () => process.exit(0)),
  (err) => { console.error(err); process.exit(1); },
);
