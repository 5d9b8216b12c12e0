import crypto from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { outsideTestClock, runInTestClock, type Clock } from '../platform/clock.ts';
import type { Database } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import type { Metrics } from '../ops/metrics.ts';
import { invariant } from '../platform/assert.ts';
import { scrubText } from '../platform/logger.ts';
import {
  claimDueJobs,
  claimNextTestClockJob,
  completeAndClaimDueJobs,
  extendJobLease,
  markJobFailed,
  markJobSucceeded,
  type ClaimedJobRow,
  type ClaimedJobs,
  type JobLease,
} from './repository.ts';

/** The first retry waits this long; each further retry doubles it, up to `max_backoff_ms`. */
export const BASE_BACKOFF_MS = 1_000;
/** last_error is truncated to this many characters so one failure cannot bloat the row. */
export const LAST_ERROR_MAX_LENGTH = 500;

const DEFAULT_CONCURRENCY = 4;
const DEFAULT_POLL_INTERVAL_MS = 250;
/**
 * The longest poll interval: jobs due more than a minute after they are written do not notify
 * (migrations/0038_jobs_due_notify.sql), so a worker must poll at least this often to learn of them in time.
 */
export const MAXIMUM_POLL_INTERVAL_MS = 60_000;
/**
 * A claim is exclusive for 15 s and renewed by a heartbeat every third of that while the handler runs,
 * so a job of a crashed worker is taken over within about 15 s (deadlines such as expiry slip by that
 * much at most), while a long handler keeps its job.
 */
const DEFAULT_LEASE_MS = 15_000;
/** A handler running longer than this (by the service clock) is stalled: its lease is no longer renewed. */
const DEFAULT_MAX_RENEWED_RUN_MS = 10 * 60_000;
const DEFAULT_MAX_BACKOFF_MS = 3_600_000;
const MAXIMUM_CONCURRENCY = 100;
/** runDueJobs runs at most this many jobs unless told otherwise, so a test can never spin forever. */
const DEFAULT_RUN_DUE_JOBS_LIMIT = 1_000;
/** An upper bound on the rounds of one runDueJobs call, on top of the job limit. */
const MAXIMUM_RUN_DUE_JOBS_ROUNDS = 10_000;
/** An upper bound on the waits of stop(); each wait lets at least one handler run finish. */
const MAXIMUM_STOP_WAITS = 10_000;

/** What a handler receives; `attempt` is 1 on the first run. */
export interface ClaimedJob {
  job_id: string;
  task: string;
  payload: Record<string, unknown>;
  attempt: number;
  max_attempts: number;
  white_label_id: string | null;
}

export interface JobHandlerContext {
  database: Database;
  clock: Clock;
}

/**
 * A job handler. It runs outside any transaction and opens its own through `context.database`.
 * Delivery is at least once (a worker can crash after the work commits, or lose its lease while
 * still running), so a handler must be idempotent. A thrown error schedules a retry with backoff.
 */
export type JobHandler = (job: ClaimedJob, context: JobHandlerContext) => Promise<void>;

export interface WorkerOptions {
  database: Database;
  /** The clock handlers see (the instance's ScopedClock, so a test clock's job runs at that clock's time). */
  clock: Clock;
  /**
   * The process's own clock, for what never follows a test clock: claims and leases, heartbeats, and
   * the time a job's outcome is recorded. Defaults to `clock`, which is the same outside a scope.
   */
  real_clock?: Clock;
  handlers: Record<string, JobHandler>;
  logger: Logger;
  metrics?: Metrics;
  /** Handlers running at once; default 4. */
  concurrency?: number;
  /**
   * Pause between polls when there was nothing to claim; default 250 ms, at most a minute. A job that falls
   * due before the next poll (the claim answers the next run_at; a notification names a new job's) wakes the
   * worker at that instant instead.
   */
  poll_interval_ms?: number;
  /** How long a claim is exclusive without a heartbeat; after it another worker takes the job over. Default 15 s. */
  lease_ms?: number;
  /**
   * How often a running handler's lease is renewed (real time); default a third of the lease. 0 turns the
   * heartbeat off, which is how a test models a worker that crashed while its handler ran.
   */
  heartbeat_interval_ms?: number;
  /** After this long (service clock) a running handler counts as stalled and its lease runs out. Default 10 min. */
  max_renewed_run_ms?: number;
  /** Identifies this worker in `locked_by`; must be unique per worker instance. */
  worker_id?: string;
  /** The ceiling of the retry backoff; default one hour. */
  max_backoff_ms?: number;
}

type Outcome = 'succeeded' | 'retried' | 'failed' | 'lease_lost' | 'completion_error';

function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** Scrubs secrets out of the text and truncates it by code points, so no surrogate pair is split. */
export function lastErrorText(error: unknown): string {
  return Array.from(scrubText(describeError(error))).slice(0, LAST_ERROR_MAX_LENGTH).join('');
}

function defaultWorkerId(): string {
  return `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
}

/**
 * Claims due jobs and runs their handlers. A job's life is three separate steps, never one
 * transaction: claim (one statement), run the handler (which opens its own transactions), complete
 * (one statement fenced by worker id and attempt). Holding a transaction across the handler would
 * deadlock PGlite, which has a single connection, and would pin a pooled connection on PostgreSQL.
 */
export class Worker {
  readonly worker_id: string;
  private readonly database: Database;
  private readonly clock: Clock;
  private readonly real_clock: Clock;
  private readonly handlers: Record<string, JobHandler>;
  private readonly logger: Logger;
  private readonly metrics: Metrics | undefined;
  private readonly concurrency: number;
  private readonly poll_interval_ms: number;
  private readonly lease_ms: number;
  private readonly heartbeat_interval_ms: number;
  private readonly max_renewed_run_ms: number;
  private readonly max_backoff_ms: number;

  /** Every job being processed, by the poll loop or by runDueJobs; stop() waits for all of them. */
  private readonly in_flight = new Set<Promise<void>>();
  private started = false;
  private stopping = false;
  private poll_timer: NodeJS.Timeout | null = null;
  private poll_in_progress: Promise<void> | null = null;
  /** Set when a wake arrives during a poll, so the poll that is running is followed by another at once. */
  private poll_again = false;
  /** True when the last poll filled every free slot, so a finishing handler should poll at once. */
  private backlog_possible = false;
  /** The real-clock instant (ms) the poll timer fires at; null while no timer is set. */
  private poll_timer_due_ms: number | null = null;
  /** The earliest known instant (ms, real clock) a job falls due that no poll has claimed yet; null when none is known. */
  private timed_wake_ms: number | null = null;
  /** The instant of the last timed wake that fired: a later claim that names it again (a frozen test clock) arms nothing. */
  private fired_wake_ms = Number.NEGATIVE_INFINITY;

  constructor(options: WorkerOptions) {
    this.database = options.database;
    this.clock = options.clock;
    this.real_clock = options.real_clock ?? options.clock;
    this.handlers = options.handlers;
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.poll_interval_ms = options.poll_interval_ms ?? DEFAULT_POLL_INTERVAL_MS;
    this.lease_ms = options.lease_ms ?? DEFAULT_LEASE_MS;
    this.heartbeat_interval_ms = options.heartbeat_interval_ms ?? Math.max(1, Math.floor(this.lease_ms / 3));
    this.max_renewed_run_ms = options.max_renewed_run_ms ?? DEFAULT_MAX_RENEWED_RUN_MS;
    this.max_backoff_ms = options.max_backoff_ms ?? DEFAULT_MAX_BACKOFF_MS;
    this.worker_id = options.worker_id ?? defaultWorkerId();
    invariant(
      Number.isInteger(this.concurrency) && this.concurrency >= 1 && this.concurrency <= MAXIMUM_CONCURRENCY,
      `concurrency is an integer from 1 to ${MAXIMUM_CONCURRENCY}`,
    );
    invariant(
      Number.isInteger(this.poll_interval_ms) && this.poll_interval_ms >= 1 && this.poll_interval_ms <= MAXIMUM_POLL_INTERVAL_MS,
      `poll_interval_ms is an integer from 1 to ${MAXIMUM_POLL_INTERVAL_MS}`,
    );
    invariant(Number.isInteger(this.lease_ms) && this.lease_ms >= 1, 'lease_ms is a positive integer');
    invariant(Number.isInteger(this.heartbeat_interval_ms) && this.heartbeat_interval_ms >= 0 && this.heartbeat_interval_ms < this.lease_ms, 'heartbeat_interval_ms is shorter than the lease');
    invariant(Number.isInteger(this.max_renewed_run_ms) && this.max_renewed_run_ms >= 0, 'max_renewed_run_ms is a non-negative integer');
    invariant(Number.isInteger(this.max_backoff_ms) && this.max_backoff_ms >= 0, 'max_backoff_ms is a non-negative integer');
    invariant(this.worker_id.length > 0, 'worker_id is a non-empty string');
  }

  /** Starts the background poll loop. Calling it on a started worker does nothing. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    this.schedulePoll(0);
  }

  /** Polls at once instead of waiting for the interval, for example right after enqueueing work. */
  wake(): void {
    if (!this.started || this.stopping) return;
    if (this.poll_in_progress !== null) {
      this.poll_again = true;
      return;
    }
    this.schedulePoll(0);
  }

  /**
   * Wakes the worker when a job falls due at `instant` (real time): at once when it has come, else by a
   * timer set for it, unless a poll comes earlier anyway. Only the earliest instant is kept: the poll it
   * wakes answers the next pending run_at, which covers every later job (src/jobs/wake.ts).
   */
  wakeAt(instant: Date): void {
    if (!this.started || this.stopping) return;
    const at_ms = instant.getTime();
    if (!Number.isFinite(at_ms) || at_ms <= this.real_clock.now().getTime()) {
      this.wake();
      return;
    }
    this.timed_wake_ms = this.timed_wake_ms === null ? at_ms : Math.min(this.timed_wake_ms, at_ms);
    // A poll in progress schedules the next one when it ends, with this instant in view.
    if (this.poll_in_progress !== null) return;
    if (this.poll_timer_due_ms === null || at_ms < this.poll_timer_due_ms) this.scheduleNextPoll();
  }

  /**
   * Stops claiming and waits for every running handler to finish and record its outcome. A job
   * claimed by a poll that was in progress is still run, because leaving it leased would delay it by
   * a whole lease. After stop(), runDueJobs claims nothing until start() is called again.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.poll_timer !== null) {
      clearTimeout(this.poll_timer);
      this.poll_timer = null;
      this.poll_timer_due_ms = null;
    }
    if (this.poll_in_progress !== null) await this.poll_in_progress;
    for (let wait = 0; wait < MAXIMUM_STOP_WAITS && this.in_flight.size > 0; wait += 1) {
      await Promise.allSettled([...this.in_flight]);
    }
    this.started = false;
  }

  /**
   * Claims and runs every job due at clock.now(), `concurrency` at a time, including jobs that the
   * handlers enqueue as due meanwhile; returns how many ran. A retried job is due again only after
   * its backoff, so it does not run twice in one call unless the clock moves. Used by tests driving a
   * TestClock, and by one-shot command-line runs.
   */
  async runDueJobs(options: { limit?: number } = {}): Promise<number> {
    const limit = options.limit ?? DEFAULT_RUN_DUE_JOBS_LIMIT;
    invariant(Number.isInteger(limit) && limit >= 1, 'limit is a positive integer');
    let ran = 0;
    for (let round = 0; round < MAXIMUM_RUN_DUE_JOBS_ROUNDS && ran < limit && !this.stopping; round += 1) {
      const batch_size = Math.min(this.concurrency, limit - ran);
      const { claimed: jobs } = await this.claim(batch_size);
      await Promise.all(jobs.map((job) => this.track(this.process(job))));
      ran += jobs.length;
      // Only an empty claim ends the run: the handlers of a short batch may have enqueued due jobs.
      if (jobs.length === 0) break;
    }
    return ran;
  }

  private schedulePoll(delay_ms: number, timed_wake_ms: number | null = null): void {
    if (!this.started || this.stopping) return;
    if (this.poll_timer !== null) clearTimeout(this.poll_timer);
    const set_at_ms = this.real_clock.now().getTime();
    this.poll_timer_due_ms = set_at_ms + delay_ms;
    // A wake can come from work running under a test clock (a slip accepted for a clock's order); the
    // timer is made outside that scope, or every later poll would run at the clock's frozen time.
    this.poll_timer = outsideTestClock(() =>
      setTimeout(() => {
        this.poll_timer = null;
        this.poll_timer_due_ms = null;
        if (timed_wake_ms !== null && this.timed_wake_ms === timed_wake_ms) {
          const now_ms = this.real_clock.now().getTime();
          // Node's timers can fire a millisecond before the wall clock reaches their instant; a claim then
          // would find the job not yet due. The rest is waited for, unless the clock stands still (a test clock).
          if (now_ms < timed_wake_ms && now_ms > set_at_ms) {
            this.scheduleNextPoll();
            return;
          }
          this.timed_wake_ms = null;
          this.fired_wake_ms = timed_wake_ms;
        }
        this.beginPoll();
      }, delay_ms),
    );
  }

  /** The next poll: after the interval, or when the earliest known job falls due if that is sooner. */
  private scheduleNextPoll(): void {
    const timed = this.timed_wake_ms;
    if (timed === null) {
      this.schedulePoll(this.poll_interval_ms);
      return;
    }
    const until_due_ms = Math.max(0, timed - this.real_clock.now().getTime());
    if (until_due_ms >= this.poll_interval_ms) this.schedulePoll(this.poll_interval_ms);
    else this.schedulePoll(until_due_ms, timed);
  }

  /** Runs one poll; polls never overlap, and the next one is scheduled when this one ends. */
  private beginPoll(): void {
    if (this.poll_in_progress !== null) {
      this.poll_again = true;
      return;
    }
    this.poll_again = false;
    this.poll_in_progress = this.pollOnce().finally(() => {
      this.poll_in_progress = null;
      if (this.poll_again) this.schedulePoll(0);
      else this.scheduleNextPoll();
    });
  }

  /** Claims as many jobs as there are free slots and starts them without waiting for them. */
  private async pollOnce(): Promise<void> {
    if (this.stopping) return;
    const free_slots = this.concurrency - this.in_flight.size;
    if (free_slots <= 0) {
      // A finishing handler wakes the loop, so there is nothing to do until then.
      this.backlog_possible = true;
      return;
    }
    let jobs: ClaimedJobRow[];
    try {
      const answer = await this.claim(free_slots);
      jobs = answer.claimed;
      this.rememberNextDue(answer.next_run_at);
    } catch (error) {
      // The database may be restarting; the next poll tries again after the interval.
      this.logger.error({ err: error, worker_id: this.worker_id }, 'claiming jobs failed');
      return;
    }
    this.backlog_possible = jobs.length === free_slots;
    for (const job of jobs) this.startPolled(job);
  }

  /**
   * Keeps the run_at the claim answered as the instant to wake at, unless an earlier one is known. An
   * instant that already fired is not armed again: under a test clock that stands still, the same job
   * stays ahead of the clock, and waking for it again would poll without end.
   */
  private rememberNextDue(next_run_at: Date | null): void {
    if (next_run_at === null) return;
    const at_ms = next_run_at.getTime();
    if (at_ms <= this.fired_wake_ms) return;
    this.timed_wake_ms = this.timed_wake_ms === null ? at_ms : Math.min(this.timed_wake_ms, at_ms);
  }

  /**
   * Runs a job that the poll loop claimed. When it succeeds while a backlog is likely, it claims its
   * successor in the statement that records the success (`succeed`); when it ends otherwise, the loop is
   * woken to fill its slot.
   */
  private startPolled(job: ClaimedJobRow): void {
    void this.track(this.process(job, true)).then(() => {
      if (this.backlog_possible) this.wake();
    });
  }

  /**
   * Whether a finishing job may claim its successor itself: the loop runs, the last claim filled every
   * slot (so more jobs are likely due), and no poll is claiming at this moment, which could count this
   * job's slot as free and fill it too.
   */
  private mayClaimSuccessor(): boolean {
    return this.started && !this.stopping && this.backlog_possible && this.poll_in_progress === null;
  }

  /** True once stop() was called: long runs (a test clock's advance) end their slice early. */
  isStopping(): boolean {
    return this.stopping;
  }

  /**
   * Runs the next job of a sandbox test clock that is due by `due_until`, through the same path as
   * every claimed job (handler, heartbeat, outcome, retries), inside the clock's scope with the time set
   * to the job's run_at, or to `not_before` when that is later: a clock's time never runs backwards.
   * Returns the instant the job ran at, or null when no job of the clock is due by `due_until`.
   */
  async runNextTestClockJob(input: {
    white_label_id: string;
    merchant_id: string;
    test_clock_id: string;
    due_until: Date;
    not_before: Date;
  }): Promise<{ job_id: string; task: string; ran_at: Date } | null> {
    const row = await claimNextTestClockJob(this.database, {
      white_label_id: input.white_label_id,
      test_clock_id: input.test_clock_id,
      due_until: input.due_until,
      lease_now: this.real_clock.now(),
      worker_id: this.worker_id,
      lease_ms: this.lease_ms,
    });
    if (row === null) return null;
    const ran_at = new Date(Math.max(row.run_at.getTime(), input.not_before.getTime()));
    const scope = { test_clock_id: input.test_clock_id, white_label_id: input.white_label_id, merchant_id: input.merchant_id, now: ran_at };
    await runInTestClock(scope, () => this.track(this.process(row)));
    return { job_id: row.job_id, task: row.task, ran_at };
  }

  private claim(limit: number): Promise<ClaimedJobs> {
    return claimDueJobs(this.database, {
      now: this.real_clock.now(),
      limit,
      worker_id: this.worker_id,
      lease_ms: this.lease_ms,
    });
  }

  private track(processing: Promise<void>): Promise<void> {
    this.in_flight.add(processing);
    return processing.finally(() => this.in_flight.delete(processing));
  }

  /**
   * Runs one claimed job and records its outcome. Never rejects: every failure ends up in the row or the log.
   * `polled`: claimed by the poll loop, whose jobs may claim their successor when they succeed.
   */
  private async process(row: ClaimedJobRow, polled = false): Promise<void> {
    const lease: JobLease = { job_id: row.job_id, worker_id: this.worker_id, attempt: row.attempts };
    const log_fields = { job_id: row.job_id, task: row.task, attempt: row.attempts, max_attempts: row.max_attempts };
    // Own properties only, so that a task named like an Object.prototype member is not "handled".
    const handler = Object.hasOwn(this.handlers, row.task) ? this.handlers[row.task] : undefined;
    if (handler === undefined) {
      this.logger.error(log_fields, 'no handler is registered for the job task; failing the job');
      await this.fail(row, lease, `no handler is registered for task "${row.task}"`, true);
      return;
    }
    if (row.attempts > row.max_attempts) {
      // The previous owner's lease expired during the last allowed attempt: it crashed or stalled.
      // Running again would exceed max_attempts, and a job that keeps killing its worker must stop.
      this.logger.error(log_fields, 'the lease expired during the final attempt; failing the job');
      await this.fail(row, lease, 'the lease expired during the final attempt (the worker crashed or stalled)', true);
      return;
    }
    const job: ClaimedJob = {
      job_id: row.job_id,
      task: row.task,
      payload: row.payload,
      attempt: row.attempts,
      max_attempts: row.max_attempts,
      white_label_id: row.white_label_id,
    };
    const started_at_ms = performance.now();
    let handler_error: { error: unknown } | null = null;
    const stopHeartbeat = this.heartbeat(row, lease);
    // Debug lines around every handler run: the chaos run (scripts/chaos) reads them from every worker
    // process to prove that no job's handler ever ran twice at the same time.
    this.logger.debug({ ...log_fields, worker_id: this.worker_id }, 'job handler started');
    try {
      await handler(job, { database: this.database, clock: this.clock });
    } catch (error) {
      handler_error = { error };
    } finally {
      stopHeartbeat();
    }
    this.logger.debug({ ...log_fields, worker_id: this.worker_id, failed: handler_error !== null }, 'job handler ended');
    this.metrics?.job_duration_seconds.observe({ task: row.task }, (performance.now() - started_at_ms) / 1000);
    if (handler_error === null) {
      await this.succeed(row, lease, polled);
      return;
    }
    // The payload is never logged: it may hold secrets. The error is scrubbed by the logger.
    this.logger.warn({ ...log_fields, err: handler_error.error }, 'job handler failed');
    await this.fail(row, lease, lastErrorText(handler_error.error), false);
  }

  /**
   * Renews the lease every `heartbeat_interval_ms` while the handler runs, until the handler has run
   * `max_renewed_run_ms` by the service clock (a stalled handler is then taken over) or the claim is
   * lost. A failed renewal is logged and retried at the next beat; the claim's fencing keeps a takeover
   * safe either way. Returns the function that stops it.
   */
  private heartbeat(row: ClaimedJobRow, lease: JobLease): () => void {
    if (this.heartbeat_interval_ms === 0) return () => {};
    // Leases are real time even for a test clock's job, so the process's clock measures them.
    const claimed_at_ms = this.real_clock.now().getTime();
    let renewing = false;
    const timer = setInterval(() => {
      if (renewing) return;
      const now = this.real_clock.now();
      if (now.getTime() - claimed_at_ms >= this.max_renewed_run_ms) {
        clearInterval(timer);
        this.logger.warn({ job_id: row.job_id, task: row.task, attempt: row.attempts }, 'the job handler runs too long; its lease is no longer renewed');
        return;
      }
      renewing = true;
      extendJobLease(this.database, lease, now, this.lease_ms)
        .then((held) => {
          if (!held) clearInterval(timer);
        })
        .catch((error: unknown) => this.logger.warn({ err: error, job_id: row.job_id, task: row.task }, 'renewing the job lease failed'))
        .finally(() => {
          renewing = false;
        });
    }, this.heartbeat_interval_ms);
    timer.unref();
    return () => clearInterval(timer);
  }

  private async succeed(row: ClaimedJobRow, lease: JobLease, polled: boolean): Promise<void> {
    if (polled && this.mayClaimSuccessor()) {
      await this.succeedAndClaimSuccessor(row, lease);
      return;
    }
    let outcome: Outcome;
    try {
      outcome = (await markJobSucceeded(this.database, lease, this.real_clock.now())) ? 'succeeded' : 'lease_lost';
    } catch (error) {
      this.logger.error({ err: error, job_id: row.job_id, task: row.task }, 'recording job success failed');
      outcome = 'completion_error';
    }
    this.record(row, outcome);
  }

  /**
   * Records the success and claims one due job in the same statement (`completeAndClaimDueJobs`): the
   * job's own slot, refilled, so the worker never runs more than `concurrency` jobs. Other free slots are
   * the poll loop's. A failure of the statement claims nothing and leaves the job to its lease, as a
   * failed `markJobSucceeded` does.
   */
  private async succeedAndClaimSuccessor(row: ClaimedJobRow, lease: JobLease): Promise<void> {
    let outcome: Outcome;
    let successors: ClaimedJobRow[] = [];
    try {
      const result = await completeAndClaimDueJobs(this.database, lease, {
        now: this.real_clock.now(),
        limit: 1,
        worker_id: this.worker_id,
        lease_ms: this.lease_ms,
      });
      outcome = result.completed ? 'succeeded' : 'lease_lost';
      successors = result.claimed;
    } catch (error) {
      this.logger.error({ err: error, job_id: row.job_id, task: row.task }, 'recording job success failed');
      outcome = 'completion_error';
    }
    this.record(row, outcome);
    invariant(successors.length <= 1, 'a finishing job claims at most its own slot');
    if (successors.length === 0) this.backlog_possible = false;
    for (const successor of successors) this.startPolled(successor);
  }

  private async fail(row: ClaimedJobRow, lease: JobLease, last_error: string, permanent: boolean): Promise<void> {
    let outcome: Outcome;
    try {
      const result = await markJobFailed(this.database, lease, {
        now: this.real_clock.now(),
        // The retry waits in the job's own time: a test clock's job is retried when its clock passes it.
        retry_from: this.clock.now(),
        last_error: Array.from(last_error).slice(0, LAST_ERROR_MAX_LENGTH).join(''),
        permanent,
        base_backoff_ms: BASE_BACKOFF_MS,
        max_backoff_ms: this.max_backoff_ms,
      });
      outcome = result === null ? 'lease_lost' : result.status === 'failed' ? 'failed' : 'retried';
    } catch (error) {
      this.logger.error({ err: error, job_id: row.job_id, task: row.task }, 'recording job failure failed');
      outcome = 'completion_error';
    }
    this.record(row, outcome);
  }

  private record(row: ClaimedJobRow, outcome: Outcome): void {
    if (outcome === 'lease_lost') {
      // Another worker took the job over after this lease expired; its outcome is the one that counts.
      this.logger.warn(
        { job_id: row.job_id, task: row.task, attempt: row.attempts, worker_id: this.worker_id },
        'the job lease was taken over before completion; this outcome is discarded',
      );
      return;
    }
    if (outcome === 'completion_error') {
      // The lease will expire and the job will be claimed again, so nothing is counted yet.
      return;
    }
    if (outcome === 'failed') {
      this.logger.error({ job_id: row.job_id, task: row.task, attempt: row.attempts }, 'job failed permanently');
    }
    this.metrics?.jobs_total.inc({ task: row.task, outcome });
  }
}
