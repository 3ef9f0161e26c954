// delayd for Node on ioredis: a producer (Client) that speaks every
// DELAY.ADD option as an options object, and a worker (Worker) that runs a
// handler per job at one round trip a job. The worker's behaviour is the one
// the Go and Python libraries share (docs/decisions/worker-node.md says where
// Node differs):
//
//   - fetch with DELAY.MPOP COUNT <free slots>, so nothing waits unstarted in
//     the worker, on a connection of its own (duplicate()): a blocking
//     command holds its connection, and every other command behind it;
//   - the ACK of finished jobs goes in the same pipeline (one write, one
//     round trip) as the next fetch, or on its own within a few ms when no
//     fetch is due;
//   - a job still running after heartbeatAfter ms is TOUCHed when a third of
//     its ack timeout is left;
//   - a failure is NACKed with a backoff delay and its text as the reason;
//   - close() stops fetching, lets handlers finish within a deadline, then
//     aborts their signals and gives their jobs back;
//   - failover errors (UNBLOCKED, TRYAGAIN, CLUSTERDOWN, LOADING, a closed
//     connection) are retried with a short backoff, never seen by a handler.
'use strict';

const { EventEmitter } = require('node:events');

// The server takes at most this many bytes of failure reason.
const ERROR_MAX = 1024;

// How often the heartbeat looks at running jobs. A tick costs a walk over at
// most `concurrency` entries; a job only pays a round trip once it has run
// heartbeatAfter ms.
const TICK_MS = 100;

// How long finished jobs' ids may wait for a fetch to carry them before they
// are sent on their own: long enough for the fetch loop to pick them up when
// it is about to send anyway, short enough that a fetch blocked on an empty
// queue does not hold them.
const ACK_WAIT_MS = 2;

// Failover backoff: 100 ms doubling to 2 s.
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2000;

// A job the handler rejects with this error is acknowledged, not retried:
// retrying cannot help (a malformed payload, a record that is gone). BullMQ
// calls it UnrecoverableError, asynq SkipRetry.
class UnrecoverableError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'UnrecoverableError';
  }
}

// exponentialBackoff returns the default retry policy, a function of the
// job's deliveries (1 on the first failure): full jitter, a random delay in
// [0, min(cap, base * factor^(deliveries-1))), so a batch that failed
// together does not come back together.
function exponentialBackoff({ base = 1000, factor = 2, cap = 3600000, jitter = true } = {}) {
  return (deliveries) => {
    const ceiling = Math.min(cap, base * factor ** Math.max(0, deliveries - 1));
    return Math.floor(jitter ? Math.random() * ceiling : ceiling);
  };
}

// ---------------------------------------------------------------- producer

function unixMs(at) {
  const ms = at instanceof Date ? at.getTime() : Number(at);
  if (!Number.isFinite(ms)) throw new TypeError(`delayd: not a time: ${at}`);
  return Math.round(ms);
}

function encode(payload) {
  if (typeof payload === 'string' || Buffer.isBuffer(payload)) return payload;
  if (payload === undefined) throw new TypeError('delayd: payload is required');
  return JSON.stringify(payload);
}

// jobOptions are DELAY.ADD's options in the order its syntax lists them.
function jobOptions(o) {
  const a = [];
  if (o.id !== undefined && o.id !== null) a.push('ID', String(o.id));
  if (o.replace) a.push('REPLACE');
  if (o.ackTimeout !== undefined) a.push('ACKTIMEOUT', o.ackTimeout);
  if (o.retry !== undefined) a.push('RETRY', o.retry);
  if (o.deadLetter !== undefined) a.push('DEADLETTER', o.deadLetter);
  if (o.unique !== undefined) a.push('UNIQUE', o.unique);
  if (o.debounce !== undefined) a.push('DEBOUNCE', o.debounce);
  if (o.group !== undefined) a.push('GROUP', o.group);
  if (o.priority !== undefined) a.push('PRIORITY', o.priority);
  return a;
}

// fields turns a flat field/value reply into an object with camelCase keys
// (ack_deadline -> ackDeadline).
function fields(reply) {
  if (reply === null || reply === undefined) return null;
  const out = {};
  for (let i = 0; i + 1 < reply.length; i += 2) {
    out[String(reply[i]).replace(/_([a-z])/g, (_, c) => c.toUpperCase())] = reply[i + 1];
  }
  return out;
}

// Client adds and manages jobs. redis is an ioredis Redis or Cluster; the
// Client sends each command once (a producer's retry is its own decision:
// an add with an id is safe to send again).
class Client {
  constructor(redis) {
    if (!redis || typeof redis.call !== 'function') throw new TypeError('delayd: Client needs an ioredis Redis or Cluster');
    this.redis = redis;
  }

  // add: DELAY.ADD (options.delay ms from now, default 0) or DELAY.ADDAT
  // (options.at, a Date or unix ms). Resolves to the job's id, or null when
  // options.id names a job that exists (or is kept by UNIQUE) and
  // options.replace is not set.
  add(queue, payload, options = {}) {
    if (options.at !== undefined && options.delay !== undefined) {
      return Promise.reject(new TypeError('delayd: add takes delay or at, not both'));
    }
    if (options.at !== undefined) return this.addAt(queue, options.at, payload, options);
    return this.redis.call('DELAY.ADD', queue, Math.max(0, Math.round(options.delay || 0)), encode(payload), ...jobOptions(options));
  }

  addAt(queue, at, payload, options = {}) {
    return this.redis.call('DELAY.ADDAT', queue, unixMs(at), encode(payload), ...jobOptions(options));
  }

  // cancel removes jobs whatever their state; resolves to how many existed.
  cancel(queue, ...ids) {
    return this.redis.call('DELAY.CANCEL', queue, ...ids.flat());
  }

  // reschedule moves a delayed or ready job to delayMs from now; false if
  // it is neither (reserved, or gone).
  async reschedule(queue, id, delayMs) {
    return (await this.redis.call('DELAY.RESCHEDULE', queue, id, Math.max(0, Math.round(delayMs)))) === 1;
  }

  async rescheduleAt(queue, id, at) {
    return (await this.redis.call('DELAY.RESCHEDULEAT', queue, id, unixMs(at))) === 1;
  }

  // promote makes delayed jobs ready now; resolves to how many moved.
  promote(queue, ...ids) {
    return this.redis.call('DELAY.PROMOTE', queue, ...ids.flat());
  }

  // get resolves to the job's fields (id, queue, state, due, payload,
  // deliveries, and ackDeadline, group, priority, origin, error when it has
  // them), or null.
  async get(queue, id) {
    return fields(await this.redis.call('DELAY.GET', queue, id));
  }

  async stats(queue) {
    return fields(await this.redis.call('DELAY.STATS', queue));
  }

  // schedule creates or replaces (by name) a recurring schedule: options.cron
  // (with options.tz) or options.every (ms), and ackTimeout, retry,
  // deadLetter, misfire ('skip', 'once', 'all'), start, end.
  schedule(queue, name, payload, options = {}) {
    const a = [];
    if ((options.cron === undefined) === (options.every === undefined)) {
      return Promise.reject(new TypeError('delayd: schedule takes cron or every'));
    }
    if (options.cron !== undefined) {
      a.push('CRON', options.cron);
      if (options.tz !== undefined) a.push('TZ', options.tz);
    } else {
      a.push('EVERY', options.every);
    }
    a.push(encode(payload));
    if (options.ackTimeout !== undefined) a.push('ACKTIMEOUT', options.ackTimeout);
    if (options.retry !== undefined) a.push('RETRY', options.retry);
    if (options.deadLetter !== undefined) a.push('DEADLETTER', options.deadLetter);
    if (options.misfire !== undefined) a.push('MISFIRE', String(options.misfire).toUpperCase());
    if (options.start !== undefined) a.push('START', unixMs(options.start));
    if (options.end !== undefined) a.push('END', unixMs(options.end));
    return this.redis.call('DELAY.SCHEDULE', queue, name, ...a);
  }

  async unschedule(queue, name) {
    return (await this.redis.call('DELAY.UNSCHEDULE', queue, name)) === 1;
  }

  // schedules lists a queue's schedules (every queue's without one).
  async schedules(queue) {
    const reply = await (queue === undefined ? this.redis.call('DELAY.SCHEDULES') : this.redis.call('DELAY.SCHEDULES', queue));
    return reply.map(fields);
  }
}

// ------------------------------------------------------------------ worker

// transient reports whether err is one a failover or restart causes, which
// the worker retries without telling the handler.
function transient(err) {
  const m = String((err && err.message) || err);
  return /^(UNBLOCKED|TRYAGAIN|CLUSTERDOWN|LOADING|MASTERDOWN|READONLY)\b/.test(m) ||
    /Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|Failed to refresh slots cache|Reached the max retries|None of startup nodes|Command timed out/.test(m);
}

// errorText is err's failure reason: its message (or name) cut to the
// server's 1 KiB on a character boundary.
function errorText(err) {
  let text = err instanceof Error ? err.message || err.name : String(err);
  if (!text) text = 'error';
  const buf = Buffer.from(text);
  if (buf.length <= ERROR_MAX) return text;
  let end = ERROR_MAX;
  while (end > 0 && (buf[end] & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString();
}

const noop = () => {};
const quiet = { info: noop, warn: noop, error: noop };

// Job is what a handler gets. payload is the job's payload as a string;
// json() parses it; signal is aborted when the worker's close deadline
// passes with the handler still running (made on first use: most handlers
// never look, and an AbortController costs more than the rest of a job).
class Job {
  constructor(queue, id, payload) {
    this.queue = queue;
    this.id = id;
    this.payload = payload;
    this._ctrl = null;
  }

  get signal() {
    if (!this._ctrl) this._ctrl = new AbortController();
    return this._ctrl.signal;
  }

  json() {
    return JSON.parse(this.payload);
  }

  _abort(reason) {
    if (!this._ctrl) this._ctrl = new AbortController();
    this._ctrl.abort(reason);
  }
}

// Worker runs handler(job) for the jobs of one queue. Events, as
// BullMQ's Worker: 'completed' (job, result) once the job's ACK is answered,
// 'failed' (job, err) once its NACK is (or its ACK, for an
// UnrecoverableError), 'error' (err) for what the worker retries (emitted
// only when someone listens), 'drained' when a fetch finds the queue empty
// after jobs, 'closed'.
class Worker extends EventEmitter {
  constructor(redis, queue, handler, opts = {}) {
    super();
    if (!redis || typeof redis.duplicate !== 'function') throw new TypeError('delayd: Worker needs an ioredis Redis or Cluster');
    if (typeof queue !== 'string' || queue === '') throw new TypeError('delayd: Worker needs a queue name');
    if (typeof handler !== 'function') throw new TypeError('delayd: Worker needs a handler function');
    this.redis = redis;
    this.queue = queue;
    this.handler = handler;
    this.concurrency = opts.concurrency ?? 10;
    if (!(Number.isInteger(this.concurrency) && this.concurrency > 0)) throw new TypeError('delayd: concurrency must be a positive integer');
    this.backoff = opts.backoff ?? exponentialBackoff();
    this.heartbeatAfter = opts.heartbeatAfter ?? 1000;
    this.closeTimeout = opts.closeTimeout ?? 30000;
    const logger = opts.logger === undefined ? console : opts.logger || quiet;
    this.logger = { info: (logger.info || noop).bind(logger), warn: (logger.warn || noop).bind(logger), error: (logger.error || noop).bind(logger) };

    // The block time stays under the client's command timeout, or ioredis
    // would fail a pop that is only waiting.
    let blockMs = opts.blockMs ?? 1000;
    const o = redis.options || {};
    const commandTimeout = o.commandTimeout ?? (o.redisOptions && o.redisOptions.commandTimeout);
    if (commandTimeout) {
      if (commandTimeout < 200) throw new RangeError(`delayd: ioredis commandTimeout ${commandTimeout} ms leaves no time to block; use 200 or more`);
      blockMs = Math.min(blockMs, commandTimeout - Math.max(100, commandTimeout / 4));
    }
    this.blockSec = String(Math.max(0.01, blockMs / 1000));

    this.metrics = { completed: 0, failed: 0, retried: 0, acksLost: 0, fetchErrors: 0 };
    this._running = new Set(); // entries of jobs whose handler runs
    this._acks = []; // entries finished, their ACK not sent yet
    this._inflight = 0; // NACKs and lone ACKs not answered yet
    this._ackTimer = null;
    this._wakeLoop = null; // resolves the loop's wait for a free slot
    this._idle = []; // resolved when nothing runs or is in flight
    this._fetching = false;
    this._fetchSoon = false; // the loop fetches once a slot frees
    this._closing = false;
    this._drained = true;
    this._outage = null; // the first error of a run of errors, logged once
    this._lostLogged = 0;
    if (opts.autorun !== false) {
      // Errors are handled inside; a rejection here would be a bug.
      this.run().catch((err) => this.logger.error('delayd worker:', err));
    }
  }

  // run starts the worker (done by the constructor unless autorun is false)
  // and resolves once it is closed.
  run() {
    if (!this._runPromise) this._runPromise = this._loop();
    return this._runPromise;
  }

  async _loop() {
    // The fetch's own connection: ioredis answers a connection's commands in
    // order, so one blocked in DELAY.MPOP would hold every command behind it.
    this._blocking = this.redis.duplicate();
    this._blocking.on('error', noop); // seen as the commands' errors
    this._watchClientId();
    this._ticker = setInterval(() => this._heartbeat(), TICK_MS);
    this._ticker.unref();
    let delay = 0;
    while (!this._closing) {
      if (this._running.size >= this.concurrency) {
        this._fetchSoon = true;
        await new Promise((resolve) => { this._wakeLoop = resolve; });
        continue;
      }
      const free = this.concurrency - this._running.size;
      this._fetchSoon = false;
      const acks = this._takeAcks();
      const pipe = this._blocking.pipeline();
      if (acks.length) pipe.call('DELAY.ACK', this.queue, ...acks.map((e) => e.job.id));
      pipe.call('DELAY.MPOP', this.blockSec, 1, this.queue, 'COUNT', free);
      this._fetching = true;
      let replies;
      try {
        replies = await pipe.exec();
      } catch (err) {
        replies = acks.length ? [[err], [err]] : [[err]];
      }
      this._fetching = false;
      if (acks.length) {
        const [err, n] = replies[0];
        if (err) this._ackFailed(acks, err);
        else this._acked(acks, n);
      }
      const [err, reply] = replies[replies.length - 1];
      if (err) {
        this.metrics.fetchErrors++;
        this._problem(err);
        delay = Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, delay * 2));
        await this._pause(delay);
        continue;
      }
      delay = 0;
      this._recovered();
      if (reply === null) {
        if (!this._drained) {
          this._drained = true;
          this._emit('drained');
        }
        continue;
      }
      this._drained = false;
      for (const [id, payload] of reply[1]) this._start(id, payload);
      // Let the handlers just started run before the next fetch goes out:
      // fast ones end now, and their ACKs ride with it rather than alone
      // after ACK_WAIT_MS, a round trip and a timer each.
      if (reply[1].length) await new Promise((resolve) => setImmediate(resolve));
    }
    this._fetchSoon = false;
    this._flushAcks(); // what finished while the loop was stopping
  }

  // _watchClientId keeps the fetch connection's CLIENT ID, so close() can
  // end a blocked fetch at once with CLIENT UNBLOCK (which the server
  // decides under its lock: a job handed over at that moment is delivered,
  // never lost). A Cluster's connections are its nodes'; there close waits
  // for the fetch to time out (blockMs).
  _watchClientId() {
    if (this._blocking.isCluster) return;
    const learn = () => {
      this._clientId = null;
      this._blocking.client('ID').then((id) => { this._clientId = id; }, noop);
    };
    this._blocking.on('ready', learn);
    if (this._blocking.status === 'ready') learn();
  }

  _start(id, payload) {
    const entry = { job: new Job(this.queue, id, payload), started: Date.now(), deadline: 0, ackTimeout: 0, beating: false, noDeadline: false, abandoned: false, result: undefined, err: null };
    this._running.add(entry);
    let p;
    try {
      p = Promise.resolve(this.handler(entry.job));
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then((result) => this._finished(entry, null, result), (err) => this._finished(entry, err === undefined || err === null ? new Error(`handler rejected with ${err}`) : err));
  }

  _finished(entry, err, result) {
    if (entry.abandoned) return; // given back at the close deadline
    this._running.delete(entry);
    if (err === null) {
      entry.result = result;
      this._queueAck(entry);
    } else if (err instanceof UnrecoverableError || (err && err.name === 'UnrecoverableError')) {
      this.logger.warn(`delayd: job ${entry.job.id} of ${this.queue} failed for good, acknowledged: ${errorText(err)}`);
      entry.err = err;
      this._queueAck(entry);
    } else {
      this._fail(entry, err);
    }
    if (this._wakeLoop) {
      const wake = this._wakeLoop;
      this._wakeLoop = null;
      wake();
    }
  }

  _queueAck(entry) {
    this._acks.push(entry);
    // A loop waiting for a free slot fetches as soon as this job's slot is
    // free: the ACK rides with it, no timer needed.
    if (this._fetchSoon && !this._closing) return;
    if (!this._ackTimer) this._ackTimer = setTimeout(() => this._flushAcks(), ACK_WAIT_MS);
  }

  _takeAcks() {
    if (this._ackTimer) {
      clearTimeout(this._ackTimer);
      this._ackTimer = null;
    }
    const acks = this._acks;
    this._acks = [];
    return acks;
  }

  // _flushAcks sends finished jobs' ACK on its own: no fetch took them
  // within ACK_WAIT_MS (the worker is full, blocked on an empty queue, or
  // closing).
  _flushAcks() {
    const acks = this._takeAcks();
    if (!acks.length) return;
    this._inflight++;
    this.redis.call('DELAY.ACK', this.queue, ...acks.map((e) => e.job.id)).then(
      (n) => { this._acked(acks, n); this._recovered(); },
      (err) => this._ackFailed(acks, err),
    ).finally(() => { this._inflight--; this._checkIdle(); });
  }

  _ackFailed(acks, err) {
    this._problem(err);
    if (this._abandonAcks) {
      this.logger.warn(`delayd: ${acks.length} ACKs of ${this.queue} not sent at close (${errorText(err)}); those jobs are delivered again after their ack timeout`);
      return;
    }
    this._acks.unshift(...acks);
    if (!this._ackTimer) this._ackTimer = setTimeout(() => this._flushAcks(), RETRY_MIN_MS);
  }

  _acked(acks, n) {
    const lost = acks.length - n;
    if (lost > 0) {
      // The reservation ended before the ACK (its ack timeout passed and
      // the job went to another delivery), or the job had no ack timeout
      // and was removed when popped. Not an error; logged once a minute.
      this.metrics.acksLost += lost;
      const now = Date.now();
      if (now - this._lostLogged > 60000) {
        this._lostLogged = now;
        this.logger.warn(`delayd: ${lost} of ${acks.length} ACKs of ${this.queue} found no reservation (ack timeout passed, or jobs without one); ${this.metrics.acksLost} so far`);
      }
    }
    for (const e of acks) {
      if (e.err) {
        this.metrics.failed++;
        this._emit('failed', e.job, e.err);
      } else {
        this.metrics.completed++;
        this._emit('completed', e.job, e.result);
      }
    }
    this._checkIdle();
  }

  // _fail gives a failed job back with DELAY.NACK: the delay from the
  // backoff policy on its deliveries (one DELAY.GET: failures are rare),
  // the error text as its reason. The job's RETRY and DEADLETTER decide when
  // it is dead-lettered.
  async _fail(entry, err) {
    const { job } = entry;
    this._inflight++;
    try {
      let deliveries = 1;
      try {
        const info = fields(await this.redis.call('DELAY.GET', this.queue, job.id));
        if (info && info.deliveries) deliveries = info.deliveries;
      } catch (e) {
        this._problem(e);
      }
      let delay;
      try {
        delay = Math.max(0, Math.round(Number(this.backoff(deliveries, err, job)) || 0));
      } catch (e) {
        this.logger.error('delayd: backoff policy threw; retrying with the default', e);
        delay = exponentialBackoff()(deliveries);
      }
      this.logger.error(`delayd: job ${job.id} of ${this.queue} failed (delivery ${deliveries}), again in ${delay} ms:`, err && err.stack ? err.stack : err);
      await this._retrying(() => this.redis.call('DELAY.NACK', this.queue, job.id, delay, 'ERROR', errorText(err)));
      this.metrics.failed++;
      this.metrics.retried++;
      this._emit('failed', job, err);
    } catch (e) {
      this.logger.warn(`delayd: NACK of job ${job.id} of ${this.queue} not sent (${errorText(e)}); it is delivered again after its ack timeout`);
    } finally {
      this._inflight--;
      this._checkIdle();
    }
  }

  // _retrying runs send until it succeeds, retrying failover errors with
  // backoff; it gives up once the worker is past its close deadline.
  async _retrying(send) {
    let delay = RETRY_MIN_MS;
    for (;;) {
      try {
        const r = await send();
        this._recovered();
        return r;
      } catch (err) {
        if (!transient(err) || this._abandonAcks) throw err;
        this._problem(err);
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(RETRY_MAX_MS, delay * 2);
      }
    }
  }

  // _heartbeat runs every TICK_MS: a job running heartbeatAfter ms learns
  // its ack deadline with one DELAY.GET; from then on it is TOUCHed when a
  // third of its ack timeout is left. Jobs without an ack timeout (popped =
  // removed) pay the one GET.
  _heartbeat() {
    const now = Date.now();
    for (const e of this._running) {
      if (e.beating || e.noDeadline) continue;
      if (e.deadline === 0) {
        if (now - e.started < this.heartbeatAfter) continue;
        e.beating = true;
        this.redis.call('DELAY.GET', this.queue, e.job.id).then((reply) => {
          const info = fields(reply);
          if (info && info.state === 'reserved' && info.ackDeadline) {
            e.deadline = info.ackDeadline;
            e.ackTimeout = Math.max(1, info.ackDeadline - e.started);
          } else {
            e.noDeadline = true;
          }
        }, (err) => this._problem(err)).finally(() => { e.beating = false; });
      } else if (now >= e.deadline - e.ackTimeout / 3) {
        e.beating = true;
        this.redis.call('DELAY.TOUCH', this.queue, e.job.id).then((n) => {
          if (n === 1) {
            e.deadline = now + e.ackTimeout;
          } else {
            e.noDeadline = true;
            this.logger.warn(`delayd: job ${e.job.id} of ${this.queue} lost its reservation while running (its ack timeout passed); it may run twice`);
          }
        }, (err) => this._problem(err)).finally(() => { e.beating = false; });
      }
    }
  }

  _problem(err) {
    if (!this._outage) {
      this._outage = err;
      this.logger.warn(`delayd: ${this.queue}: ${errorText(err)}; retrying`);
    }
    if (this.listenerCount('error') > 0) this._emit('error', err);
  }

  _recovered() {
    if (this._outage) {
      this._outage = null;
      this.logger.info(`delayd: ${this.queue}: working again`);
    }
  }

  _pause(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this._wakePause = () => { clearTimeout(t); resolve(); };
    });
  }

  // _emit calls listeners without letting their exceptions into the loop.
  _emit(name, ...args) {
    try {
      this.emit(name, ...args);
    } catch (err) {
      this.logger.error(`delayd: a '${name}' listener threw:`, err);
    }
  }

  _busy() {
    return this._running.size > 0 || this._acks.length > 0 || this._inflight > 0;
  }

  _checkIdle() {
    if (this._busy() || !this._idle.length) return;
    const waiting = this._idle;
    this._idle = [];
    for (const resolve of waiting) resolve();
  }

  _whenIdle() {
    if (!this._busy()) return Promise.resolve();
    return new Promise((resolve) => this._idle.push(resolve));
  }

  // close stops fetching at once, lets running handlers finish within
  // timeout ms (default closeTimeout, 30 s) and sends their ACKs; at the
  // deadline it aborts the signals of handlers still running and gives their
  // jobs back (DELAY.NACK, delay 0, ERROR "worker shutting down"). It closes
  // the worker's own connection, not the one it was given.
  close(timeout = this.closeTimeout) {
    if (this._closePromise) return this._closePromise;
    this._closing = true;
    if (this._wakeLoop) this._wakeLoop();
    if (this._wakePause) this._wakePause();
    if (this._fetching && this._clientId) this.redis.call('CLIENT', 'UNBLOCK', this._clientId).catch(noop);
    this._closePromise = this._close(timeout);
    return this._closePromise;
  }

  async _close(timeout) {
    const deadline = Date.now() + timeout;
    const until = (ms) => new Promise((resolve) => { const t = setTimeout(resolve, Math.max(0, ms)); t.unref(); });
    if (this._runPromise) await this._runPromise;
    await Promise.race([this._whenIdle(), until(deadline - Date.now())]);
    const late = [...this._running];
    if (late.length) {
      this.logger.warn(`delayd: ${late.length} jobs of ${this.queue} still running at the close deadline; giving them back`);
      for (const e of late) {
        e.abandoned = true;
        this._running.delete(e);
        e.job._abort(new Error('worker shutting down'));
      }
      await Promise.race([
        Promise.all(late.map((e) => this.redis.call('DELAY.NACK', this.queue, e.job.id, 0, 'ERROR', 'worker shutting down').catch((err) => {
          this.logger.warn(`delayd: NACK of job ${e.job.id} at close failed (${errorText(err)}); it is delivered again after its ack timeout`);
        }))),
        until(5000),
      ]);
    }
    // ACKs of what finished: a few more seconds for a failover to end.
    this._flushAcks();
    await Promise.race([this._whenIdle(), until(Math.max(5000, deadline - Date.now()))]);
    this._abandonAcks = true;
    clearInterval(this._ticker);
    if (this._ackTimer) clearTimeout(this._ackTimer);
    if (this._blocking) this._blocking.disconnect();
    this._emit('closed');
  }

  // closeOnSignal is the opt-in SIGTERM handler: on one of signals it
  // closes the worker (timeout as close's), then calls onClosed, by default
  // process.exit(0). A second signal exits at once with code 1 (the jobs in
  // hand are delivered again after their ack timeout).
  closeOnSignal({ signals = ['SIGTERM', 'SIGINT'], timeout = this.closeTimeout, onClosed = () => process.exit(0) } = {}) {
    let seen = false;
    const handle = (sig) => {
      if (seen) {
        this.logger.warn(`delayd: ${sig} again; exiting without waiting for running jobs`);
        process.exit(1);
      }
      seen = true;
      this.logger.info(`delayd: ${sig}: finishing running jobs of ${this.queue} (up to ${timeout} ms)`);
      this.close(timeout).then(() => onClosed(), (err) => {
        this.logger.error('delayd: close failed', err);
        onClosed(err);
      });
    };
    for (const sig of signals) process.on(sig, handle);
    return this;
  }
}

module.exports = { Client, Worker, Job, UnrecoverableError, exponentialBackoff };
