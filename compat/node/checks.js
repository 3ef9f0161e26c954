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
//
// The cluster checks get every node of a delayd cluster in DELAYD_COMPAT_ADDRS
// (comma-separated host:port); printing KILL_LEADER asks the Go test to kill
// the leader (SIGKILL), RESTART_KILLED to start it again, PAUSE_LEADER to
// freeze the leader for a while (SIGSTOP, SIGCONT), each answered on stdin
// (compat/harness_test.go, scriptCheck).
'use strict';

const assert = require('node:assert/strict');
const readline = require('node:readline');

const [host, portText] = process.env.DELAYD_COMPAT_ADDR.split(':');
const port = Number(portText);
const password = process.env.DELAYD_COMPAT_PASSWORD || undefined;
const againstRedis = process.env.DELAYD_COMPAT_TARGET === 'redis';
// DELAYD_COMPAT_GROUPS: the Raft groups the cluster splits its slots over;
// each node serves each group at an address of its own, each group a master.
const groups = Number(process.env.DELAYD_COMPAT_GROUPS || '1');
const addrs = (process.env.DELAYD_COMPAT_ADDRS || '').split(',').filter(Boolean).map((a) => {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
});

// tlsFiles reads the TLS check's CA and client certificate and key
// (DELAYD_COMPAT_TLS_CA, _CERT, _KEY: PEM files).
function tlsFiles() {
  const fs = require('node:fs');
  const read = (k) => fs.readFileSync(process.env[`DELAYD_COMPAT_TLS_${k}`]);
  return { ca: read('CA'), cert: read('CERT'), key: read('KEY') };
}

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

// askGo asks the Go test for a step (KILL_LEADER, RESTART_KILLED) and
// returns its answer.
async function askGo(line) {
  process.stdout.write(line + '\n');
  const rl = readline.createInterface({ input: process.stdin });
  let answer = '';
  for await (const l of rl) {
    answer = l.trim();
    break;
  }
  rl.close();
  if (!answer || answer.startsWith('error:')) throw new Error(`${line}: ${answer || 'no answer'}`);
  return answer;
}

// leaderAddr is the node whose INFO replication says role:master.
async function leaderAddr() {
  for (const a of addrs) {
    const c = new IORedis({ ...a, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => {});
    try {
      await c.connect();
      if (/role:master\r\n/.test(await c.info('replication'))) return a;
    } catch {
      // not this one
    } finally {
      c.disconnect();
    }
  }
  throw new Error('no node says role:master');
}

// withTimeout rejects when p takes longer than ms: a call the library keeps
// waiting on forever must not stop the workload.
function withTimeout(p, ms, what) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no reply within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const resumeBound = 15000;
const drainBound = 9000;

async function waitFor(timeout, what, cond) {
  const deadline = Date.now() + timeout;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`after ${timeout} ms: ${what()}`);
    await sleep(50);
  }
}

// failover is the failover workload of compat/cluster_test.go, step by
// step: a producer and a consumer loop, each on its own client from open();
// a client's add resolves when the server acknowledged the add (the id, or
// null: a job with that ID is already there), pop to [key, id, payload] or
// null.
async function failover(open) {
  const sent = new Map(), delay = new Map(), acked = new Map(), delivered = new Map();
  const errs = {}, firstErrs = [], early = [];
  let stopProducer = false, stopConsumer = false;
  const errored = (op, e) => {
    const kind = `${op} ${(e.message || String(e)).split(' ')[0]}`;
    errs[kind] = (errs[kind] || 0) + 1;
    if (firstErrs.length < 20) firstErrs.push(`${new Date().toISOString().slice(11, 23)} ${op}: ${e.message || e}`);
  };
  const producerClient = await open();
  const consumerClient = await open();
  const produce = async () => {
    for (let i = 0; !stopProducer; i++) {
      const id = `job-${i}`, d = (i * 137) % 2001;
      sent.set(id, Date.now());
      delay.set(id, d);
      while (!stopProducer) {
        try {
          await withTimeout(producerClient.add('jobs', id, d), 10000, 'DELAY.ADD');
          acked.set(id, Date.now());
          break;
        } catch (e) {
          errored('DELAY.ADD', e);
          await sleep(100);
        }
      }
      await sleep(20);
    }
  };
  const consume = async () => {
    while (!stopConsumer) {
      let job;
      try {
        job = await withTimeout(consumerClient.pop('jobs'), 10000, 'DELAY.POP');
      } catch (e) {
        errored('DELAY.POP', e);
        await sleep(100);
        continue;
      }
      if (job === null) continue;
      const id = String(job[1]), now = Date.now();
      if (!delivered.has(id)) {
        delivered.set(id, now);
        if (sent.has(id) && now < sent.get(id) + delay.get(id)) {
          early.push(`${id} (delay ${delay.get(id)} ms) after ${now - sent.get(id)} ms`);
        }
      }
      try {
        await withTimeout(consumerClient.ack('jobs', id), 10000, 'DELAY.ACK');
      } catch (e) {
        errored('DELAY.ACK', e); // the job comes again after its ack timeout
      }
    }
  };
  const count = (since) => {
    let a = 0, d = 0;
    for (const t of acked.values()) if (t >= since) a++;
    for (const t of delivered.values()) if (t >= since) d++;
    return [a, d];
  };
  const missing = () => [...acked.keys()].filter((id) => !delivered.has(id)).sort();
  const loops = [produce(), consume()];
  try {
    const start = Date.now();
    await waitFor(10000, () => `(acknowledged adds, deliveries) = ${count(start)}, want 25 and 5 before the kill`,
      () => count(start)[0] >= 25 && count(start)[1] >= 5);
    const killed = await askGo('KILL_LEADER');
    const kill = Date.now();
    console.error(`killed the leader ${killed}`);
    // 200 ms: a reply the old leader sent just before it died is not a
    // resumption (no election ends that fast).
    await waitFor(resumeBound, () => `since the kill (acknowledged adds, deliveries) = ${count(kill + 200)}, want both > 0`,
      () => Math.min(...count(kill + 200)) > 0);
    console.error(`resumed ${Date.now() - kill} ms after the kill`);
    await askGo('RESTART_KILLED');
    const back = Date.now();
    await waitFor(10000, () => `${count(back)[0]} adds acknowledged since the restart, want 10`, () => count(back)[0] >= 10);
    const paused = await askGo('PAUSE_LEADER');
    const cont = Date.now();
    console.error(`paused the leader ${paused}`);
    await waitFor(resumeBound, () => `since the paused leader went on (acknowledged adds, deliveries) = ${count(cont)}, want 10 and 1`,
      () => count(cont)[0] >= 10 && count(cont)[1] >= 1);
    stopProducer = true;
    await loops[0];
    await waitFor(drainBound, () => `${missing().length} acknowledged adds not delivered: ${missing()}`, () => missing().length === 0);
  } finally {
    stopProducer = stopConsumer = true;
    await Promise.race([Promise.all(loops), sleep(5000)]);
    console.error(`adds acknowledged: ${acked.size}, jobs delivered: ${delivered.size}, errors the client let through: ${JSON.stringify(errs)}`);
    for (const l of firstErrs) console.error('  ' + l);
  }
  assert.deepEqual(early, [], 'jobs delivered before their delay');
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

  async schedule() {
    const r = io.open();
    await schedule((...a) => r.call(...a));
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

  async tls() {
    const { ca, cert, key } = tlsFiles();
    const r = io.open({ tls: { ca, cert, key } });
    assert.equal(await r.ping(), 'PONG');
    assert.equal(await r.call('DELAY.ADD', 'q', '0', 'over-tls', 'ID', 'tls-1'), 'tls-1');
    assert.deepEqual(await r.call('DELAY.POP', 'q', '1'), ['q', 'tls-1', 'over-tls']);
    // No reconnects and no offline queue, so the refused handshake reaches
    // the command.
    const bare = io.open({ tls: { ca }, retryStrategy: () => null, maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true });
    const e = await rejects('connect without a client certificate', bare.connect().then(() => bare.ping()));
    console.error(`without a client certificate: ${e.message}`);
  },

  async reconnect() {
    const r = io.open();
    await r.call(...ready('q', 'job'));
    await waitRestart();
    assert.equal(await r.llen('q'), 1);
  },

  // openCluster is ioredis's Cluster as a user sets it up for failovers:
  // its defaults already follow MOVED (maxRedirections 16) and retry
  // CLUSTERDOWN and TRYAGAIN (retryDelayOnClusterDown, retryDelayOnTryAgain:
  // 100 ms each, within those 16), and a node whose connection closes makes
  // it refresh the slot map (CLUSTER SLOTS) and send the queued commands
  // again (retryDelayOnFailover 100 ms); what a user adds is a per-node
  // retryStrategy that gives up on a dead node quickly, so a refreshed map
  // takes over instead of reconnect attempts to the dead leader.
  openCluster(nodes = addrs) {
    const c = new IORedis.Cluster(nodes, {
      redisOptions: { retryStrategy: (times) => (times > 3 ? null : 100) },
    });
    c.on('error', () => {}); // node errors during the failover; the checks see the command errors
    opened.push(c);
    return c;
  },

  async cluster() {
    const lead = await leaderAddr();
    const seed = addrs.find((a) => a.port !== lead.port || a.host !== lead.host);
    const r = io.openCluster([seed]);
    assert.equal(await r.call('DELAY.ADD', 'orders', '0', 'hello', 'ID', 'order-1', 'ACKTIMEOUT', '30000'), 'order-1');
    assert.equal(Object.fromEntries(pairs(await r.call('DELAY.GET', 'orders', 'order-1'))).state, 'ready');
    assert.deepEqual(await r.call('DELAY.POP', 'orders', '1'), ['orders', 'order-1', 'hello']);
    assert.equal(await r.call('DELAY.ACK', 'orders', 'order-1'), 1);
    // A cluster pipeline must keep to one slot in ioredis: 20 adds to one
    // queue, then one add per queue on its own for 20 slots.
    const p = r.pipeline();
    for (let i = 0; i < 20; i++) p.call('DELAY.ADD', 'queue-0', '0', `job-${i}`);
    const res = await p.exec();
    for (const [err] of res) assert.equal(err, null);
    assert.equal(await r.llen('queue-0'), 20);
    for (let i = 1; i < 20; i++) await r.call('DELAY.ADD', `queue-${i}`, '0', 'job');
    for (let i = 1; i < 20; i++) assert.equal(await r.llen(`queue-${i}`), 1, `LLEN queue-${i}`);
    assert.equal(r.nodes('all').length, addrs.length * groups, 'the client knows every node');
  },

  async failover() {
    return failover(async () => {
      const r = io.openCluster();
      return {
        add: (q, id, d) => r.call('DELAY.ADD', q, String(d), id, 'ID', id, 'ACKTIMEOUT', '5000'),
        pop: (q) => r.call('DELAY.POP', q, '1'),
        ack: (q, id) => r.call('DELAY.ACK', q, id),
      };
    });
  },

  // writer is compat/failover_test.go's: with
  // DELAYD_FAILOVER_SETTINGS=defaults, ioredis's defaults only.
  async writer() {
    const r = process.env.DELAYD_FAILOVER_SETTINGS === 'defaults'
      ? new IORedis.Cluster(addrs)
      : io.openCluster();
    r.on('error', () => {});
    return writer('io', (q, id) => r.call('DELAY.ADD', q, '3600000', 'x', 'ID', id));
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

const { createClient, createCluster, WatchError, ErrorReply } = require('redis');

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

  async schedule() {
    const r = await nr.open();
    await schedule((...a) => r.sendCommand(a));
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

  async tls() {
    const { ca, cert, key } = tlsFiles();
    const r = await nr.open({ socket: { tls: true, ca, cert, key } });
    assert.equal(await r.ping(), 'PONG');
    assert.equal(await r.sendCommand(['DELAY.ADD', 'q', '0', 'over-tls', 'ID', 'tls-1']), 'tls-1');
    assert.deepEqual(await r.sendCommand(['DELAY.POP', 'q', '1']), ['q', 'tls-1', 'over-tls']);
    // node-redis sees TLS 1.3's late refusal (after the client's Finished)
    // as an 'error' event; a command sent meanwhile is not failed when
    // reconnects are off, so the check waits for the event.
    const bare = createClient({ socket: { host, port, tls: true, ca, reconnectStrategy: false } });
    opened.push(bare);
    const refused = new Promise((_, reject) => bare.on('error', reject));
    refused.catch(() => {});
    const e = await rejects('connect without a client certificate',
      withTimeout(Promise.race([refused, bare.connect().then(() => bare.ping())]), 5000, 'refusal'));
    console.error(`without a client certificate: ${e.message}`);
  },

  async reconnect() {
    const r = await nr.open();
    await r.sendCommand(ready('q', 'job'));
    await waitRestart();
    assert.equal(await r.lLen('q'), 1);
  },

  // openCluster is node-redis's createCluster with its defaults: it reads
  // the slot map (CLUSTER SLOTS) from the first root node that answers and
  // follows MOVED and ASK (maxCommandRedirections 16).
  async openCluster(nodes = addrs) {
    const c = createCluster({ rootNodes: nodes.map((socket) => ({ socket })) });
    c.on('error', () => {});
    opened.push(c);
    await withTimeout(c.connect(), 5000, 'cluster connect()');
    return c;
  },

  async cluster() {
    const lead = await leaderAddr();
    const seed = addrs.find((a) => a.port !== lead.port || a.host !== lead.host);
    const r = await nr.openCluster([seed]);
    // sendCommand(firstKey, isReadonly, args): the first key routes it.
    const call = (key, ...args) => r.sendCommand(key, false, args);
    assert.equal(await call('orders', 'DELAY.ADD', 'orders', '0', 'hello', 'ID', 'order-1', 'ACKTIMEOUT', '30000'), 'order-1');
    assert.equal(Object.fromEntries(pairs(await call('orders', 'DELAY.GET', 'orders', 'order-1'))).state, 'ready');
    assert.deepEqual(await call('orders', 'DELAY.POP', 'orders', '1'), ['orders', 'order-1', 'hello']);
    assert.equal(await call('orders', 'DELAY.ACK', 'orders', 'order-1'), 1);
    // Commands sent in one tick are pipelined per node: 20 queues, 20 slots.
    await Promise.all(Array.from({ length: 20 }, (_, i) => call(`queue-${i}`, 'DELAY.ADD', `queue-${i}`, '0', 'job')));
    for (let i = 0; i < 20; i++) assert.equal(await r.lLen(`queue-${i}`), 1, `LLEN queue-${i}`);
    assert.equal(r.masters.length, groups, 'one master per group');
    assert.ok(r.masters.some((m) => m.port === lead.port), 'the leader is a master');
  },

  // failover: through nrCall, what an app must do to follow a failover.
  async failover() {
    return failover(async () => {
      const call = nrCall();
      return {
        add: (q, id, d) => call(q, ['DELAY.ADD', q, String(d), id, 'ID', id, 'ACKTIMEOUT', '5000']),
        pop: (q) => call(q, ['DELAY.POP', q, '1']),
        ack: (q, id) => call(q, ['DELAY.ACK', q, id]),
      };
    });
  },

  // writer is compat/failover_test.go's: with
  // DELAYD_FAILOVER_SETTINGS=defaults, createCluster's defaults only.
  async writer() {
    let call = nrCall();
    if (process.env.DELAYD_FAILOVER_SETTINGS === 'defaults') {
      const c = createCluster({ rootNodes: addrs.map((socket) => ({ socket })) });
      c.on('error', () => {});
      await withTimeout(c.connect(), 5000, 'cluster connect()');
      call = (key, args) => c.sendCommand(key, false, args);
    }
    return writer('nr', (q, id) => call(q, ['DELAY.ADD', q, '3600000', 'x', 'ID', id]));
  },
};

// schedule is the "schedule" column for both libraries: call sends one
// command and resolves its reply.
async function schedule(call) {
  assert.equal(await call('DELAY.SCHEDULE', 'ticks', 'tick', 'EVERY', '100', 'hello'), 'OK');
  assert.equal(await call('DELAY.SCHEDULE', 'reports', 'daily', 'CRON', '0 9 * * *', 'TZ', 'Europe/Berlin', 'report'), 'OK');
  const listed = await call('DELAY.SCHEDULES', 'ticks');
  assert.equal(listed.length, 1, 'DELAY.SCHEDULES ticks lists one schedule');
  const entry = Array.isArray(listed[0]) ? Object.fromEntries(pairs(listed[0])) : listed[0];
  assert.equal(entry.name, 'tick');
  const job = await call('DELAY.POP', 'ticks', '5');
  assert.equal(job[2], 'hello');
  assert.match(job[1], /^tick:\d+$/, 'a firing is named name:<fire unix ms>');
  assert.ok(Number(job[1].slice(5)) <= Date.now(), 'a firing is never handed out before its time');
  assert.equal(await call('DELAY.UNSCHEDULE', 'ticks', 'tick'), 1);

  const unique = ['DELAY.ADD', 'orders', '60000', 'o1', 'ID', 'order-1', 'UNIQUE', '60000'];
  assert.equal(await call(...unique), 'order-1');
  assert.equal(await call('DELAY.PROMOTE', 'orders', 'order-1'), 1);
  assert.equal((await call('DELAY.POP', 'orders', '1'))[1], 'order-1');
  assert.equal(await call(...unique), null, 'a finished UNIQUE id stays taken');
  await call('DELAY.ADD', 'orders', '0', 'o2', 'ID', 'order-2');
  assert.equal(await call('DELAY.RESCHEDULE', 'orders', 'order-2', '60000'), 1);
  assert.equal(Object.fromEntries(pairs(await call('DELAY.GET', 'orders', 'order-2'))).state, 'delayed');

  await call('DELAY.ADD', 'mail', '0', 'low');
  await call('DELAY.ADD', 'mail', '0', 'high', 'PRIORITY', '9');
  assert.equal(await call('DELAY.LIMIT', 'mail', 'CONCURRENCY', '5', 'RATE', '100', '1000'), 'OK');
  const [key, jobs] = await call('DELAY.MPOP', '1', '1', 'mail', 'COUNT', '2');
  assert.equal(key, 'mail');
  assert.deepEqual(jobs.map((j) => j[1]), ['high', 'low']);
}

// nrCall is node-redis's cluster client as an app keeps it through a
// failover: node-redis 5 reads the slot map again only on MOVED and ASK
// (node-redis issue #2806); a master that dies never says MOVED, so its
// cluster client sends to the dead leader until the app steps in. What an
// app does, and the README says: the nodes give up reconnecting quickly
// (reconnectStrategy, so queued commands fail instead of waiting), and a
// command that failed without a server reply (the connection, not an
// ErrorReply such as CLUSTERDOWN) makes the app replace its cluster client
// with a new one, which reads the slot map from the root nodes. It returns
// call(firstKey, args).
function nrCall() {
  let r = null;
  let opening = null;
  const client = () => {
    if (r) return r;
    opening ??= (async () => {
      const c = createCluster({
        rootNodes: addrs.map((socket) => ({ socket })),
        defaults: { socket: { connectTimeout: 1000, reconnectStrategy: (retries) => (retries > 3 ? new Error('node gone') : 100) } },
      });
      c.on('error', () => {});
      opened.push(c);
      await withTimeout(c.connect(), 5000, 'cluster connect()');
      r = c;
      return c;
    })().finally(() => {
      opening = null;
    });
    return opening;
  };
  return async (key, args) => {
    const c = await client();
    try {
      return await c.sendCommand(key, false, args);
    } catch (e) {
      if (!(e instanceof ErrorReply) && r === c) {
        r = null;
        c.destroy();
      }
      throw e;
    }
  };
}

// writer adds jobs {fo}<prefix>-0, -1, ... (delayed an hour, each with its
// ID, a failed add retried with it) and prints "ack <id>" for each the
// server acknowledged and "err <kind>" for a failure, until it is killed:
// the writer of compat/failover_test.go, which times the failover.
async function writer(prefix, add) {
  const q = `{fo}${prefix}`;
  for (let i = 0; ;) {
    const id = `${prefix}-${i}`;
    try {
      await add(q, id);
      console.log(`ack ${id}`);
      i++;
    } catch (e) {
      console.log(`err ${e.constructor.name}: ${String(e.message).slice(0, 120)}`);
      await new Promise((res) => setTimeout(res, 50));
    }
    await new Promise((res) => setTimeout(res, 10));
  }
}

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
