// ioredis and node-redis checks of delayd's client compatibility suite
// (compat/doc.go).
//
// Run by the Go test as `node checks.js ioredis|node-redis FEATURE` against a
// server it started: DELAYD_COMPAT_ADDR is host:port, DELAYD_COMPAT_PASSWORD
// the requirepass of the AUTH check's server, DELAYD_COMPAT_TARGET `delayd`
// or `redis` (redis-server, to prove a check of plain Redis behaviour is
// real). Exit 0: pass; exit 3 after printing `N/A: reason`: the client has no
// such feature; anything else: fail. Printing RESTART asks the Go test to
// restart the server; it answers with a line on stdin once the server is back.
'use strict';

const assert = require('node:assert/strict');
const readline = require('node:readline');

const [host, portText] = process.env.DELAYD_COMPAT_ADDR.split(':');
const port = Number(portText);
const password = process.env.DELAYD_COMPAT_PASSWORD || undefined;
const againstRedis = process.env.DELAYD_COMPAT_TARGET === 'redis';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class NotApplicable extends Error {}

// ready is the command that adds a ready job: DELAY.ADD with delay 0, or
// RPUSH on redis-server (delayd defines them as the same thing).
function ready(queue, payload) {
  return againstRedis ? ['RPUSH', queue, payload] : ['DELAY.ADD', queue, '0', payload];
}

// rejects awaits p and returns its error, failing when it resolves.
async function rejects(what, p) {
  try {
    const v = await p;
    assert.fail(`${what}: resolved ${JSON.stringify(v)}, want an error`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    return e;
  }
}

// waitRestart asks the Go test to restart the server and waits until it has.
async function waitRestart() {
  process.stdout.write('RESTART\n');
  const rl = readline.createInterface({ input: process.stdin });
  for await (const _ of rl) break; // eslint-disable-line no-unused-vars
  rl.close();
}

function fields(text) {
  const out = {};
  for (const kv of text.trim().split(' ')) {
    const i = kv.indexOf('=');
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

// ---- ioredis ----

const IORedis = require('ioredis');

const io = {
  // open returns a client with ioredis's defaults (it sends INFO as its
  // ready check), changed only by opts.
  open(opts = {}) {
    const c = new IORedis({ host, port, ...opts });
    c.on('error', () => {}); // reconnects are expected; the checks see the errors
    opened.push(c);
    return c;
  },

  async handshake() {
    const r = io.open();
    assert.equal(await r.ping(), 'PONG');
    await r.call(...ready('q', 'job'));
    assert.equal(await r.llen('q'), 1);
  },

  async auth() {
    const none = io.open({ maxRetriesPerRequest: 0, enableOfflineQueue: true });
    const e1 = await rejects('PING without a password', none.ping());
    assert.match(e1.message, /^NOAUTH/);
    const wrong = io.open({ password: 'wrong', maxRetriesPerRequest: 0, retryStrategy: () => null });
    const e2 = await rejects('PING with a wrong password', wrong.ping());
    assert.match(e2.message, /WRONGPASS/);
    assert.equal(await io.open({ password }).ping(), 'PONG');
  },

  async delay() {
    const r = io.open();
    const add = ['DELAY.ADD', 'emails', '60000', 'welcome', 'ID', 'welcome-42'];
    assert.equal(await r.call(...add), 'welcome-42');
    assert.equal(await r.call(...add), null, 'a retry with the same ID replies nil');
    const flat = await r.call('DELAY.GET', 'emails', 'welcome-42');
    const job = Object.fromEntries(pairs(flat));
    assert.equal(job.state, 'delayed');
    assert.equal(job.payload, 'welcome');
    assert.equal(Object.fromEntries(pairs(await r.call('DELAY.STATS', 'emails'))).delayed, 1);
    assert.equal(await r.call('DELAY.CANCEL', 'emails', 'welcome-42'), 1);
    assert.equal(await r.call('DELAY.GET', 'emails', 'welcome-42'), null);
    const payload = Buffer.from([0, 0xff, 13, 10, 98]);
    await r.call('DELAY.ADD', 'bin', '0', payload);
    const popped = await r.callBuffer('DELAY.POP', 'bin', '1');
    assert.deepEqual(popped[2], payload);
  },

  async pipeline() {
    const r = io.open();
    const p = r.pipeline();
    for (let i = 0; i < 100; i++) p.call(...ready('q', `job-${i}`));
    const res = await p.exec();
    assert.equal(res.length, 100);
    for (const [err] of res) assert.equal(err, null);
    assert.equal(await r.llen('q'), 100);
  },

  async transaction() {
    const r = io.open();
    const m = r.multi();
    for (let i = 0; i < 100; i++) m.call(...ready('q', `job-${i}`));
    const res = await m.exec();
    assert.equal(res.length, 100);
    for (const [err] of res) assert.equal(err, null);
    assert.equal(await r.llen('q'), 100);

    const bad = r.multi();
    bad.call(...ready('aborted', 'job'));
    bad.call('RPUSH', 'aborted'); // wrong arity: refused while queuing
    const e = await rejects('EXEC after a wrong-arity command', bad.exec());
    assert.match(e.message, /EXECABORT/);
    assert.equal(await r.llen('aborted'), 0, 'nothing of an aborted transaction may run');

    const other = io.open();
    await r.watch('watched');
    await other.call(...ready('watched', 'theirs'));
    const watched = await r.multi().call(...ready('watched', 'mine')).exec();
    assert.equal(watched, null, 'EXEC after the watched queue changed replies null');
    assert.equal(await r.llen('watched'), 1);
  },

  async blpop() {
    const worker = io.open();
    const producer = io.open();
    const start = Date.now();
    setTimeout(() => producer.call(...ready('q', 'job')), 300);
    assert.deepEqual(await worker.blpop('q', 5), ['q', 'job']);
    assert.ok(Date.now() - start >= 250, 'BLPOP returned before the job was added');
    assert.equal(await worker.blpop('empty', 1), null);
  },

  // popack sets commandTimeout (ioredis has none by default, so a long pop
  // is fine there; with one, the pop timeout must stay below it).
  async popack() {
    const r = io.open({ commandTimeout: 3000 });
    return popAck({
      call: (...a) => r.call(...a),
    });
  },

  async lmove() {
    const r = io.open();
    await r.call(...ready('q', 'job-1'));
    await r.call(...ready('q', 'job-2'));
    assert.equal(await r.blmove('q', 'q:processing', 'LEFT', 'RIGHT', 1), 'job-1');
    assert.equal(await r.rpoplpush('q', 'q:processing'), 'job-2');
    assert.equal(await r.lrem('q:processing', 1, 'job-1'), 1);
    assert.equal(await r.lrem('q:processing', 1, 'job-2'), 1);
    assert.equal(await r.exists('q', 'q:processing'), 0);
  },

  async scan() {
    const r = io.open();
    for (const q of ['jobs:a', 'jobs:b', 'other']) await r.call(...ready(q, 'job'));
    const keys = [];
    for await (const page of r.scanStream({ match: 'jobs:*', count: 1 })) keys.push(...page);
    assert.deepEqual(keys.sort(), ['jobs:a', 'jobs:b']);
    assert.deepEqual((await r.keys('jobs:*')).sort(), ['jobs:a', 'jobs:b']);
    assert.equal(await r.dbsize(), 3);
  },

  async clientinfo() {
    const r = io.open({ connectionName: 'compat-worker' });
    const info = fields(await r.client('INFO'));
    for (const k of ['id', 'addr', 'laddr', 'fd', 'name', 'age', 'idle', 'flags', 'db', 'qbuf', 'qbuf-free', 'obl', 'oll', 'omem', 'tot-mem', 'cmd', 'user', 'resp']) {
      assert.ok(k in info, `CLIENT INFO lacks Redis's field ${k}`);
    }
    assert.equal(info.name, 'compat-worker');
    assert.match(await r.client('LIST'), /name=compat-worker/);
  },

  async reconnect() {
    const r = io.open();
    await r.call(...ready('q', 'job'));
    await waitRestart();
    assert.equal(await r.llen('q'), 1);
  },

  async resp3() {
    throw new NotApplicable('ioredis speaks RESP2 only');
  },
  async cache() {
    throw new NotApplicable('ioredis has no client-side cache');
  },
};

function pairs(flat) {
  const out = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}

// popAck is the worker of examples/node: DELAY.POP through a generic call
// is bounded by the client's own timeout, so it pops with 1 s in a loop.
async function popAck(c) {
  const start = Date.now();
  const id = await c.call('DELAY.ADD', 'q', '1500', 'job', 'ACKTIMEOUT', '30000');
  let job = null;
  let empty = 0;
  while (job === null) {
    job = await c.call('DELAY.POP', 'q', '1');
    if (job === null) empty++;
  }
  assert.ok(Date.now() - start >= 1500, `the job came after ${Date.now() - start} ms, before its delay of 1.5 s`);
  assert.ok(empty > 0, 'an empty DELAY.POP replies null');
  assert.deepEqual(job, ['q', id, 'job']);
  const state = await c.call('DELAY.GET', 'q', id);
  const job2 = Array.isArray(state) ? Object.fromEntries(pairs(state)) : state;
  assert.equal(job2.state, 'reserved');
  assert.equal(await c.call('DELAY.ACK', 'q', id), 1);
  assert.equal(await c.call('DELAY.GET', 'q', id), null);
}

// ---- node-redis ----

const { createClient, WatchError } = require('redis');

const nr = {
  // open connects a client with node-redis's defaults, changed by opts.
  async open(opts = {}) {
    const { socket, ...rest } = opts;
    const c = createClient({ socket: { host, port, ...socket }, ...rest });
    c.on('error', () => {}); // reconnects are expected; the checks see the errors
    opened.push(c);
    // node-redis retries a failed handshake forever: give up after 5 s.
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('connect() did not finish within 5 s (node-redis retries a failed handshake forever)')), 5000);
    });
    try {
      await Promise.race([c.connect(), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return c;
  },

  async handshake() {
    const r = await nr.open();
    assert.equal(await r.ping(), 'PONG');
    await r.sendCommand(ready('q', 'job'));
    assert.equal(await r.lLen('q'), 1);
  },

  async resp3() {
    const r = await nr.open({ RESP: 3 });
    const hello = await r.sendCommand(['HELLO', '3']);
    assert.equal(hello.proto, 3);
    assert.equal(hello.server, 'redis');
    if (!againstRedis) {
      await r.sendCommand(['DELAY.ADD', 'q', '60000', 'p', 'ID', 'j1']);
      const job = await r.sendCommand(['DELAY.GET', 'q', 'j1']);
      assert.equal(job.state, 'delayed', 'DELAY.GET under RESP3 is a map');
    }
  },

  async auth() {
    const none = await nr.open();
    const e1 = await rejects('PING without a password', none.ping());
    assert.match(e1.message, /^NOAUTH/);
    const e2 = await rejects('connect with a wrong password', nr.open({ password: 'wrong', socket: { reconnectStrategy: false } }));
    assert.match(e2.message, /WRONGPASS/);
    assert.equal(await (await nr.open({ password })).ping(), 'PONG');
  },

  async delay() {
    const r = await nr.open();
    const add = ['DELAY.ADD', 'emails', '60000', 'welcome', 'ID', 'welcome-42'];
    assert.equal(await r.sendCommand(add), 'welcome-42');
    assert.equal(await r.sendCommand(add), null, 'a retry with the same ID replies nil');
    const job = Object.fromEntries(pairs(await r.sendCommand(['DELAY.GET', 'emails', 'welcome-42'])));
    assert.equal(job.state, 'delayed');
    assert.equal(job.payload, 'welcome');
    assert.equal(await r.sendCommand(['DELAY.CANCEL', 'emails', 'welcome-42']), 1);
    assert.equal(await r.sendCommand(['DELAY.GET', 'emails', 'welcome-42']), null);
  },

  // pipeline: node-redis pipelines the commands sent in one tick on its
  // own; that is its default pipeline.
  async pipeline() {
    const r = await nr.open();
    const res = await Promise.all(Array.from({ length: 100 }, (_, i) => r.sendCommand(ready('q', `job-${i}`))));
    assert.equal(res.length, 100);
    assert.equal(await r.lLen('q'), 100);
  },

  async transaction() {
    const r = await nr.open();
    const m = r.multi();
    for (let i = 0; i < 100; i++) m.addCommand(ready('q', `job-${i}`));
    assert.equal((await m.exec()).length, 100);
    assert.equal(await r.lLen('q'), 100);

    const bad = r.multi().addCommand(ready('aborted', 'job')).addCommand(['RPUSH', 'aborted']);
    const e = await rejects('EXEC after a wrong-arity command', bad.exec());
    // node-redis rejects with the queued command's error (EXECABORT's cause)
    assert.match(e.message, /wrong number of arguments for 'rpush'/);
    assert.equal(await r.lLen('aborted'), 0, 'nothing of an aborted transaction may run');

    // node-redis 5 runs WATCH on a connection of its own.
    const own = await nr.open();
    const other = await nr.open();
    await own.watch('watched');
    await other.sendCommand(ready('watched', 'theirs'));
    const err = await rejects('EXEC after the watched queue changed', own.multi().addCommand(ready('watched', 'mine')).exec());
    assert.ok(err instanceof WatchError, `got ${err}`);
    assert.equal(await r.lLen('watched'), 1);
  },

  async blpop() {
    const worker = await nr.open();
    const producer = await nr.open();
    const start = Date.now();
    setTimeout(() => producer.sendCommand(ready('q', 'job')), 300);
    assert.deepEqual(await worker.blPop('q', 5), { key: 'q', element: 'job' });
    assert.ok(Date.now() - start >= 250, 'BLPOP returned before the job was added');
    assert.equal(await worker.blPop('empty', 1), null);
  },

  // popack sets socketTimeout (node-redis has none by default; with one,
  // the pop timeout must stay below it).
  async popack() {
    const r = await nr.open({ socket: { socketTimeout: 3000 } });
    return popAck({ call: (...a) => r.sendCommand(a) });
  },

  async lmove() {
    const r = await nr.open();
    await r.sendCommand(ready('q', 'job-1'));
    await r.sendCommand(ready('q', 'job-2'));
    assert.equal(await r.blMove('q', 'q:processing', 'LEFT', 'RIGHT', 1), 'job-1');
    assert.equal(await r.rPopLPush('q', 'q:processing'), 'job-2');
    assert.equal(await r.lRem('q:processing', 1, 'job-1'), 1);
    assert.equal(await r.lRem('q:processing', 1, 'job-2'), 1);
    assert.equal(await r.exists(['q', 'q:processing']), 0);
  },

  async scan() {
    const r = await nr.open();
    for (const q of ['jobs:a', 'jobs:b', 'other']) await r.sendCommand(ready(q, 'job'));
    const keys = [];
    for await (const page of r.scanIterator({ MATCH: 'jobs:*', COUNT: 1 })) keys.push(...page);
    assert.deepEqual(keys.sort(), ['jobs:a', 'jobs:b']);
    assert.deepEqual((await r.keys('jobs:*')).sort(), ['jobs:a', 'jobs:b']);
    assert.equal(await r.dbSize(), 3);
  },

  async clientinfo() {
    const r = await nr.open({ name: 'compat-worker' });
    const info = await r.clientInfo();
    assert.ok(info.id > 0, `CLIENT INFO id: ${JSON.stringify(info)}`);
    assert.equal(info.name, 'compat-worker');
    assert.ok(info.addr, 'CLIENT INFO addr');
    assert.ok((await r.clientList()).some((c) => c.name === 'compat-worker'), 'CLIENT LIST has this client');
  },

  // cache: node-redis 5's clientSideCache turns CLIENT TRACKING on in its
  // handshake and drops an entry when the server pushes an invalidation.
  async cache() {
    const r = await nr.open({ RESP: 3, clientSideCache: { ttl: 0, maxEntries: 0 } });
    const other = await nr.open();
    assert.equal(await r.lLen('q'), 0);
    assert.equal(await r.lLen('q'), 0);
    assert.equal(r.clientSideCache.stats().hitCount, 1, 'the second LLEN is a cache hit');
    await other.sendCommand(ready('q', 'job'));
    const deadline = Date.now() + 3000;
    while ((await r.lLen('q')) !== 1) {
      assert.ok(Date.now() < deadline, 'cached LLEN still 0 3 s after another client added a job: no invalidation');
      await sleep(20);
    }
  },

  async reconnect() {
    const r = await nr.open();
    await r.sendCommand(ready('q', 'job'));
    await waitRestart();
    assert.equal(await r.lLen('q'), 1);
  },
};

// ---- main ----

const opened = [];

async function main() {
  const [clientName, feature] = process.argv.slice(2);
  const checks = { ioredis: io, 'node-redis': nr }[clientName];
  if (!checks || typeof checks[feature] !== 'function') {
    console.error(`usage: node checks.js ioredis|node-redis FEATURE (got ${clientName} ${feature})`);
    process.exit(2);
  }
  const version = require(`${clientName === 'ioredis' ? 'ioredis' : 'redis'}/package.json`).version;
  console.error(`${clientName} ${version}: ${feature}`);
  let code = 0;
  try {
    await checks[feature]();
  } catch (e) {
    if (e instanceof NotApplicable) {
      console.log(`N/A: ${e.message}`);
      code = 3;
    } else {
      console.error(e);
      code = 1;
    }
  }
  for (const c of opened) {
    try {
      c.disconnect ? c.disconnect() : c.destroy();
    } catch {
      // already closed
    }
  }
  process.exit(code);
}

main();
