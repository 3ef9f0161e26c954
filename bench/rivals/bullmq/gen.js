'use strict';
// gen.js fills a Redis server with delayed BullMQ jobs made by BullMQ itself,
// for the tests and the benchmark of delayd's import from Redis
// (transfer/fromredis, bench/import_redis.sh): the reader is checked against
// what the library really writes, not against our idea of it. Go's asynqgen
// (../cmd/asynqgen) is its asynq twin; keep the two alike.
//
// It writes one line per job to --out, "queue<TAB>id<TAB>due-ms<TAB>attempts<TAB>attemptsMade<TAB>name",
// where due is the job's timestamp plus its delay, both given by us (BullMQ
// keeps ms), or, for a job that failed and waits for its retry, the time of
// BullMQ's own "delayed" event.
//
//   node gen.js --port 6379 --n 500000 --out b.tsv              fill, then exit
//   node gen.js --port ... --from 500000 --keep --n 0 --out k.tsv   add until stdin closes ("adding" on stdout once it does)
//   node gen.js --port ... --retries 100 --out r.tsv            jobs failed once, waiting for their retry
//   node gen.js --port ... --schedulers 2 --n 0                     repeatable jobs (job schedulers)
const fs = require('node:fs');
const { Queue, Worker, QueueEvents } = require('bullmq');

const args = { port: 6379, queues: 2, n: 1000, from: 0, keep: false, rate: 2000, retries: 0, schedulers: 0, out: '', prefix: 'bull' };
for (let i = 2; i < process.argv.length; i++) {
  const k = process.argv[i].replace(/^--/, '');
  if (k === 'keep') { args.keep = true; continue; }
  const v = process.argv[++i];
  args[k] = typeof args[k] === 'number' ? Number(v) : v;
}
const connection = { host: '127.0.0.1', port: args.port, maxRetriesPerRequest: null };
const out = args.out ? fs.openSync(args.out, 'w') : 1;
let buf = [];
const line = (q, id, due, attempts, made, name) => {
  buf.push(`${q}\t${id}\t${due}\t${attempts}\t${made}\t${name}\n`);
  if (buf.length >= 1000) flush();
};
const flush = () => { if (buf.length) { fs.writeSync(out, buf.join('')); buf = []; } };

// spread scatters job numbers over two days, the same way on every run
// (asynqgen's).
const spread = (i) => Math.imul(i + 1, 0x9e3779b1) >>> 0;
const base = Date.now() + 2 * 3600 * 1000;

function job(i) {
  const q = `bq${i % args.queues}`; // not asynqgen's q0: both go to one delayd in bench/import_redis.sh
  // A block of jobs due the same ms, so that the reader's paging must get
  // through ties; the rest spread over two days to the ms.
  const due = i % 50 === 0 ? base : base + (spread(i) % (48 * 3600 * 1000));
  const timestamp = due - 3600 * 1000 - (i % 1000);
  const opts = { delay: due - timestamp, timestamp, jobId: `job-${i}` };
  if (i % 2 === 1) delete opts.jobId; // half with ids of ours, half with BullMQ's counter
  if (i % 3 === 0) opts.attempts = 1 + (i % 5);
  return { q, name: `email:${i % 3}`, data: { n: i }, opts, due };
}

async function fill(queues, from, n) {
  const batch = 500;
  for (let s = from; s < from + n; s += batch) {
    const byQ = new Map();
    for (let i = s; i < Math.min(from + n, s + batch); i++) {
      const j = job(i);
      if (!byQ.has(j.q)) byQ.set(j.q, []);
      byQ.get(j.q).push(j);
    }
    await Promise.all([...byQ].map(async ([q, js]) => {
      const added = await queues.get(q).addBulk(js.map((j) => ({ name: j.name, data: j.data, opts: j.opts })));
      added.forEach((a, k) => line(q, a.id, js[k].due, js[k].opts.attempts || 0, 0, js[k].name));
    }));
  }
}

async function keepAdding(queues, from) {
  let stopped = false;
  process.stdin.on('end', () => { stopped = true; }).resume();
  const perTick = Math.max(1, Math.round(args.rate / 100));
  for (let i = from; !stopped && (args.n === 0 || i < from + args.n); i += perTick) {
    await fill(queues, i, perTick);
    if (i === from) process.stdout.write('adding\n'); // the test starts reading now
    await new Promise((r) => setTimeout(r, 10));
  }
}

// failOnce adds jobs to queue bretryq with 3 attempts and a fixed hour of
// backoff, and lets a Worker fail each once: BullMQ moves it back to the
// delayed set with attemptsMade 1, due an hour after the failure, the time
// its "delayed" event tells.
async function failOnce(from, n) {
  const q = 'bretryq';
  const queue = new Queue(q, { connection, prefix: args.prefix });
  const events = new QueueEvents(q, { connection, prefix: args.prefix });
  await events.waitUntilReady();
  const due = new Map();
  const all = new Promise((resolve) => {
    events.on('delayed', ({ jobId, delay }) => {
      due.set(jobId, Number(delay));
      if (due.size === n) resolve();
    });
  });
  const jobs = [];
  for (let i = from; i < from + n; i++) {
    jobs.push({ name: 'report:build', data: { n: i }, opts: { jobId: `retry-${i}`, attempts: 3, backoff: { type: 'fixed', delay: 3600 * 1000 } } });
  }
  await queue.addBulk(jobs);
  const worker = new Worker(q, async () => { throw new Error('gen.js: failing on purpose'); }, { connection, prefix: args.prefix, concurrency: 8 });
  await all;
  await worker.close();
  for (const [id, d] of due) line(q, id, d, 3, 1, 'report:build');
  await events.close();
  await queue.close();
}

async function main() {
  if (args.retries > 0) {
    await failOnce(args.from, args.retries);
    return;
  }
  const queues = new Map();
  for (let k = 0; k < args.queues; k++) {
    queues.set(`bq${k}`, new Queue(`bq${k}`, { connection, prefix: args.prefix }));
  }
  for (let k = 0; k < args.schedulers; k++) {
    // A repeatable job: BullMQ keeps its next run as a delayed job with an
    // id of its own making ("repeat:..."); the reader must leave it. A cron
    // pattern, because "every" runs the first at once (not delayed).
    await queues.get(`bq${k % args.queues}`).upsertJobScheduler(`nightly-${k}`, { pattern: `${k % 60} 3 * * *` }, { name: 'digest', data: {} });
  }
  if (args.keep) await keepAdding(queues, args.from);
  else await fill(queues, args.from, args.n);
  await Promise.all([...queues.values()].map((q) => q.close()));
}

main().then(() => { flush(); process.exit(0); }, (err) => { flush(); console.error(err); process.exit(1); });
