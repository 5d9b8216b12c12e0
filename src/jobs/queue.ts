import { activeTestClock, type Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { newId } from '../platform/ids.ts';
import { DAY_MS } from '../platform/time.ts';
import { BACKLOG_COUNT_LIMIT, type Backlog } from '../platform/backlog.ts';
import {
  deferDeletePendingJobsByKey,
  deferInsertJob,
  deletePendingJobsByKey,
  deleteSucceededJobsBefore,
  findJobById,
  hasDueTestClockJob,
  hasLeasedTestClockJob,
  insertJob,
  readDueJobBacklog,
  type InsertJobInput,
  type JobRow,
} from './repository.ts';

export const DEFAULT_MAX_ATTEMPTS = 10;
/** The schema's CHECK on jobs.max_attempts; asserted here so a caller's bug fails with a clear message. */
export const MAXIMUM_MAX_ATTEMPTS = 100;
/** Succeeded jobs are kept this long for inspection before the purge deletes them. */
export const SUCCEEDED_JOB_RETENTION_MS = DAY_MS;

const MAXIMUM_TASK_LENGTH = 200;
const MAXIMUM_JOB_KEY_LENGTH = 500;
const PURGE_BATCH_SIZE = 1_000;
const PURGE_MAXIMUM_BATCHES = 1_000;

export interface JobSpec {
  /** The handler name the worker dispatches on. */
  task: string;
  /** Handler input; stored as jsonb and never logged, because it may hold secrets. */
  payload: Record<string, unknown>;
  /** Not claimed before this instant; defaults to the clock's now. */
  run_at?: Date;
  /** Dedupe key: while a pending or running job has this key, enqueueing another is a no-op. */
  job_key?: string;
  /** Attempts before the job is marked failed; default 10, at most 100. */
  max_attempts?: number;
  /** The brand the job works for; null (the default) for housekeeping. */
  white_label_id?: string | null;
}

/**
 * Enqueues a job inside the caller's transaction, so the job exists if and only if the caller's
 * work commits. Returns the job id, or null when `job_key` already has a pending or running job.
 * Inside a sandbox test clock's scope the job is stamped with that clock: its run_at is in the
 * clock's time, so only an advance of the clock runs it (src/test-clocks/).
 */
export async function enqueueJob(tx: Queryable, clock: Clock, spec: JobSpec): Promise<string | null> {
  return insertJob(tx, jobRow(clock, spec));
}

/**
 * Enqueues a job as `enqueueJob` does, when the caller does not need its id: in a transaction the
 * insert is queued and sent with the transaction's next statement (src/platform/unit-of-work.ts).
 * A `job_key` that already has a pending or running job still makes it a no-op.
 */
export async function scheduleJob(tx: Queryable, clock: Clock, spec: JobSpec): Promise<void> {
  await deferInsertJob(tx, jobRow(clock, spec));
}

/** Checks a job spec and makes its row: one place for every rule of a new job. */
function jobRow(clock: Clock, spec: JobSpec): InsertJobInput {
  invariant(
    typeof spec.task === 'string' && spec.task.length > 0 && spec.task.length <= MAXIMUM_TASK_LENGTH,
    `a job task is a non-empty string of at most ${MAXIMUM_TASK_LENGTH} characters`,
  );
  invariant(
    typeof spec.payload === 'object' && spec.payload !== null && !Array.isArray(spec.payload),
    'a job payload is a JSON object',
  );
  const max_attempts = spec.max_attempts ?? DEFAULT_MAX_ATTEMPTS;
  invariant(
    Number.isInteger(max_attempts) && max_attempts >= 1 && max_attempts <= MAXIMUM_MAX_ATTEMPTS,
    `max_attempts is an integer from 1 to ${MAXIMUM_MAX_ATTEMPTS}`,
  );
  const job_key = spec.job_key ?? null;
  invariant(
    job_key === null || (job_key.length > 0 && job_key.length <= MAXIMUM_JOB_KEY_LENGTH),
    `a job key is a non-empty string of at most ${MAXIMUM_JOB_KEY_LENGTH} characters`,
  );
  const now = clock.now();
  const run_at = spec.run_at ?? now;
  invariant(run_at instanceof Date && !Number.isNaN(run_at.getTime()), 'run_at is a valid Date');
  return {
    job_id: newId('job'),
    white_label_id: spec.white_label_id ?? null,
    task: spec.task,
    payload_json: JSON.stringify(spec.payload),
    job_key,
    run_at,
    max_attempts,
    test_clock_id: activeTestClock()?.test_clock_id ?? null,
    now,
  };
}

/**
 * Deletes the pending job with this key (for example a deadline that no longer applies) and returns
 * how many were deleted, 0 or 1. A job already running is not interrupted, so handlers of keyed jobs
 * must re-check that their work still applies.
 */
export async function cancelJobsByKey(tx: Queryable, job_key: string): Promise<number> {
  return deletePendingJobsByKey(tx, job_key);
}

/**
 * Cancels the pending job with this key as `cancelJobsByKey` does, when the caller does not need the
 * count: in a transaction the delete is queued and sent with the transaction's next statement
 * (src/platform/unit-of-work.ts), like `scheduleJob`'s insert.
 */
export async function unscheduleJob(tx: Queryable, job_key: string): Promise<void> {
  await deferDeletePendingJobsByKey(tx, job_key);
}

/**
 * Housekeeping: deletes succeeded jobs older than the retention (a day by default) in bounded
 * batches, and returns how many were deleted. Failed jobs are kept until an operator deals with them.
 */
export async function purgeFinishedJobs(
  database: Queryable,
  clock: Clock,
  options: { retention_ms?: number } = {},
): Promise<number> {
  const retention_ms = options.retention_ms ?? SUCCEEDED_JOB_RETENTION_MS;
  invariant(Number.isFinite(retention_ms) && retention_ms >= 0, 'retention_ms is a non-negative number');
  const before = new Date(clock.now().getTime() - retention_ms);
  let deleted = 0;
  for (let batch = 0; batch < PURGE_MAXIMUM_BATCHES; batch += 1) {
    const count = await deleteSucceededJobsBefore(database, { before, limit: PURGE_BATCH_SIZE });
    deleted += count;
    if (count < PURGE_BATCH_SIZE) break;
  }
  return deleted;
}

/** Reads one job by id, for operators and tests. */
export async function getJob(database: Queryable, job_id: string): Promise<JobRow | null> {
  return findJobById(database, job_id);
}

/**
 * Whether a sandbox test clock still has a job due by `due_until` (pending, or running with a lease that
 * ran out at `real_now`): what tells an advance that stopped at its bound from one that ran everything.
 */
export async function testClockHasDueJob(
  database: Queryable,
  input: { white_label_id: string; test_clock_id: string; due_until: Date; real_now: Date },
): Promise<boolean> {
  return hasDueTestClockJob(database, { white_label_id: input.white_label_id, test_clock_id: input.test_clock_id, due_until: input.due_until, lease_now: input.real_now });
}

/**
 * Whether a job of a sandbox test clock is still running under a live lease: an advance whose previous
 * runner crashed moments ago must wait for that lease to run out, so that the job is taken over in order.
 */
export async function testClockHasLeasedJob(database: Queryable, input: { white_label_id: string; test_clock_id: string; real_now: Date }): Promise<boolean> {
  return hasLeasedTestClockJob(database, { white_label_id: input.white_label_id, test_clock_id: input.test_clock_id, lease_now: input.real_now });
}

/** Jobs due on the wall clock and not yet claimed, and since when the oldest has waited: the worker's backlog gauge. */
export function readJobBacklog(database: Queryable, clock: Clock): Promise<Backlog> {
  return readDueJobBacklog(database, clock.now(), BACKLOG_COUNT_LIMIT);
}
