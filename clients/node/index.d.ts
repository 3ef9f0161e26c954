// Types of the delayd package (hand-written; index.js is the source).
import { EventEmitter } from 'node:events';
import type { Redis, Cluster } from 'ioredis';

/** An ioredis connection: a Redis or a Cluster. */
export type Connection = Redis | Cluster;

/** A payload: a string or Buffer is sent as it is; anything else as JSON. */
export type Payload = string | Buffer | unknown;

/** Every DELAY.ADD option. Durations are milliseconds. */
export interface AddOptions {
  /** Ready this many ms from now (default 0). Not with `at`. */
  delay?: number;
  /** Ready at this time (a Date or unix ms): DELAY.ADDAT. Not with `delay`. */
  at?: Date | number;
  /** The job's id (default: one the server makes). An add of an existing id changes nothing and resolves to null. */
  id?: string;
  /** With `id`: replace the job's payload, time and options. */
  replace?: boolean;
  /** ms a worker has to ACK a delivery before it is delivered again (0: a pop removes the job). */
  ackTimeout?: number;
  /** Deliveries after the first (RETRY 0: once); unlimited without it. */
  retry?: number;
  /** Queue that takes the job when no delivery is left. */
  deadLetter?: string;
  /** With `id`: the id stays taken this many ms after the job is done. */
  unique?: number;
  /** With `id`: an add of a still-delayed id pushes its time out, at most this many ms past the first add. */
  debounce?: number;
  /** Jobs of a queue are handed out round-robin across groups. */
  group?: string;
  /** Higher is handed out first. */
  priority?: number;
}

/** DELAY.SCHEDULE's options: `cron` (with `tz`) or `every`. */
export interface ScheduleOptions {
  cron?: string;
  tz?: string;
  every?: number;
  ackTimeout?: number;
  retry?: number;
  deadLetter?: string;
  misfire?: 'skip' | 'once' | 'all';
  start?: Date | number;
  end?: Date | number;
}

/** DELAY.GET's fields, camelCase. */
export interface JobInfo {
  id: string;
  queue: string;
  state: 'delayed' | 'ready' | 'reserved' | string;
  due: number;
  payload: string;
  deliveries: number;
  ackDeadline?: number;
  group?: string;
  priority?: number;
  origin?: string;
  /** The last failure reason (DELAY.NACK ... ERROR, or "ack timeout"). */
  error?: string;
}

/** DELAY.STATS's fields, camelCase. */
export interface QueueStats {
  delayed: number;
  ready: number;
  reserved: number;
  latency: number;
  added: number;
  deliveries: number;
  redeliveries: number;
  acks: number;
  nacks: number;
  expired: number;
  deadLettered: number;
  paused: number;
  [field: string]: number;
}

/** DELAY.SCHEDULES's fields of one schedule, camelCase. */
export interface ScheduleInfo {
  queue: string;
  name: string;
  spec: string;
  next: number;
  last: number;
  fired: number;
  [field: string]: string | number;
}

/** The producer: adds and manages jobs. */
export class Client {
  constructor(redis: Connection);
  readonly redis: Connection;
  /** Resolves to the job's id, or null when `id` names a job that exists and `replace` is not set. */
  add(queue: string, payload: Payload, options?: AddOptions): Promise<string | null>;
  addAt(queue: string, at: Date | number, payload: Payload, options?: Omit<AddOptions, 'delay' | 'at'>): Promise<string | null>;
  /** Removes jobs whatever their state; resolves to how many existed. */
  cancel(queue: string, ...ids: (string | string[])[]): Promise<number>;
  /** Moves a delayed or ready job to delayMs from now; false if it is neither. */
  reschedule(queue: string, id: string, delayMs: number): Promise<boolean>;
  rescheduleAt(queue: string, id: string, at: Date | number): Promise<boolean>;
  /** Makes delayed jobs ready now; resolves to how many moved. */
  promote(queue: string, ...ids: (string | string[])[]): Promise<number>;
  get(queue: string, id: string): Promise<JobInfo | null>;
  stats(queue: string): Promise<QueueStats>;
  schedule(queue: string, name: string, payload: Payload, options: ScheduleOptions): Promise<'OK'>;
  unschedule(queue: string, name: string): Promise<boolean>;
  schedules(queue?: string): Promise<ScheduleInfo[]>;
}

/** What a handler gets. */
export class Job {
  readonly queue: string;
  readonly id: string;
  /** The payload as a string. */
  readonly payload: string;
  /** Aborted when the worker's close deadline passes with the handler still running. */
  readonly signal: AbortSignal;
  /** The payload parsed as JSON. */
  json<T = unknown>(): T;
}

export type Handler<R = unknown> = (job: Job) => R | Promise<R>;

/** The retry policy: the delay in ms before a failed job's next delivery. deliveries is 1 on the first failure. */
export type Backoff = (deliveries: number, err: unknown, job: Job) => number;

export interface Logger {
  info?(...args: unknown[]): void;
  warn?(...args: unknown[]): void;
  error?(...args: unknown[]): void;
}

export interface WorkerOptions {
  /** Jobs run at once (default 10). */
  concurrency?: number;
  /** Retry policy (default: exponentialBackoff()). */
  backoff?: Backoff;
  /** A job running this long (ms, default 1000) starts its heartbeat. */
  heartbeatAfter?: number;
  /** close()'s default deadline in ms (default 30000). */
  closeTimeout?: number;
  /** Longest wait of one fetch in ms (default 1000; kept under ioredis's commandTimeout). */
  blockMs?: number;
  /** Start at once (default true); else call run(). */
  autorun?: boolean;
  /** Where the worker logs (default console; null: nowhere). */
  logger?: Logger | null;
}

export interface WorkerMetrics {
  completed: number;
  failed: number;
  retried: number;
  /** ACKs that found no reservation (ack timeout passed, or a job without one). */
  acksLost: number;
  fetchErrors: number;
}

export interface CloseOnSignalOptions {
  signals?: NodeJS.Signals[];
  timeout?: number;
  /** Called once closed (default: process.exit(0)). */
  onClosed?: (err?: unknown) => void;
}

/** Runs handler for the jobs of one queue. */
export class Worker<R = unknown> extends EventEmitter {
  constructor(redis: Connection, queue: string, handler: Handler<R>, opts?: WorkerOptions);
  readonly queue: string;
  readonly concurrency: number;
  readonly metrics: WorkerMetrics;
  /** Starts the worker (the constructor does unless autorun is false); resolves once it stops fetching. */
  run(): Promise<void>;
  /** Stops fetching, lets running handlers finish within timeout ms, gives back the rest. */
  close(timeout?: number): Promise<void>;
  /** Opt-in: close on SIGTERM/SIGINT, then exit 0. */
  closeOnSignal(opts?: CloseOnSignalOptions): this;

  on(event: 'completed', listener: (job: Job, result: R) => void): this;
  on(event: 'failed', listener: (job: Job, err: unknown) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'drained' | 'closed', listener: () => void): this;
  once(event: 'completed', listener: (job: Job, result: R) => void): this;
  once(event: 'failed', listener: (job: Job, err: unknown) => void): this;
  once(event: 'error', listener: (err: Error) => void): this;
  once(event: 'drained' | 'closed', listener: () => void): this;
}

/** A job rejected with this is acknowledged, not retried (BullMQ's name; asynq's SkipRetry). */
export class UnrecoverableError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}

export interface BackoffOptions {
  /** First ceiling in ms (default 1000). */
  base?: number;
  /** Growth per delivery (default 2). */
  factor?: number;
  /** Largest ceiling in ms (default 3600000). */
  cap?: number;
  /** Full jitter: a random delay under the ceiling (default true). */
  jitter?: boolean;
}

/** The default retry policy: exponential with full jitter. */
export function exponentialBackoff(opts?: BackoffOptions): Backoff;
