// The worker contract's tests against a real delayd (DELAYD_TEST_ADDR; the
// Go test integration_test/nodelib_test.go starts one and runs these):
// a worker killed mid-job, a job outliving its ack timeout on heartbeats,
// retries on the policy's delays into a dead letter, and SIGTERM.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Client, Worker, UnrecoverableError, exponentialBackoff } = require('..');
const { addr, connect, queueName, sleep, waitFor, startWorker } = require('./helpers');

const skip = addr ? false : 'DELAYD_TEST_ADDR is not set (integration_test/nodelib_test.go starts a server and sets it)';
const quiet = null;

test('producer: every DELAY.ADD option, and the rest of the API', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('producer');
  try {
    assert.equal(await c.add(q, { n: 1 }, { id: 'a', delay: 60000, ackTimeout: 5000, retry: 2, deadLetter: q + ':dead', group: 'g', priority: 3 }), 'a');
    assert.equal(await c.add(q, 'again', { id: 'a' }), null, 'an existing id adds nothing');
    let a = await c.get(q, 'a');
    assert.equal(a.payload, '{"n":1}');
    assert.equal(a.state, 'delayed');
    assert.equal(a.group, 'g');
    assert.equal(a.priority, 3);
    assert.equal(await c.add(q, 'replaced', { id: 'a', replace: true, delay: 60000 }), 'a');
    a = await c.get(q, 'a');
    assert.equal(a.payload, 'replaced');
    const at = Date.now() + 3600000;
    assert.equal(await c.add(q, 'b', { id: 'b', at: new Date(at) }), 'b');
    assert.equal((await c.get(q, 'b')).due, at);
    assert.equal(await c.addAt(q, at + 1, 'c', { id: 'c' }), 'c');
    assert.equal((await c.get(q, 'c')).due, at + 1);
    const id = await c.add(q, 'server id');
    assert.ok(id && typeof id === 'string');
    assert.equal(await c.add(q, 'x', { id: 'd', debounce: 1000, delay: 500 }), 'd');
    assert.equal(await c.add(q, 'u', { id: 'u', unique: 60000 }), 'u');
    await assert.rejects(c.add(q, 'x', { delay: 1, at: Date.now() }), TypeError);

    assert.equal(await c.reschedule(q, 'b', 0), true);
    assert.equal((await c.get(q, 'b')).state, 'ready');
    assert.equal(await c.rescheduleAt(q, 'c', at + 5), true);
    assert.equal((await c.get(q, 'c')).due, at + 5);
    assert.equal(await c.promote(q, 'c', 'nope'), 1);
    assert.equal(await c.cancel(q, 'a', 'b', 'nope'), 2);
    assert.equal(await c.get(q, 'a'), null);
    const s = await c.stats(q);
    assert.equal(s.ready, 3); // c, the server id, u
    assert.equal(typeof s.deadLettered, 'number');

    assert.equal(await c.schedule(q, 'nightly', 'digest', { cron: '30 2 * * *', tz: 'Europe/Berlin', ackTimeout: 1000, misfire: 'once' }), 'OK');
    assert.equal(await c.schedule(q, 'often', 'tick', { every: 3600000 }), 'OK');
    const list = await c.schedules(q);
    assert.deepEqual(list.map((x) => x.name).sort(), ['nightly', 'often']);
    assert.equal(await c.unschedule(q, 'nightly'), true);
    assert.equal(await c.unschedule(q, 'nightly'), false);
    await assert.rejects(c.schedule(q, 'bad', 'x', {}), TypeError);
  } finally {
    r.disconnect();
  }
});

test('kill -9 of a worker mid-job: the job comes back after its ack timeout, once', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('kill');
  const ackTimeout = 1500;
  try {
    await c.add(q, 'work', { id: 'k', ackTimeout });
    await c.add(q, 'keeps the queue and its counters', { id: 'keep', delay: 3600000 });
    const first = startWorker({ QUEUE: q, WORK_MS: '60000' });
    await waitFor(15000, 'the first worker to start the job', () => first.has('start k').length);
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    assert.deepEqual(await first.exited, [null, 'SIGKILL']);
    const held = await c.get(q, 'k');
    assert.equal(held.state, 'reserved', 'the killed worker held the job');
    assert.ok(held.ackDeadline > killedAt, 'held.ackDeadline');

    const got = [];
    const w = new Worker(r, q, async (job) => { got.push([job.id, Date.now()]); }, { logger: quiet, concurrency: 2 });
    try {
      await waitFor(ackTimeout + 10000, 'the job delivered again', () => got.length);
      assert.ok(got[0][1] >= held.ackDeadline, `delivered again at ${got[0][1]}, before its ack deadline ${held.ackDeadline}`);
      await waitFor(5000, 'the job acked', async () => (await c.get(q, 'k')) === null);
      // once: nothing comes back for another ack timeout
      await sleep(ackTimeout + 500);
      assert.equal(got.length, 1, `deliveries seen: ${JSON.stringify(got)}`);
      const s = await c.stats(q);
      assert.equal(s.deliveries, 2);
      assert.equal(s.expired, 1);
      assert.equal(s.acks, 1);
    } finally {
      await w.close();
    }
  } finally {
    r.disconnect();
  }
});

test('a job running 3x its ack timeout is not delivered again while its heartbeat runs', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('heartbeat');
  const ackTimeout = 2000;
  try {
    await c.add(q, 'slow', { id: 'h', ackTimeout });
    await c.add(q, 'keeps the queue and its counters', { id: 'keep', delay: 3600000 });
    let runs = 0;
    const w = new Worker(r, q, async () => { runs++; await sleep(3 * ackTimeout); }, { logger: quiet, concurrency: 2 });
    await waitFor(5000, 'the job started', () => runs === 1);
    // A second worker on the queue would take the job if its reservation
    // ever expired.
    const rival = [];
    const w2 = new Worker(r, q, async (job) => { rival.push(job.id); }, { logger: quiet });
    try {
      await waitFor(10000, 'the job acked', async () => (await c.get(q, 'h')) === null);
      assert.equal(runs, 1);
      assert.deepEqual(rival, []);
      const s = await c.stats(q);
      assert.equal(s.deliveries, 1);
      assert.equal(s.expired, 0);
      assert.equal(s.acks, 1);
    } finally {
      await Promise.all([w.close(), w2.close()]);
    }
  } finally {
    r.disconnect();
  }
});

test('a failing job is retried on the policy\'s delays and dead-lettered at its limit with its reason', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('retry');
  const dead = q + ':dead';
  // deterministic, so the due times can be checked: 300 ms, 600 ms
  const policy = (deliveries) => 300 * deliveries;
  try {
    await c.add(q, 'fails', { id: 'f', ackTimeout: 10000, retry: 2, deadLetter: dead });
    const thrown = [];
    const checks = [];
    const w = new Worker(r, q, async (job) => {
      thrown.push(Date.now());
      throw new Error(`boom ${thrown.length}`);
    }, { logger: quiet, backoff: policy });
    w.on('failed', (job, err) => {
      const failedAt = Date.now();
      const n = thrown.length;
      checks.push(c.get(q, job.id).then((info) => ({ n, err, failedAt, info })));
    });
    try {
      await waitFor(15000, 'the job dead-lettered', async () => (await c.get(dead, 'f')) !== null);
      const seen = await Promise.all(checks);
      assert.equal(seen.length, 3, 'three deliveries failed (RETRY 2)');
      for (const { n, info, failedAt } of seen.slice(0, 2)) {
        // the NACK was sent after the throw and answered before 'failed':
        // the due time it set lies in [throw + delay, failed + delay]
        assert.equal(info.state, 'delayed');
        assert.equal(info.deliveries, n);
        assert.equal(info.error, `boom ${n}`);
        const delay = policy(n);
        // (10 ms for the server's clock, read at other moments than ours)
        assert.ok(info.due >= thrown[n - 1] + delay - 10 && info.due <= failedAt + delay + 10,
          `delivery ${n}: due ${info.due - thrown[n - 1]} ms after the throw and ${info.due - failedAt} after the NACK's reply, want ${delay}`);
        // and it was not delivered before it
        assert.ok(thrown[n] >= info.due - 10, `delivery ${n + 1} at ${thrown[n] - info.due} ms from its due time`);
      }
      const d = await c.get(dead, 'f');
      assert.equal(d.error, 'boom 3');
      assert.equal(d.origin, q);
      assert.equal(await c.get(q, 'f'), null);
      assert.equal(w.metrics.failed, 3);
    } finally {
      await w.close();
    }
  } finally {
    r.disconnect();
  }
});

test('UnrecoverableError acks; a throw that is not an Error and a long reason are NACKed', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('errors');
  try {
    await c.add(q, 'u', { id: 'u', ackTimeout: 10000 });
    await c.add(q, 's', { id: 's', ackTimeout: 10000 });
    await c.add(q, 'l', { id: 'l', ackTimeout: 10000 });
    const failed = [];
    const w = new Worker(r, q, (job) => {
      if (job.id === 'u') throw new UnrecoverableError('bad payload');
      if (job.id === 's') return Promise.reject('a string'); // eslint-disable-line prefer-promise-reject-errors
      throw new Error('é'.repeat(600)); // 1200 bytes
    }, { logger: quiet, backoff: () => 60000 });
    w.on('failed', (job, err) => failed.push(job.id));
    try {
      await waitFor(10000, 'three failures', () => failed.length === 3);
      assert.equal(await c.get(q, 'u'), null, 'UnrecoverableError acks');
      assert.equal((await c.get(q, 's')).error, 'a string');
      const long = (await c.get(q, 'l')).error;
      assert.equal(long, 'é'.repeat(512), 'cut to 1 KiB on a character boundary');
    } finally {
      await w.close();
    }
  } finally {
    r.disconnect();
  }
});

test('the default backoff is exponential with full jitter', () => {
  const b = exponentialBackoff();
  for (let n = 1; n <= 20; n++) {
    for (let i = 0; i < 50; i++) {
      const d = b(n);
      assert.ok(d >= 0 && d < Math.min(3600000, 1000 * 2 ** (n - 1)), `delivery ${n}: ${d}`);
    }
  }
  assert.equal(exponentialBackoff({ jitter: false })(3), 4000);
  assert.equal(exponentialBackoff({ jitter: false })(30), 3600000);
});

test('the fetch blocks for less than ioredis\'s commandTimeout', () => {
  const fake = (options) => ({ duplicate() {}, call() {}, options });
  const block = (options, opts = {}) => new Worker(fake(options), 'q', () => {}, { autorun: false, ...opts }).blockSec;
  assert.equal(block({}), '1');
  assert.equal(block({ commandTimeout: 5000 }), '1');
  assert.equal(block({ commandTimeout: 1000 }), '0.75');
  assert.equal(block({ redisOptions: { commandTimeout: 400 } }), '0.3'); // a Cluster's
  assert.equal(block({ commandTimeout: 5000 }, { blockMs: 2000 }), '2');
  assert.throws(() => block({ commandTimeout: 100 }), RangeError);
});

test('SIGTERM: running jobs finish and are acked, nothing else is taken, exit 0', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('sigterm');
  try {
    for (let i = 1; i <= 5; i++) await c.add(q, 'job', { id: `t${i}`, ackTimeout: 30000 });
    const w = startWorker({ QUEUE: q, WORK_MS: '1500', CONCURRENCY: '2' });
    await waitFor(15000, 'two jobs running', () => w.has('start ').length === 2);
    w.child.kill('SIGTERM');
    const [code, signal] = await w.exited;
    assert.deepEqual([code, signal], [0, null], w.stderr);
    assert.equal(w.has('done ').length, 2, w.lines.join('\n'));
    assert.equal(w.has('start ').length, 2, 'nothing else was taken');
    assert.ok(w.lines.includes('closed'));
    const s = await c.stats(q);
    assert.equal(s.ready, 3);
    assert.equal(s.reserved, 0);
    assert.equal(s.deliveries, 2);
    assert.equal(s.acks, 2);
  } finally {
    r.disconnect();
  }
});

test('close at its deadline aborts the signal and gives the job back', { skip }, async () => {
  const r = connect();
  const c = new Client(r);
  const q = queueName('deadline');
  try {
    await c.add(q, 'stuck', { id: 'x', ackTimeout: 30000 });
    let aborted = null;
    let started;
    const running = new Promise((resolve) => { started = resolve; });
    const w = new Worker(r, q, (job) => new Promise(() => {
      const { signal } = job;
      signal.addEventListener('abort', () => { aborted = signal.reason; });
      started();
    }), { logger: quiet });
    await running;
    await w.close(300);
    assert.ok(aborted instanceof Error, 'the signal was aborted');
    const info = await c.get(q, 'x');
    assert.equal(info.state, 'ready');
    assert.equal(info.error, 'worker shutting down');
  } finally {
    r.disconnect();
  }
});

test('jobs due one by one: each ACK rides with the next fetch, none goes alone', { skip }, async () => {
  const r = connect();
  const q = queueName('onebyone');
  try {
    const base = Date.now() + 300;
    for (let i = 0; i < 40; i++) await r.call('DELAY.ADDAT', q, base + i * 10, 'p', 'ID', `j${i}`, 'ACKTIMEOUT', 30000);
    // The worker's fetches go on a duplicate of r; an ACK sent alone goes on r.
    let alone = 0;
    const call = r.call.bind(r);
    r.call = (...args) => {
      if (args[0] === 'DELAY.ACK') alone++;
      return call(...args);
    };
    let done = 0;
    let all;
    const finished = new Promise((resolve) => { all = resolve; });
    const w = new Worker(r, q, async () => {}, { logger: quiet });
    w.on('completed', () => { if (++done === 40) all(); });
    await finished;
    await w.close();
    assert.ok(alone <= 10, `${alone} of 40 ACKs went alone`);
  } finally {
    r.disconnect();
  }
});
