// The dashboard in a real browser. Run by e2e_test.go, which started the
// server (DELAYD_E2E_URL) and answers "RESP <json>" lines with go-redis, so
// what a page shows is checked against what RESP says. Exits non-zero on
// the first failed check, and after all of them if the browser saw any
// console error, page error or failed request.
'use strict';
const { chromium } = require('playwright-core');
const readline = require('readline');
const fs = require('fs');
const path = require('path');

const BASE = process.env.DELAYD_E2E_URL;
const SHOTS = process.env.DELAYD_SCREENSHOTS === '1' ? process.env.DELAYD_E2E_SHOTS : '';
const MODE = process.env.DELAYD_E2E_MODE || 'all';
const LIVE_WITHIN = 2000; // ms: the overview follows adds and pops within this

// --- talking to the Go side
const waiting = [];
readline.createInterface({ input: process.stdin }).on('line', (l) => waiting.shift()(JSON.parse(l)));
function ask(prefix, payload) {
  return new Promise((resolve, reject) => {
    waiting.push((r) => (r.error !== undefined ? reject(new Error(`${payload}: ${r.error}`)) : resolve(r.value)));
    process.stdout.write(prefix + ' ' + JSON.stringify(payload) + '\n');
  });
}
const resp = (...args) => ask('RESP', args);
const pipeline = (cmds) => ask('RESPN', cmds);
const hex = (h) => ({ hex: h });

function parseInfo(text) {
  const out = {};
  for (const line of String(text).split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}
const info = async () => parseInfo(await resp('INFO'));

// --- checks
let step = '';
function check(cond, msg) {
  if (!cond) throw new Error(`${step}: ${msg}`);
}
function eq(got, want, what) {
  check(JSON.stringify(got) === JSON.stringify(want), `${what}: page shows ${JSON.stringify(got)}, RESP says ${JSON.stringify(want)}`);
}
async function within(ms, what, fn) {
  const t0 = Date.now();
  let last;
  for (;;) {
    last = await fn();
    if (last === true) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`${step}: ${what} not within ${ms}ms (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// --- the browser
const problems = [];
let nextDialog = null; // 'accept' or 'dismiss' for the next confirm()
let lastDialog = '';

function watch(page) {
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error on ${page.url()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error on ${page.url()}: ${e.message}`));
  page.on('requestfailed', (r) => {
    const f = r.failure() ? r.failure().errorText : '';
    // A live update cut short by leaving the page is not a failure.
    if (f === 'net::ERR_ABORTED') return;
    problems.push(`request failed: ${r.method()} ${r.url()}: ${f}`);
  });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`); });
  page.on('dialog', async (d) => {
    lastDialog = d.message();
    if (d.type() !== 'confirm') {
      problems.push(`unexpected ${d.type()} dialog: ${d.message()}`);
      await d.dismiss();
      return;
    }
    const how = nextDialog;
    nextDialog = null;
    if (how === 'accept') await d.accept();
    else await d.dismiss();
  });
}

async function value(loc) {
  const v = await loc.getAttribute('value');
  return v === null ? null : Number(v);
}
async function shot(page, name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `dashboard-${name}.png`) }); // the viewport: small files
  console.log(`screenshot ${name}`);
}
async function goto(page, url) {
  const r = await page.goto(BASE + url);
  check(r.ok(), `GET ${url}: HTTP ${r.status()}`);
}
// click a button whose form asks to confirm; answer how.
async function confirmClick(page, button, how) {
  nextDialog = how;
  lastDialog = '';
  await button.click();
  await within(2000, 'the confirm dialog', async () => lastDialog !== '' || `no dialog`);
}
async function toast(page, re) {
  const t = page.locator('#toast');
  await t.waitFor({ state: 'visible', timeout: 3000 });
  const text = await t.textContent();
  check(re.test(text), `toast says ${JSON.stringify(text)}, want ${re}`);
  await t.click(); // hide it for the next one
  return text;
}
const ids = (rows) => rows.map((r) => r[0]);

// --- the data every page shows
async function seed() {
  await resp('FLUSHALL');
  const cmds = [];
  for (let i = 1; i <= 30; i++) cmds.push(['DELAY.ADD', 'emails', String(3600000 + i * 60000), JSON.stringify({ to: `user${i}@example.com`, template: 'welcome' })]);
  for (let i = 1; i <= 8; i++) cmds.push(['DELAY.ADD', 'emails', '0', `send-now-${i}`]);
  for (const q of ['billing', 'reports', 'thumbnails', 'webhooks']) {
    for (let i = 1; i <= 4; i++) {
      cmds.push(['DELAY.ADD', q, String(i * 600000), `${q} job ${i}`]);
      cmds.push(['DELAY.ADD', q, '0', `${q} ready ${i}`]);
    }
  }
  for (let i = 0; i < 120; i++) cmds.push(['DELAY.ADD', `page-${String(i).padStart(3, '0')}`, String(86400000), `p${i}`]);
  for (let i = 0; i < 12; i++) cmds.push(['DELAY.ADD', 'busiest', '0', `b${i}`]);
  // Dead-lettered jobs: one delivery each, an ack timeout of 50ms.
  for (let i = 1; i <= 4; i++) cmds.push(['DELAY.ADD', 'orders', '0', `order ${i}`, 'ID', `order-${i}`, 'RETRY', '0', 'ACKTIMEOUT', '50', 'DEADLETTER', 'orders-dead']);
  // A job a worker holds, then jobs whose payloads test the job page.
  cmds.push(['DELAY.ADD', 'show', '0', 'being worked on', 'ID', 'held', 'ACKTIMEOUT', '600000']);
  await pipeline(cmds);
  const held = await resp('DELAY.POP', 'show', '1');
  check(held && held.includes('held'), `DELAY.POP show: ${JSON.stringify(held)}`);
  await pipeline([
    ['DELAY.ADD', 'show', '0', '<script>alert("xss")</script><img src=x onerror=alert(2)> & "quotes"', 'ID', 'xss'],
    ['DELAY.ADD', 'show', '0', hex('000102ff68656c6c6f89504e470d0a1a0a'), 'ID', 'binary'],
    ['DELAY.ADD', 'show', '0', 'x'.repeat(10000) + 'THE-END', 'ID', 'big'],
  ]);
  await resp('DELAY.SCHEDULE', 'reports', 'nightly', 'CRON', '30 2 * * *', 'TZ', 'Europe/Berlin', '{"report":"daily"}', 'MISFIRE', 'once');
  await resp('DELAY.SCHEDULE', 'heartbeat', 'tick', 'EVERY', '3600000', 'ping');
  for (let i = 1; i <= 4; i++) await resp('DELAY.POP', 'orders', '1');
  await within(3000, 'four jobs dead-lettered into orders-dead', async () => {
    const s = await resp('DELAY.STATS', 'orders-dead');
    return s.ready === 4 || s;
  });
}

async function overview(page) {
  step = 'overview';
  await goto(page, '/');
  const i = await info();
  for (const k of ['jobs', 'delayed', 'ready', 'reserved', 'queues']) {
    eq(await value(page.locator(`#ov-jobs data[data-k=${k}]`)), Number(i[k]), k);
  }
  eq(await value(page.locator('data[data-k=jobs_added]')), Number(i.jobs_added), 'jobs added');
  check(await page.locator('#ov-clients').getByText('e2e-go').count() > 0, 'the clients table lists the go-redis connection (e2e-go)');
  const lat = page.locator('#ov-lateness');
  if ((await resp('INFO', 'lateness')).includes('# Lateness')) {
    check(await lat.isVisible(), 'INFO has a lateness section: the histogram shows');
    check(await lat.locator('meter').count() > 0, 'the histogram has bars');
  } else {
    check(!(await lat.isVisible()), 'INFO has no lateness section: no histogram');
  }
  await page.waitForTimeout(1200); // a rate needs two samples
  await shot(page, 'overview');

  step = 'overview follows adds and pops';
  const ready = page.locator('#ov-jobs data[data-k=ready]');
  const jobs = page.locator('#ov-jobs data[data-k=jobs]');
  const before = Number((await info()).ready);
  await pipeline(Array.from({ length: 5 }, (_, n) => ['DELAY.ADD', 'live', '0', `live ${n}`]));
  const want = Number((await info()).ready);
  check(want === before + 5, `RESP ready went from ${before} to ${want}, want +5`);
  const tAdd = await within(LIVE_WITHIN, 'ready count after 5 adds', async () => (await value(ready)) === want || (await value(ready)));
  eq(await value(jobs), Number((await info()).jobs), 'jobs after adds');
  await resp('LPOP', 'live', '5');
  const after = Number((await info()).ready);
  const tPop = await within(LIVE_WITHIN, 'ready count after 5 pops', async () => (await value(ready)) === after || (await value(ready)));
  console.log(`live: adds shown after ${tAdd}ms, pops after ${tPop}ms`);
  await within(LIVE_WITHIN, 'adds/s shows a number', async () => /^[0-9.,]+$/.test(await page.locator('[data-k=add_rate]').textContent()) || 'no rate');
}

async function queues(page) {
  step = 'queues';
  await goto(page, '/queues');
  const all = (await resp('KEYS', '*')).sort();
  eq(await value(page.locator('data[data-k=queue_count]')), all.length, 'queue count');
  const names = await page.locator('tbody tr[data-queue]').evaluateAll((rows) => rows.map((r) => r.dataset.queue));
  eq(names, all.slice(0, 50), 'page 1, by name');
  const stats = await pipeline(names.map((n) => ['DELAY.STATS', n]));
  for (const [n, name] of names.entries()) {
    const row = page.locator(`tbody tr[data-queue="${name}"]`);
    for (const k of ['delayed', 'ready', 'reserved']) eq(await value(row.locator(`data[data-k=${k}]`)), stats[n][k], `${name} ${k}`);
  }
  await shot(page, 'queues');

  step = 'queues sorted by ready';
  await page.locator('th a[data-sort=ready]').click();
  await page.waitForURL(/sort=ready/);
  const readies = await page.locator('tbody data[data-k=ready]').evaluateAll((ds) => ds.map((d) => Number(d.value)));
  check(readies.length === 50, `50 rows, got ${readies.length}`);
  check(readies.every((v, i) => i === 0 || readies[i - 1] >= v), `ready counts not descending: ${readies}`);
  const top = await page.locator('tbody tr[data-queue]').first().getAttribute('data-queue');
  const topStats = await resp('DELAY.STATS', top);
  eq(readies[0], topStats.ready, `${top} ready`);
  const most = Math.max(...(await pipeline(all.map((n) => ['DELAY.STATS', n]))).map((s) => s.ready));
  eq(readies[0], most, 'the most ready jobs of any queue');

  step = 'queues: next page';
  await page.locator('a[rel=next]').click();
  await page.waitForURL(/page=2/);
  check(await page.locator('.pager').getByText('page 2 of').count() === 1, 'on page 2');

  step = 'queues: filter';
  await goto(page, '/queues');
  await page.locator('#match').fill('page-1*');
  await page.locator('form.filter button').click();
  await page.waitForURL(/match=page-1/);
  eq(await value(page.locator('data[data-k=queue_count]')), (await resp('KEYS', 'page-1*')).length, 'queues matching page-1*');
}

async function queuePage(page) {
  step = 'queue page';
  await goto(page, '/queue?key=emails');
  const s = await resp('DELAY.STATS', 'emails');
  for (const k of ['delayed', 'ready', 'reserved']) eq(await value(page.locator(`#q-head data[data-k=${k}]`)), s[k], k);
  const up = await resp('DELAY.UPCOMING', 'emails', '25');
  eq(await page.locator('#q-upcoming tbody tr').evaluateAll((rs) => rs.map((r) => r.dataset.id)), ids(up), 'next delayed jobs, by due time');
  const dues = await page.locator('#q-upcoming time').evaluateAll((ts) => ts.map((t) => Number(t.dataset.ms)));
  eq(dues, up.map((u) => Number(u[1])), 'their due times');
  const peek = await resp('DELAY.PEEK', 'emails', '25');
  eq(await page.locator('#q-ready tbody tr').evaluateAll((rs) => rs.map((r) => r.dataset.id)), ids(peek), 'ready jobs');
  await shot(page, 'queue');

  step = 'queue page: reserved job';
  await goto(page, '/queue?key=show');
  eq(await value(page.locator('#q-head data[data-k=reserved]')), 1, 'reserved');
  const rsv = await resp('DELAY.RESERVED', 'show', '25');
  eq(await page.locator('#q-reserved tbody tr').evaluateAll((rs) => rs.map((r) => r.dataset.id)), ids(rsv), 'reserved jobs, by ack deadline');
  const deadlines = await page.locator('#q-reserved tbody time').evaluateAll((ts) => ts.map((t) => Number(t.dataset.ms)));
  eq(deadlines, rsv.map((r) => Number(r[1])), 'their ack deadlines');
  await page.locator('#jobid').fill('held');
  await page.locator('#q-reserved form.filter button').click();
  await page.waitForURL(/\/job\?/);
  const held = await resp('DELAY.GET', 'show', 'held');
  eq(await page.locator('[data-field=state]').textContent(), 'reserved', 'state');
  eq(Number(await page.locator('[data-field=ack_deadline] time').getAttribute('data-ms')), Number(held.ack_deadline), 'ack deadline');
}

// Schedules are text, on their queue's page and on /schedules, and can be
// removed from there.
async function schedules(page) {
  step = 'schedules on the queue page';
  await goto(page, '/queue?key=reports');
  const row = page.locator('#q-schedules tr[data-schedule=nightly]');
  eq(await row.locator('[data-k=spec]').textContent(), 'CRON 30 2 * * *', 'spec');
  eq(await row.locator('[data-k=zone]').textContent(), 'Europe/Berlin', 'zone');
  const [sc] = await resp('DELAY.SCHEDULES', 'reports');
  eq(Number(await row.locator('[data-k=next] time').getAttribute('data-ms')), Number(sc.next), 'next fire');
  check(!/\[\d+ \d+ \d+/.test(await page.locator('#q-schedules').textContent()), 'a schedule shown as byte values');

  step = 'the schedules page';
  await page.locator('nav a[href="/schedules"]').click();
  await page.waitForURL(/\/schedules$/);
  const all = await resp('DELAY.SCHEDULES');
  eq(await value(page.locator('data[data-k=schedule_count]')), all.length, 'schedule count');
  eq(await page.locator('tr[data-schedule]').evaluateAll((rs) => rs.map((r) => [r.dataset.queue, r.dataset.schedule])),
    all.map((x) => [x.queue, x.name]), 'schedules, by queue and name');
  eq(await page.locator('tr[data-schedule=tick] [data-k=spec]').textContent(), 'EVERY 3600000', 'EVERY spec');
  eq(await page.locator('tr[data-schedule=nightly] [data-k=misfire]').textContent(), 'once', 'misfire policy');
  await shot(page, 'schedules');

  step = 'unschedule';
  await confirmClick(page, page.locator('tr[data-schedule=tick] form[data-op=unschedule] button'), 'accept');
  await toast(page, /Removed schedule tick/);
  eq((await resp('DELAY.SCHEDULES', 'heartbeat')).length, 0, 'DELAY.SCHEDULES heartbeat after unschedule');
  await within(LIVE_WITHIN, 'the row goes', async () => (await page.locator('tr[data-schedule=tick]').count()) === 0 || 'still there');
}

async function jobPage(page) {
  step = 'job page: text that looks like HTML';
  await goto(page, '/job?key=show&id=xss');
  const j = await resp('DELAY.GET', 'show', 'xss');
  eq(await page.locator('pre[data-k=payload]').textContent(), j.payload, 'payload text');
  eq(await page.locator('main script, main img').count(), 0, 'elements made from the payload');
  eq(await page.locator('[data-field=state]').textContent(), j.state, 'state');
  eq(Number(await page.locator('[data-field=due] time').getAttribute('data-ms')), Number(j.due), 'due');
  eq(await page.locator('[data-field=deliveries]').textContent(), String(j.deliveries), 'deliveries');
  await shot(page, 'job');

  step = 'job page: a JSON payload, indented';
  const jid = ids(await resp('DELAY.UPCOMING', 'emails', '1'))[0];
  await goto(page, '/job?key=emails&id=' + encodeURIComponent(jid));
  const jp = (await resp('DELAY.GET', 'emails', jid)).payload;
  eq(await page.locator('pre[data-k=payload]').textContent(), JSON.stringify(JSON.parse(jp), null, 2), 'the payload, indented');
  check(await page.locator('pre[data-k=payload][data-json]').count() === 1, 'the payload marked JSON');
  check((await page.locator('#job-payload h2').textContent()).includes('JSON, indented'), 'the heading says JSON');

  step = 'job page: binary payload';
  await goto(page, '/job?key=show&id=binary');
  const dump = await page.locator('pre[data-k=payload]').textContent();
  check(dump.includes('00 01 02 ff 68 65 6c 6c') && dump.includes('|....hello.PNG'), `hex dump: ${dump}`);

  step = 'job page: a long payload, cut';
  await goto(page, '/job?key=show&id=big');
  const cut = await page.locator('pre[data-k=payload]').textContent();
  check(cut.length === 4096 && !cut.includes('THE-END'), `first view shows ${cut.length} chars`);
  await page.locator('a[data-k=more]').click();
  await page.waitForURL(/full=1/);
  const whole = await page.locator('pre[data-k=payload]').textContent();
  eq(whole, (await resp('DELAY.GET', 'show', 'big')).payload, 'the whole payload');
}

async function actions(page) {
  step = 'cancel, dismissed';
  await goto(page, '/queue?key=emails');
  const first = (await resp('DELAY.PEEK', 'emails', '1'))[0][0];
  const row = page.locator(`#q-ready tr[data-id="${first}"]`);
  await confirmClick(page, row.locator('form[data-op=cancel] button'), 'dismiss');
  check(lastDialog.includes(first), `the dialog names the job: ${lastDialog}`);
  await page.waitForTimeout(300);
  check((await resp('DELAY.GET', 'emails', first)) !== null, 'a dismissed cancel removed the job');

  step = 'cancel';
  await confirmClick(page, row.locator('form[data-op=cancel] button'), 'accept');
  await toast(page, /Cancelled job/);
  eq(await resp('DELAY.GET', 'emails', first), null, 'DELAY.GET after cancel');
  await within(LIVE_WITHIN, 'the cancelled row goes', async () => (await row.count()) === 0 || 'still there');
  eq(await value(page.locator('#q-head data[data-k=ready]')), (await resp('DELAY.STATS', 'emails')).ready, 'ready after cancel');

  step = 'cancel from the job page';
  await goto(page, '/job?key=webhooks&id=' + encodeURIComponent((await resp('DELAY.PEEK', 'webhooks', '1'))[0][0]));
  const wid = new URL(page.url()).searchParams.get('id');
  await confirmClick(page, page.locator('#job-fields form[data-op=cancel] button'), 'accept');
  await toast(page, /Cancelled job/);
  eq(await resp('DELAY.GET', 'webhooks', wid), null, 'DELAY.GET after cancel');
  await page.locator('[data-k=gone]').waitFor({ timeout: LIVE_WITHIN });

  step = 'pause';
  await goto(page, '/queue?key=billing');
  await confirmClick(page, page.locator('form[data-op=pause] button'), 'accept');
  await toast(page, /Paused queue billing/);
  eq((await resp('DELAY.STATS', 'billing')).paused, 1, 'DELAY.STATS paused');
  eq(await resp('DELAY.POP', 'billing', '0.1'), null, 'DELAY.POP of a paused queue');
  await page.locator('#q-head [data-k=paused]').waitFor({ timeout: LIVE_WITHIN });
  await goto(page, '/queues?match=billing');
  check(await page.locator('tr[data-queue=billing] [data-k=paused]').count() === 1, 'the queue list marks it paused');
  await goto(page, '/queue?key=billing');
  await shot(page, 'paused');

  step = 'resume';
  await confirmClick(page, page.locator('form[data-op=resume] button'), 'accept');
  await toast(page, /Resumed queue billing/);
  eq((await resp('DELAY.STATS', 'billing')).paused, 0, 'DELAY.STATS paused');
  check((await resp('DELAY.POP', 'billing', '0.1')) !== null, 'DELAY.POP of a resumed queue takes a job');
  await page.locator('#q-head [data-k=running]').waitFor({ timeout: LIVE_WITHIN });

  step = 'requeue one dead-lettered job';
  await goto(page, '/queue?key=orders-dead');
  const dead = ids(await resp('DELAY.PEEK', 'orders-dead', '10'));
  eq(dead.length, 4, 'dead-lettered jobs');
  eq((await resp('DELAY.GET', 'orders-dead', dead[0])).origin, 'orders', 'origin');
  eq(await page.locator(`#q-ready tr[data-id="${dead[0]}"] a[href="/queue?key=orders"]`).count(), 1, 'the origin shown');
  await shot(page, 'dead-letter');
  const before = (await resp('DELAY.STATS', 'orders')).ready;
  await confirmClick(page, page.locator(`#q-ready tr[data-id="${dead[0]}"] form[data-op=requeue] button`), 'accept');
  await toast(page, /Requeued job/);
  const back = await resp('DELAY.GET', 'orders', dead[0]);
  check(back && back.state === 'ready', `DELAY.GET orders ${dead[0]}: ${JSON.stringify(back)}`);
  eq((await resp('DELAY.STATS', 'orders')).ready, before + 1, 'orders ready');
  eq((await resp('DELAY.STATS', 'orders-dead')).ready, 3, 'orders-dead ready');
  await within(LIVE_WITHIN, 'the page follows', async () => (await value(page.locator('#q-head data[data-k=ready]'))) === 3 || 'not yet');

  step = 'requeue all';
  await confirmClick(page, page.locator('#q-head form[data-op=requeue-all] button'), 'accept');
  await toast(page, /Requeued 3 job/);
  eq((await resp('DELAY.STATS', 'orders-dead')).ready, 0, 'orders-dead ready');
  eq((await resp('DELAY.STATS', 'orders')).ready, before + 4, 'orders ready');

  step = 'no requeue for jobs that were not dead-lettered';
  await goto(page, '/queue?key=reports');
  check(await page.locator('#q-ready tbody tr').count() > 0, 'reports has ready jobs');
  eq(await page.locator('form[data-op^=requeue]').count(), 0, 'requeue buttons on a queue without dead-lettered jobs');
}

// Actions on one job and on a selection: what RESP reports afterwards.
async function jobActions(page) {
  step = 'select three delayed jobs and cancel them';
  await goto(page, '/queue?key=emails');
  const up = ids(await resp('DELAY.UPCOMING', 'emails', '25'));
  const pick = up.slice(0, 3);
  const before = await resp('DELAY.STATS', 'emails');
  for (const id of pick) await page.locator(`#q-upcoming tr[data-id="${id}"] input[type=checkbox]`).check();
  eq(await page.locator('#sel-upcoming [data-k=selected]').textContent(), '3', 'the selection count');
  await page.waitForTimeout(1200); // a live update in between keeps the boxes ticked
  eq(await page.locator('#q-upcoming input[name=ids]:checked').count(), 3, 'boxes ticked after a live update');
  await shot(page, 'selection');
  await confirmClick(page, page.locator('#sel-upcoming button[value=cancel]'), 'accept');
  check(lastDialog.includes('the 3 selected jobs'), `the dialog names the selection: ${lastDialog}`);
  await toast(page, /Cancelled 3 of 3 selected jobs/);
  for (const id of pick) eq(await resp('DELAY.GET', 'emails', id), null, `DELAY.GET ${id} after cancel`);
  eq((await resp('DELAY.STATS', 'emails')).delayed, before.delayed - 3, 'DELAY.STATS delayed');
  await within(LIVE_WITHIN, 'the rows go', async () => (await page.locator(`#q-upcoming tr[data-id="${pick[0]}"]`).count()) === 0 || 'still there');

  step = 'select all listed delayed jobs and run them now';
  const listed = ids(await resp('DELAY.UPCOMING', 'emails', '25'));
  const ready0 = (await resp('DELAY.STATS', 'emails')).ready;
  await page.locator('#q-upcoming input[data-all]').check();
  eq(await page.locator('#sel-upcoming [data-k=selected]').textContent(), String(listed.length), 'select all');
  await confirmClick(page, page.locator('#sel-upcoming button[value=promote]'), 'accept');
  await toast(page, new RegExp(`Made ready ${listed.length} of ${listed.length}`));
  eq((await resp('DELAY.STATS', 'emails')).ready, ready0 + listed.length, 'DELAY.STATS ready after run now');
  eq((await resp('DELAY.GET', 'emails', listed[0])).state, 'ready', 'a job run now');

  step = 'reschedule a selection of ready jobs';
  const rdy = ids(await resp('DELAY.PEEK', 'emails', '2'));
  await page.reload();
  for (const id of rdy) await page.locator(`#q-ready tr[data-id="${id}"] input[type=checkbox]`).check();
  await page.locator('#sel-ready input[name=delay]').fill('2h');
  await confirmClick(page, page.locator('#sel-ready button[value=reschedule]'), 'accept');
  await toast(page, /Rescheduled 2 of 2 selected jobs/);
  for (const id of rdy) {
    const j = await resp('DELAY.GET', 'emails', id);
    check(j.state === 'delayed' && Number(j.due) > Date.now() + 7000000, `${id} after reschedule by 2h: ${JSON.stringify(j)}`);
  }

  step = 'run one job now, from its page';
  const one = ids(await resp('DELAY.UPCOMING', 'emails', '1'))[0];
  await goto(page, '/job?key=emails&id=' + encodeURIComponent(one));
  await confirmClick(page, page.locator('#job-fields form[data-op=promote] button'), 'accept');
  await toast(page, /Made ready job/);
  eq((await resp('DELAY.GET', 'emails', one)).state, 'ready', 'state after run now');
  await within(LIVE_WITHIN, 'the page follows', async () => (await page.locator('[data-field=state]').textContent()) === 'ready' || 'not yet');

  step = 'reschedule one job, from its page';
  await page.locator('#job-fields form[data-op=reschedule] input[name=delay]').fill('90s');
  await confirmClick(page, page.locator('#job-fields form[data-op=reschedule] button'), 'accept');
  await toast(page, /Rescheduled job/);
  const j = await resp('DELAY.GET', 'emails', one);
  check(j.state === 'delayed' && Math.abs(Number(j.due) - Date.now() - 90000) < 5000, `after reschedule by 90s: ${JSON.stringify(j)}`);
}

// Charts: the server samples every 10s into its ring; by now (half a
// minute of adds, pops and acks) each chart has points, drawn as SVG.
async function charts(page) {
  step = 'charts on the queue page';
  await goto(page, '/queue?key=emails');
  const points = async (sel) => {
    const el = page.locator(sel);
    if ((await el.count()) === 0) return 0;
    const n = Number(await el.getAttribute('data-n'));
    const pairs = (await el.getAttribute('points')).trim().split(/\s+/);
    check(pairs.length === n && pairs.every((p) => /^[0-9.]+,[0-9.]+$/.test(p)), `${sel}: ${n} points ${pairs}`);
    return n;
  };
  await within(30000, 'a rates line with points', async () => (await points('#q-charts polyline[data-series=deliveries]')) >= 1 || 'none yet');
  await within(30000, 'a latency line with points', async () => (await points('#q-charts polyline[data-series=latency]')) >= 1 || 'none yet');
  check(await page.locator('#q-charts svg').count() === 2, 'two charts: rates and latency');
  check(/\d/.test(await page.locator('#q-charts [data-k=last-adds]').textContent()), 'the newest adds/s figure');

  step = 'charts on the overview';
  await goto(page, '/');
  await within(30000, 'the server\'s rates', async () => (await points('#ov-charts polyline[data-series=adds]')) >= 1 || 'none yet');
}

// Failure reasons (DELAY.NACK ... ERROR) on a dead-letter list and a job's
// page; queue latency on the queue page, its chart, the queue list and the
// overview, against DELAY.STATS and INFO.
async function reasons(page) {
  step = 'reasons: a job nacked with a reason, dead-lettered';
  await resp('DELAY.ADD', 'payments', '0', '{"amount":12}', 'ID', 'pay-1', 'RETRY', '0', 'ACKTIMEOUT', '60000', 'DEADLETTER', 'payments-dead');
  const popped = await resp('DELAY.POP', 'payments', '1');
  check(popped && popped.includes('pay-1'), `DELAY.POP payments: ${JSON.stringify(popped)}`);
  eq(await resp('DELAY.NACK', 'payments', 'pay-1', 'ERROR', 'card declined: insufficient funds'), 1, 'DELAY.NACK');
  const j = await resp('DELAY.GET', 'payments-dead', 'pay-1');
  eq(j.error, 'card declined: insufficient funds', 'DELAY.GET error');
  await goto(page, '/queue?key=payments-dead');
  eq(await page.locator('#q-ready tr[data-id="pay-1"] [data-k=error]').textContent(), j.error, 'the reason in the dead-letter list');
  await goto(page, '/job?key=payments-dead&id=pay-1');
  check((await page.locator('[data-k=reason]').textContent()).includes(j.error), 'the reason on the job page');

  step = 'latency';
  await goto(page, '/queue?key=payments-dead');
  const lat = Number((await resp('DELAY.STATS', 'payments-dead')).latency);
  const shown = await value(page.locator('#q-head data[data-k=latency]'));
  check(shown > 0 && Math.abs(shown - lat) < 3000, `the queue page's latency ${shown}ms, DELAY.STATS said ${lat}ms just after`);
  await within(30000, 'a latency line', async () => (await page.locator('#q-charts polyline[data-series=latency]').count()) === 1 || 'none yet');
  await goto(page, '/queues?match=payments*');
  const row = await value(page.locator('tr[data-queue="payments-dead"] data[data-k=latency]'));
  const lat2 = Number((await resp('DELAY.STATS', 'payments-dead')).latency);
  check(row > 0 && Math.abs(row - lat2) < 3000, `the queue list's latency ${row}ms, DELAY.STATS said ${lat2}ms just after`);
  await goto(page, '/');
  const most = Number((await info()).latency_max_ms);
  const ov = await value(page.locator('#ov-jobs data[data-k=latency]'));
  check(Math.abs(ov - most) < 5000, `the overview's latency ${ov}ms, INFO latency_max_ms ${most}`);
}

async function phone(browser) {
  step = 'phone';
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const page = await ctx.newPage();
  watch(page);
  for (const url of ['/', '/queues', '/queue?key=emails', '/job?key=show&id=xss']) {
    await goto(page, url);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(over <= 0, `${url} is ${over}px wider than the phone's screen`);
  }
  await goto(page, '/');
  await shot(page, 'phone');
  await ctx.close();
}

// follower: the dashboard of a cluster follower (DELAYD_E2E_URL) whose
// leader is DELAYD_E2E_LEADER (RESP, where the Go side sends commands) with
// its dashboard at DELAYD_E2E_LEADER_URL. It shows the leader's data, says
// it is a follower, links to the leader, and offers no action.
async function follower(browser) {
  const LEADER = process.env.DELAYD_E2E_LEADER;
  const LEADER_URL = process.env.DELAYD_E2E_LEADER_URL;
  step = 'follower: seed on the leader';
  const cmds = [];
  for (let i = 1; i <= 20; i++) cmds.push(['DELAY.ADD', 'q20', String(3600000 + i * 1000), `{"n":${i}}`, 'ID', `job-${i}`]);
  cmds.push(['DELAY.ADD', 'q20', '0', 'ready now', 'ID', 'r1']);
  cmds.push(['DELAY.SCHEDULE', 'q20', 'hourly', 'CRON', '0 * * * *', 'tick']);
  await pipeline(cmds);
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await ctx.newPage();
  watch(page);

  step = 'follower: the queue page shows the leader\'s numbers';
  await goto(page, '/queue?key=q20');
  const s = await resp('DELAY.STATS', 'q20');
  eq([s.delayed, s.ready], [20, 1], 'DELAY.STATS q20 on the leader');
  await within(LIVE_WITHIN, 'the follower\'s counts', async () => {
    const got = [await value(page.locator('#q-head data[data-k=delayed]')), await value(page.locator('#q-head data[data-k=ready]'))];
    return (got[0] === s.delayed && got[1] === s.ready) || got;
  });
  const up = await resp('DELAY.UPCOMING', 'q20', '25');
  eq(await page.locator('#q-upcoming tbody tr').evaluateAll((rs) => rs.map((r) => r.dataset.id)), ids(up), 'next delayed jobs');
  eq(await page.locator('#q-schedules [data-k=spec]').first().textContent(), 'CRON 0 * * * *', 'the schedule');
  check(!/MOVED|CLUSTERDOWN/.test(await page.locator('main').textContent()), 'a panel shows a redirection');

  step = 'follower: the banner names the leader and links to its dashboard';
  eq(await page.locator('#follower [data-k=leader]').textContent(), LEADER, 'leader named');
  await within(5000, 'the link to the leader\'s dashboard', async () => {
    const href = await page.locator('#follower a[data-k=leader-link]').getAttribute('href', { timeout: 100 }).catch(() => null);
    return href === LEADER_URL + '/queue?key=q20' || href;
  });
  await shot(page, 'follower');

  step = 'follower: no action offered';
  for (const url of ['/', '/queues', '/queue?key=q20', '/schedules', '/job?key=q20&id=job-1']) {
    await goto(page, url);
    check(await page.locator('#follower').isVisible(), `${url}: no follower banner`);
    eq(await page.locator('form[data-op], input[type=checkbox]').count(), 0, `${url}: action forms`);
    check(!/MOVED|CLUSTERDOWN/.test(await page.locator('main').textContent()), `${url}: a panel shows a redirection`);
  }
  eq(await page.locator('[data-field=state]').textContent(), 'delayed', 'the job page reads the job');
  await goto(page, '/');
  const i = await info();
  eq(await value(page.locator('#ov-jobs data[data-k=jobs]')), Number(i.jobs), 'jobs, as the leader counts them');
  eq(await page.locator('[data-k=add_rate]').count(), 0, 'a follower\'s adds/s (always 0) shown');

  step = 'follower: a post is refused, naming the leader';
  const r = await fetch(BASE + '/action?op=cancel&key=q20&id=job-1&back=/', {
    method: 'POST', body: 'confirmed=1', headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-Delayd-Action': '1' },
  });
  const j = await r.json();
  check(r.status === 409 && !j.ok && j.error.includes(LEADER), `POST /action on a follower: ${r.status} ${JSON.stringify(j)}`);
  check((await resp('DELAY.GET', 'q20', 'job-1')) !== null, 'the job is still there');
  await ctx.close();
}

// big: the first page's weight and load time. Each load starts with an
// empty cache (CDP Network.setCacheDisabled), in a tab whose renderer is
// already up, so it measures the page: its HTML, CSS, script and icon
// fetched, parsed and drawn, until the load event.
async function big(browser) {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  watch(page);
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  await goto(page, '/ui/icon.svg'); // the renderer up, and no favicon asked for
  const measure = async (url) => {
    await goto(page, url);
    await page.waitForLoadState('load');
    return page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      let bytes = nav.encodedBodySize;
      const files = [];
      for (const r of performance.getEntriesByType('resource')) {
        if (r.initiatorType === 'fetch') continue; // live updates, after load
        bytes += r.encodedBodySize;
        files.push(`${new URL(r.name).pathname} ${r.encodedBodySize}`);
      }
      return { ms: Math.round(nav.loadEventEnd - nav.startTime), ttfb: Math.round(nav.responseStart - nav.startTime),
        html: nav.encodedBodySize, bytes, files };
    });
  };
  const i = await info();
  console.log(`big: ${i.jobs} jobs in ${i.queues} queues`);
  for (const url of ['/', '/queues', '/queues?sort=total', '/queue?key=queue-00042']) {
    const runs = [];
    for (let n = 0; n < 7; n++) runs.push(await measure(url));
    runs.sort((a, b) => a.ms - b.ms);
    const med = runs[3];
    console.log(`METRIC ${url}: load ${med.ms}ms (first byte ${med.ttfb}ms), ${med.bytes} bytes (page ${med.html}; ${med.files.join(', ')}); all loads ${runs.map((r) => r.ms).join(',')}ms`);
    if (url === '/') {
      check(med.bytes < 200 * 1024, `the first page weighs ${med.bytes} bytes`);
      check(med.ms < 300, `the first page loads in ${med.ms}ms`);
    }
  }
  await ctx.close();
}

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.DELAYD_E2E_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
  let failed = false;
  try {
    if (MODE === 'big') {
      step = 'big';
      await big(browser);
    } else if (MODE === 'follower') {
      await follower(browser);
    } else {
      const t0 = Date.now();
      await seed();
      const ctx = await browser.newContext({ viewport: { width: 1200, height: 800 } });
      const page = await ctx.newPage();
      watch(page);
      await overview(page);
      await queues(page);
      await queuePage(page);
      await schedules(page);
      await jobPage(page);
      await actions(page);
      await jobActions(page);
      await charts(page);
      await reasons(page);
      await ctx.close();
      await phone(browser);
      console.log(`every page and action checked in ${Date.now() - t0}ms`);
    }
  } catch (e) {
    failed = true;
    console.log(`FAIL ${e.stack || e}`);
  }
  await browser.close();
  if (problems.length) {
    failed = true;
    for (const p of problems) console.log(`FAIL ${p}`);
  }
  process.exit(failed ? 1 : 0);
})();
