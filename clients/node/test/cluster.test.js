// The contract's failover test: a 3-node delayd cluster (DELAYD_TEST_CLUSTER)
// whose leader is killed under load, by asking the Go test that started it
// (a POST to DELAYD_TEST_FAULT); integration_test/nodelib_test.go runs this.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('..');
const { cluster, connectCluster, sleep, waitFor, startWorker } = require('./helpers');

const fault = process.env.DELAYD_TEST_FAULT || '';
const skip = cluster && fault ? false : 'DELAYD_TEST_CLUSTER and DELAYD_TEST_FAULT are not set (integration_test/nodelib_test.go starts a cluster and sets them)';

test('a 3-node cluster\'s leader killed under load: every job completed, none twice but after an ack timeout', { skip, timeout: 180000 }, async (t) => {
  const r = connectCluster();
  const c = new Client(r);
  const q = `{nodelib}:failover:${process.pid}`;
  const jobs = 400;
  const ackTimeout = 3000;
  const starts = new Map(); // id -> [deliveries...]
  const dones = new Map(); // id -> count
  const w = startWorker({ DELAYD_TEST_ADDR: '', QUEUE: q, WORK_MS: '20', CONCURRENCY: '10' }, (line) => {
    const [what, id, deliveries] = line.split(' ');
    if (what === 'start') starts.set(id, [...(starts.get(id) || []), deliveries]);
    if (what === 'done') dones.set(id, (dones.get(id) || 0) + 1);
  });
  let killed = '';
  try {
    const added = [];
    for (let i = 0; i < jobs; i++) {
      if (i === jobs / 4) {
        const res = await fetch(fault, { method: 'POST' });
        killed = await res.text();
        assert.equal(res.status, 200, killed);
      }
      const id = `f${i}`;
      const deadline = Date.now() + 30000;
      for (;;) {
        try {
          // an add sent again with its id is safe: null if it is there
          await c.add(q, { i }, { id, delay: i % 500, ackTimeout });
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await sleep(100);
        }
      }
      added.push(id);
      if (i % 20 === 0) await sleep(10); // a stream, not one burst
    }
    await waitFor(90000, 'every job completed', () => added.every((id) => dones.has(id)));
    w.child.kill('SIGTERM');
    const [code] = await w.exited;
    assert.equal(code, 0, w.stderr.slice(-4000));

    let redelivered = 0;
    for (const id of added) {
      const ds = starts.get(id) || [];
      assert.ok(ds.length >= 1, `${id} never started`);
      // each start is another delivery: a double would show one delivery
      // number twice
      assert.equal(new Set(ds).size, ds.length, `${id} started twice in one delivery: ${ds}`);
      assert.ok(!ds.includes('?'), `${id}: deliveries unknown: ${ds}`);
      assert.ok(dones.get(id) <= ds.length, `${id} completed ${dones.get(id)} times in ${ds.length} deliveries`);
      if (ds.length > 1) redelivered++;
    }
    t.diagnostic(`killed ${killed}; ${added.length} jobs, ${redelivered} delivered again after an ack timeout`);
    t.diagnostic(`the worker's log:\n${w.stderr.trim()}`);
  } finally {
    if (w.child.exitCode === null) w.child.kill('SIGKILL');
    r.disconnect();
  }
});
