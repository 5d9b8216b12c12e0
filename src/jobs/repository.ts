import type { Queryable } from '../platform/db.ts';
import { backlogOf, type Backlog } from '../platform/backlog.ts';
import { deferWrite } from '../platform/unit-of-work.ts';
import { invariant } from '../platform/assert.ts';

/**
 * Every SQL statement of the jobs module. Each function is one parameterised statement, so a caller
 * never holds a transaction open across a handler run (PGlite has one connection, and a transaction
 * held while a handler runs would block the handler's own queries).
 *
 * Instants are always passed in from the injected clock and never taken from SQL `now()`, so that
 * tests drive every deadline, lease and backoff with a TestClock.
 */

export type JobStatus = 'pending' | 'running' | 'succeeded' | 'failed';

/** One row of `jobs` as stored. */
export interface JobRow {
  job_id: string;
  white_label_id: string | null;
  task: string;
  payload: Record<string, unknown>;
  job_key: string | null;
  status: JobStatus;
  run_at: Date;
  attempts: number;
  max_attempts: number;
  locked_by: string | null;
  locked_until: Date | null;
  last_error: string | null;
  /** The sandbox test clock whose time the job is due by; null for a real-time job. */
  test_clock_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The columns a worker needs after claiming a job; `attempts` already counts this claim. */
export interface ClaimedJobRow {
  job_id: string;
  white_label_id: string | null;
  task: string;
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
}

export interface InsertJobInput {
  job_id: string;
  white_label_id: string | null;
  task: string;
  /** The payload already serialised as JSON text, cast to jsonb in SQL. */
  payload_json: string;
  job_key: string | null;
  run_at: Date;
  max_attempts: number;
  /** The test clock the job is due by (the active scope's); null in real time. */
  test_clock_id: string | null;
  now: Date;
}

/**
 * Inserts a pending job. A job key that already has a pending or running job makes this a no-op:
 * the conflict target names the partial unique index `jobs_job_key` through its predicate.
 * Returns the new job id, or null when the key was taken.
 */
export async function insertJob(tx: Queryable, input: InsertJobInput): Promise<string | null> {
  const result = await tx.query<{ job_id: string }>(
    `INSERT INTO jobs (job_id, white_label_id, task, payload, job_key, status, run_at, attempts, max_attempts,
                       locked_by, locked_until, last_error, test_clock_id, created_at, updated_at)
     VALUES ($1, $2, $3, $4::jsonb, $5, 'pending', $6::timestamptz, 0, $7, NULL, NULL, NULL, $9,
             $8::timestamptz, $8::timestamptz)
     ON CONFLICT (job_key) WHERE job_key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
     RETURNING job_id`,
    [
      input.job_id,
      input.white_label_id,
      input.task,
      input.payload_json,
      input.job_key,
      input.run_at,
      input.max_attempts,
      input.now,
      input.test_clock_id,
    ],
  );
  return result.rows[0]?.job_id ?? null;
}

/** `insertJob` queued in the caller's transaction (src/platform/unit-of-work.ts), for callers that need no id. */
export async function deferInsertJob(tx: Queryable, input: InsertJobInput): Promise<void> {
  await deferWrite(tx, {
    sql: `INSERT INTO jobs (job_id, white_label_id, task, payload, job_key, status, run_at, attempts, max_attempts,
                            locked_by, locked_until, last_error, test_clock_id, created_at, updated_at)
          VALUES ($1, $2, $3, $4::jsonb, $5, 'pending', $6::timestamptz, 0, $7, NULL, NULL, NULL, $9,
                  $8::timestamptz, $8::timestamptz)
          ON CONFLICT (job_key) WHERE job_key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING`,
    // A delete of the same key queued before it must have run first (`deferDeletePendingJobsByKey`).
    rows_written: input.job_key === null ? [] : [jobKeyRow(input.job_key)],
    params: [
      input.job_id, input.white_label_id, input.task, input.payload_json, input.job_key, input.run_at, input.max_attempts, input.now,
      input.test_clock_id,
    ],
  });
}

/** The key under which a queued write names the jobs of a job key, so that two writes of one key never share a batch. */
function jobKeyRow(job_key: string): string {
  return `jobs:key:${job_key}`;
}

/**
 * `deletePendingJobsByKey` queued in the caller's transaction (src/platform/unit-of-work.ts), for callers
 * that need no count. The row it deletes is written otherwise only by the worker's own one-statement
 * transactions (claim, heartbeat, finish), which hold no other lock, and by transactions that hold the
 * lock of the object the job is for: sent at the end, the delete waits for nothing that could wait for it.
 */
export async function deferDeletePendingJobsByKey(tx: Queryable, job_key: string): Promise<void> {
  await deferWrite(tx, {
    sql: `DELETE FROM jobs WHERE job_key = $1 AND status = 'pending'`,
    params: [job_key],
    rows_written: [jobKeyRow(job_key)],
  });
}

/** Deletes the pending job with this key, if any. A running job is left alone: its handler has started. */
export async function deletePendingJobsByKey(tx: Queryable, job_key: string): Promise<number> {
  const result = await tx.query<{ job_id: string }>(
    `DELETE FROM jobs WHERE job_key = $1 AND status = 'pending' RETURNING job_id`,
    [job_key],
  );
  return result.rows.length;
}

export interface ClaimJobsInput {
  now: Date;
  limit: number;
  worker_id: string;
  lease_ms: number;
}

/**
 * Claims up to `limit` jobs in one statement: pending jobs whose run_at has come, and running jobs
 * whose lease has expired (their worker crashed or stalled, so the job is taken over). SKIP LOCKED
 * lets concurrent workers claim disjoint sets without waiting on each other; the row lock plus the
 * re-check of the WHERE clause under READ COMMITTED guarantees that a job is claimed by one worker
 * per lease. Jobs of a test clock are never claimed here: they are due by their clock's time, and
 * only an advance of that clock runs them (`claimNextTestClockJob`).
 *
 * The two kinds are found apart, each through its own partial index (`jobs_runnable_real_in_order` in (run_at, job_id)
 * order, `jobs_leases`), and merged: the `limit` earliest of both by (run_at, job_id) are the `limit`
 * earliest of their union, so the answer is the one a single `WHERE pending OR expired ORDER BY run_at`
 * gives. That single statement cannot walk an index in order (its OR needs a bitmap of every due row,
 * then a sort), so it read the whole backlog on every claim, or the whole table when the planner chose
 * a sequential scan (the slips bench saw 3,200 rows read per claim with 1,000 slips due; docs/decisions/storage-and-jobs.md,
 * "Write paths, fourth slice"). Each part locks its rows in a CTE, because a locking clause cannot sit
 * under a UNION. When both parts find rows, up to `limit` more than are claimed stay locked until this
 * statement commits, and a concurrent claim skips them for that instant; expired leases are rare
 * (a crashed worker), so the pending part alone is the common case.
 */
export async function claimDueJobs(database: Queryable, input: ClaimJobsInput): Promise<ClaimedJobs> {
  const result = await database.query<{ claimed: ClaimedJobRow[] | null; next_run_at: Date | null }>(
    `WITH ${claimParts('')},
     claimed AS (
       ${CLAIM_UPDATE}
       RETURNING ${CLAIMED_COLUMNS}
     )
     SELECT (SELECT json_agg(claimed) FROM claimed) AS claimed,
            (SELECT run_at FROM jobs
              WHERE status = 'pending' AND test_clock_id IS NULL AND run_at > $1::timestamptz
              ORDER BY run_at, job_id
              LIMIT 1) AS next_run_at`,
    [input.now, input.limit, input.worker_id, input.lease_ms],
  );
  const row = result.rows[0];
  invariant(row !== undefined, 'the statement answers one row');
  return { claimed: row.claimed ?? [], next_run_at: row.next_run_at };
}

/**
 * What a poll's claim answers: the jobs it claimed, and the run_at of the earliest real-time job still
 * pending after it (null when there is none), so that the worker wakes when that job falls due instead of
 * at its next poll. The lookup walks `jobs_runnable_real_in_order` from `now` and reads one entry.
 */
export interface ClaimedJobs {
  claimed: ClaimedJobRow[];
  next_run_at: Date | null;
}

const CLAIMED_COLUMNS = 'jobs.job_id, jobs.white_label_id, jobs.task, jobs.payload, jobs.attempts, jobs.max_attempts';

/**
 * The CTEs `pending`, `expired` and `due` of a claim ($1 now, $2 limit), for `claimDueJobs` and
 * `completeAndClaimDueJobs`; `excluded` is a condition on the expired part (the job the same statement
 * completes, which is running under this worker's lease and must not be taken over by it).
 */
function claimParts(excluded: string): string {
  return `pending AS (
       SELECT job_id, run_at
         FROM jobs
        WHERE status = 'pending' AND test_clock_id IS NULL AND run_at <= $1::timestamptz
        ORDER BY run_at, job_id
        LIMIT $2
          FOR UPDATE SKIP LOCKED
     ),
     expired AS (
       SELECT job_id, run_at
         FROM jobs
        WHERE status = 'running' AND test_clock_id IS NULL AND locked_until <= $1::timestamptz${excluded}
        ORDER BY run_at, job_id
        LIMIT $2
          FOR UPDATE SKIP LOCKED
     ),
     due AS (
       SELECT job_id FROM (SELECT job_id, run_at FROM pending UNION ALL SELECT job_id, run_at FROM expired) both_kinds
        ORDER BY run_at, job_id
        LIMIT $2
     )`;
}

/** The claim itself ($3 worker id, $4 lease in ms), over the `due` CTE of `claimParts`. */
const CLAIM_UPDATE = `UPDATE jobs
        SET status = 'running',
            locked_by = $3,
            locked_until = $1::timestamptz + $4::double precision * interval '1 millisecond',
            attempts = jobs.attempts + 1,
            updated_at = $1::timestamptz
       FROM due
      WHERE jobs.job_id = due.job_id`;

/**
 * Records a job's success (as `markJobSucceeded`, fenced by the same lease) and claims up to `limit`
 * due jobs (as `claimDueJobs`) in one statement: a worker with a backlog takes its next job in the round
 * trip that ends the last one, instead of one round trip for each (docs/benchmarks.md, "Write paths, fourth
 * slice"). `completed` is false when the lease was lost; the claim is made either way, as a poll would
 * make it. The job completed is never among those claimed: it is running, so the pending part cannot
 * see it, and the expired part excludes it, although its lease may have run out (a taken-over lease is
 * then recorded as lost, as `markJobSucceeded` records it).
 */
export async function completeAndClaimDueJobs(
  database: Queryable,
  lease: JobLease,
  input: ClaimJobsInput,
): Promise<{ completed: boolean; claimed: ClaimedJobRow[] }> {
  invariant(lease.worker_id === input.worker_id, 'a worker completes its own lease and claims for itself');
  const result = await database.query<{ completed: boolean; claimed: ClaimedJobRow[] | null }>(
    `WITH done AS (
       UPDATE jobs
          SET status = 'succeeded', locked_until = NULL, last_error = NULL, updated_at = $1::timestamptz
        WHERE job_id = $5 AND locked_by = $3 AND status = 'running' AND attempts = $6
       RETURNING job_id
     ),
     ${claimParts(' AND job_id <> $5')},
     claimed AS (
       ${CLAIM_UPDATE}
       RETURNING ${CLAIMED_COLUMNS}
     )
     SELECT EXISTS (SELECT 1 FROM done) AS completed,
            (SELECT json_agg(claimed) FROM claimed) AS claimed`,
    [input.now, input.limit, input.worker_id, input.lease_ms, lease.job_id, lease.attempt],
  );
  const row = result.rows[0];
  invariant(row !== undefined, 'the statement answers one row');
  return { completed: row.completed === true, claimed: row.claimed ?? [] };
}

export interface ClaimTestClockJobInput {
  white_label_id: string;
  test_clock_id: string;
  /** The advance's target: jobs due at or before it are claimed. */
  due_until: Date;
  /** The real instant the lease is measured from (leases never follow a test clock). */
  lease_now: Date;
  worker_id: string;
  lease_ms: number;
}

/**
 * Claims the one job of a test clock that runs next: the earliest by run_at (then id) among its
 * pending jobs due by `due_until` and its running jobs whose lease ran out in real time (an advance
 * whose worker crashed mid-job). One job at a time, so that an advance runs the clock's deadlines in
 * the order they fall due. Returns the job with its run_at, or null when none is due.
 */
export async function claimNextTestClockJob(database: Queryable, input: ClaimTestClockJobInput): Promise<(ClaimedJobRow & { run_at: Date }) | null> {
  const result = await database.query<ClaimedJobRow & { run_at: Date }>(
    `WITH next AS (
       SELECT job_id
         FROM jobs
        WHERE test_clock_id = $1 AND white_label_id = $2
          AND ((status = 'pending' AND run_at <= $3::timestamptz)
               OR (status = 'running' AND locked_until <= $4::timestamptz))
        ORDER BY run_at, job_id
        LIMIT 1
          FOR UPDATE SKIP LOCKED
     )
     UPDATE jobs
        SET status = 'running',
            locked_by = $5,
            locked_until = $4::timestamptz + $6::double precision * interval '1 millisecond',
            attempts = jobs.attempts + 1,
            updated_at = $4::timestamptz
       FROM next
      WHERE jobs.job_id = next.job_id
     RETURNING jobs.job_id, jobs.white_label_id, jobs.task, jobs.payload, jobs.attempts, jobs.max_attempts, jobs.run_at`,
    [input.test_clock_id, input.white_label_id, input.due_until, input.lease_now, input.worker_id, input.lease_ms],
  );
  return result.rows[0] ?? null;
}

/** Whether a test clock has a job due by `due_until` that an advance would run next (pending, or taken over). */
export async function hasDueTestClockJob(database: Queryable, input: Omit<ClaimTestClockJobInput, 'worker_id' | 'lease_ms'>): Promise<boolean> {
  const result = await database.query<{ due: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM jobs
                     WHERE test_clock_id = $1 AND white_label_id = $2
                       AND ((status = 'pending' AND run_at <= $3::timestamptz)
                            OR (status = 'running' AND locked_until <= $4::timestamptz))) AS due`,
    [input.test_clock_id, input.white_label_id, input.due_until, input.lease_now],
  );
  return result.rows[0]?.due === true;
}

/** Whether a job of a test clock is running under a lease that has not run out yet at `lease_now`. */
export async function hasLeasedTestClockJob(database: Queryable, input: { white_label_id: string; test_clock_id: string; lease_now: Date }): Promise<boolean> {
  const result = await database.query<{ leased: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM jobs
                     WHERE test_clock_id = $1 AND white_label_id = $2 AND status = 'running' AND locked_until > $3::timestamptz) AS leased`,
    [input.test_clock_id, input.white_label_id, input.lease_now],
  );
  return result.rows[0]?.leased === true;
}

/** Identifies one claim of one job: the worker holding the lease and the attempt it claimed. */
export interface JobLease {
  job_id: string;
  worker_id: string;
  /** The attempt number the claim produced; a later takeover increments it and fences this lease off. */
  attempt: number;
}

/**
 * Renews a running job's lease (the worker's heartbeat): `locked_until` moves to `now + lease_ms`, only
 * while this worker still holds this very claim. False when the claim was lost (taken over).
 */
export async function extendJobLease(database: Queryable, lease: JobLease, now: Date, lease_ms: number): Promise<boolean> {
  const result = await database.query<{ job_id: string }>(
    `UPDATE jobs SET locked_until = $4::timestamptz + $5::double precision * interval '1 millisecond'
      WHERE job_id = $1 AND locked_by = $2 AND status = 'running' AND attempts = $3
     RETURNING job_id`,
    [lease.job_id, lease.worker_id, lease.attempt, now, lease_ms],
  );
  return result.rows.length === 1;
}

/**
 * Marks a job succeeded. Matches only while this worker still holds this very claim, so a worker
 * whose lease was taken over cannot overwrite the new owner's state. Returns false when the claim
 * was lost. The row is kept (and `locked_by` kept as a record of who ran it) until the purge.
 */
export async function markJobSucceeded(database: Queryable, lease: JobLease, now: Date): Promise<boolean> {
  const result = await database.query<{ job_id: string }>(
    `UPDATE jobs
        SET status = 'succeeded', locked_until = NULL, last_error = NULL, updated_at = $4::timestamptz
      WHERE job_id = $1 AND locked_by = $2 AND status = 'running' AND attempts = $3
     RETURNING job_id`,
    [lease.job_id, lease.worker_id, lease.attempt, now],
  );
  return result.rows.length === 1;
}

export interface MarkJobFailedInput {
  /** The real instant of the record (updated_at). */
  now: Date;
  /**
   * The instant the retry's backoff counts from: the job's own time, which is the test clock's inside
   * a clock's scope and `now` otherwise.
   */
  retry_from: Date;
  /** Already truncated and scrubbed of secrets. */
  last_error: string;
  /** True when retrying cannot help (for example an unknown task): the job fails at once. */
  permanent: boolean;
  base_backoff_ms: number;
  max_backoff_ms: number;
}

/**
 * Records a failed attempt under the same fencing as `markJobSucceeded`. When attempts are exhausted
 * (or the failure is permanent) the job becomes 'failed'; otherwise it goes back to 'pending' with
 * run_at = retry_from + min(max_backoff, base * 2^(attempts - 1)), computed in SQL so that the backoff
 * depends only on the stored attempt count. Returns the resulting status and run_at, or null when
 * the claim was lost.
 */
export async function markJobFailed(
  database: Queryable,
  lease: JobLease,
  input: MarkJobFailedInput,
): Promise<{ status: 'pending' | 'failed'; run_at: Date } | null> {
  const result = await database.query<{ status: 'pending' | 'failed'; run_at: Date }>(
    `UPDATE jobs
        SET status = CASE WHEN $5::boolean OR attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
            run_at = CASE WHEN $5::boolean OR attempts >= max_attempts THEN run_at
                          ELSE $9::timestamptz
                               + least($7::double precision,
                                       $6::double precision * power(2::double precision, attempts - 1))
                                 * interval '1 millisecond'
                     END,
            locked_by = CASE WHEN $5::boolean OR attempts >= max_attempts THEN locked_by ELSE NULL END,
            locked_until = NULL,
            last_error = $8,
            updated_at = $4::timestamptz
      WHERE job_id = $1 AND locked_by = $2 AND status = 'running' AND attempts = $3
     RETURNING status, run_at`,
    [
      lease.job_id,
      lease.worker_id,
      lease.attempt,
      input.now,
      input.permanent,
      input.base_backoff_ms,
      input.max_backoff_ms,
      input.last_error,
      input.retry_from,
    ],
  );
  return result.rows[0] ?? null;
}

/**
 * Deletes up to `limit` succeeded jobs last updated before `before`. Failed jobs are kept for
 * inspection. The batch limit keeps each statement short so that it never stalls the claim queries.
 */
export async function deleteSucceededJobsBefore(
  database: Queryable,
  input: { before: Date; limit: number },
): Promise<number> {
  const result = await database.query<{ job_id: string }>(
    `DELETE FROM jobs
      WHERE job_id IN (SELECT job_id FROM jobs
                        WHERE status = 'succeeded' AND updated_at < $1::timestamptz
                        LIMIT $2)
     RETURNING job_id`,
    [input.before, input.limit],
  );
  return result.rows.length;
}

export async function findJobById(database: Queryable, job_id: string): Promise<JobRow | null> {
  const result = await database.query<JobRow>(
    `SELECT job_id, white_label_id, task, payload, job_key, status, run_at, attempts, max_attempts,
            locked_by, locked_until, last_error, test_clock_id, created_at, updated_at
       FROM jobs
      WHERE job_id = $1`,
    [job_id],
  );
  return result.rows[0] ?? null;
}

/**
 * Jobs due and not yet claimed, oldest first, counted up to `limit`: the job worker's backlog for the operations
 * gauges. Jobs of test clocks run when their clock is advanced, never by the clock on the wall, so they are not a
 * backlog. One scan of jobs_runnable_real_in_order in claim order.
 */
export async function readDueJobBacklog(database: Queryable, now: Date, limit: number): Promise<Backlog> {
  const { rows } = await database.query<{ count: number; oldest_at: Date | null }>(
    `SELECT count(*)::int AS count, min(run_at) AS oldest_at
       FROM (SELECT run_at FROM jobs
              WHERE status = 'pending' AND test_clock_id IS NULL AND run_at <= $1::timestamptz
              ORDER BY run_at, job_id LIMIT $2) due`,
    [now, limit],
  );
  return backlogOf(rows[0]);
}
