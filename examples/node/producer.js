// Adds delayed jobs to a delayd queue with the delayd package's Client, each
// with an ID of its own choosing, so that a retry is safe: when a reply is
// lost (a timeout, a dropped connection) the producer sends the same add
// again, and delayd replies null if the job is already there instead of
// adding it twice.
//
//   DELAYD_ADDR   server (default 127.0.0.1:6380)
//   QUEUE         queue (default jobs:email)
//   COUNT         how many jobs (default 3)
//   DELAY_MS      delay of each job in ms (default 1000)
//   ACK_TIMEOUT   ms a worker has to ACK a job before it is delivered again (default 30000)
//   UNIQUE_MS     ms an ID stays taken after its job is done (default 86400000)
//   DIGEST_QUEUE  queue of the daily digest (default jobs:digest)
//   ID_PREFIX     first part of each job's ID (default node): producers in
//                 other languages use their own, so running two adds both sets
//
// UNIQUE keeps the ID taken for a day after the job is done, so even a retry
// that comes after a worker finished the job is a no-op. The daily digest is
// a recurring job the server fires exactly once per day however many
// producers register it (a schedule is an upsert by name).
'use strict';

const Redis = require('ioredis');
const { Client } = require('delayd');

const [host, port] = (process.env.DELAYD_ADDR || '127.0.0.1:6380').split(':');
const queue = process.env.QUEUE || 'jobs:email';
const delay = Number(process.env.DELAY_MS || 1000);
const count = Number(process.env.COUNT || 3);
const ackTimeout = Number(process.env.ACK_TIMEOUT || 30000);
const unique = Number(process.env.UNIQUE_MS || 86400000);
const prefix = process.env.ID_PREFIX || 'node';

const redis = new Redis({ host, port: Number(port) });
const client = new Client(redis);

// add sends the add with retries; true if added, false if already there.
async function add(id, payload) {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await client.add(queue, payload, { id, delay, ackTimeout, unique })) !== null;
    } catch (e) {
      if (attempt === 3 || e.name === 'ReplyError') throw e; // a server error is not retried
      console.log(`add ${id}: ${e.message}; retrying with the same ID`);
      await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    }
  }
}

async function main() {
  for (let i = 1; i <= count; i++) {
    // The ID comes from the producer's own data (an order number, a message
    // id), so the same job always has the same ID.
    const id = `${prefix}-welcome-${i}`;
    if (await add(id, { user: i, mail: 'welcome' })) console.log(`added ${id}`);
    else console.log(`${id} was already added`);
  }
  // A retry of the first job, as after a lost reply: nothing changes.
  if (!(await add(`${prefix}-welcome-1`, 'again'))) console.log(`retry of ${prefix}-welcome-1: already added, nothing changed`);
  // Each firing is a job with the ID daily-digest:<fire time in unix ms>, so
  // it is never doubled.
  await client.schedule(process.env.DIGEST_QUEUE || 'jobs:digest', 'daily-digest', { mail: 'digest' },
    { cron: '0 9 * * *', tz: 'Europe/Berlin', ackTimeout, misfire: 'once' });
  console.log('scheduled daily-digest');
  redis.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
