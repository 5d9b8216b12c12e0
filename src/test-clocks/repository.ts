import type { Queryable } from '../platform/db.ts';
import type { ReadPart } from '../platform/read-part.ts';

/**
 * All SQL of the test clocks module (table `test_clocks`, migrations/0017_test_clocks.sql). Every
 * instant is a parameter; the clock's own columns (created_at, updated_at, the advance's finishing time)
 * are real time, and `frozen_time` is the clock's time.
 */

export type TestClockStatus = 'ready' | 'advancing';
export type AdvanceOutcome = 'completed' | 'job_limit_reached';

export interface TestClockRow {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  test_clock_id: string;
  name: string | null;
  frozen_time: Date;
  status: TestClockStatus;
  attached: boolean;
  version: number;
  advance_target: Date | null;
  advance_reached_time: Date | null;
  advance_job_runs: number;
  advance_slice: number;
  last_advance_requested_time: Date | null;
  last_advance_outcome: AdvanceOutcome | null;
  last_advance_job_runs: number | null;
  last_advance_finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `white_label_id, merchant_id, livemode, test_clock_id, name, frozen_time, status, attached, version,
  advance_target, advance_reached_time, advance_job_runs, advance_slice, last_advance_requested_time, last_advance_outcome,
  last_advance_job_runs, last_advance_finished_at, created_at, updated_at`;

export async function insertTestClock(tx: Queryable, row: TestClockRow): Promise<void> {
  await tx.query(
    `INSERT INTO test_clocks (${COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
    [
      row.white_label_id, row.merchant_id, row.livemode, row.test_clock_id, row.name, row.frozen_time, row.status, row.attached, row.version,
      row.advance_target, row.advance_reached_time, row.advance_job_runs, row.advance_slice, row.last_advance_requested_time,
      row.last_advance_outcome, row.last_advance_job_runs, row.last_advance_finished_at, row.created_at, row.updated_at,
    ],
  );
}

/**
 * Where a lookup may find a clock: always one brand; one merchant's sandbox for a merchant's request,
 * any merchant of the brand (null) for the back office.
 */
export interface ClockScopeFilter {
  white_label_id: string;
  merchant_id: string | null;
}

/** One clock inside the filter; `lock` takes its row lock (FOR UPDATE) for a change. */
export async function findTestClock(db: Queryable, filter: ClockScopeFilter, test_clock_id: string, lock = false): Promise<TestClockRow | null> {
  const { rows } = await db.query<TestClockRow>(
    `SELECT ${COLUMNS} FROM test_clocks
      WHERE white_label_id = $1 AND test_clock_id = $2 AND livemode = false AND ($3::text IS NULL OR merchant_id = $3)
      ${lock ? 'FOR UPDATE' : ''}`,
    [filter.white_label_id, test_clock_id, filter.merchant_id],
  );
  return rows[0] ?? null;
}

export interface ClockListFilter extends ClockScopeFilter {
  /** Exclusive: clocks with a greater id (ids are ULIDs, so this is creation order). */
  starting_after: string | null;
  limit: number;
}

export async function listTestClocks(db: Queryable, filter: ClockListFilter): Promise<TestClockRow[]> {
  const { rows } = await db.query<TestClockRow>(
    `SELECT ${COLUMNS} FROM test_clocks
      WHERE white_label_id = $1 AND livemode = false AND ($2::text IS NULL OR merchant_id = $2)
        AND ($3::text IS NULL OR test_clock_id > $3)
      ORDER BY test_clock_id
      LIMIT $4`,
    [filter.white_label_id, filter.merchant_id, filter.starting_after, filter.limit],
  );
  return rows;
}

/** What a request of the merchant's sandbox needs of its attached clock (served by the partial unique index). */
export interface AttachedClock {
  test_clock_id: string;
  frozen_time: Date;
  status: TestClockStatus;
}

export async function findAttachedTestClock(db: Queryable, white_label_id: string, merchant_id: string): Promise<AttachedClock | null> {
  const { rows } = await db.query<AttachedClock>(
    `SELECT test_clock_id, frozen_time, status FROM test_clocks
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = false AND attached`,
    [white_label_id, merchant_id],
  );
  return rows[0] ?? null;
}

/**
 * `findAttachedTestClock` as a read another statement carries (src/platform/read-part.ts): the request
 * admission reads it in its own round trip.
 */
export function attachedTestClockPart(white_label_id: string, merchant_id: string): ReadPart<AttachedClock | null> {
  return {
    sql: `(SELECT json_build_object('test_clock_id', test_clock_id, 'frozen_time', frozen_time, 'status', status) FROM test_clocks
            WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = false AND attached)`,
    params: [white_label_id, merchant_id],
    parse(value) {
      if (value === null) return null;
      const clock = value as { test_clock_id: string; frozen_time: string; status: TestClockStatus };
      return { test_clock_id: clock.test_clock_id, frozen_time: new Date(clock.frozen_time), status: clock.status };
    },
  };
}

/**
 * Serialises attach and detach of one merchant's sandbox until the transaction ends, so that two
 * attaches of different clocks at once cannot both find none attached (the unique index would refuse
 * the second with an error instead of the answer `test_clock_already_attached`).
 */
export async function lockSandboxAttachment(tx: Queryable, white_label_id: string, merchant_id: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`test_clocks:attach:${white_label_id}:${merchant_id}`]);
}

/**
 * Writes every mutable column of a clock whose stored version is `expected_version` (the caller holds
 * the row lock, so a mismatch is a bug, reported as false).
 */
export async function updateTestClock(tx: Queryable, row: TestClockRow, expected_version: number): Promise<boolean> {
  const result = await tx.query(
    `UPDATE test_clocks
        SET frozen_time = $3, status = $4, attached = $5, version = $6, advance_target = $7, advance_reached_time = $8,
            advance_job_runs = $9, advance_slice = $10, last_advance_requested_time = $11, last_advance_outcome = $12,
            last_advance_job_runs = $13, last_advance_finished_at = $14, updated_at = $15
      WHERE white_label_id = $1 AND test_clock_id = $2 AND version = $16`,
    [
      row.white_label_id, row.test_clock_id, row.frozen_time, row.status, row.attached, row.version, row.advance_target,
      row.advance_reached_time, row.advance_job_runs, row.advance_slice, row.last_advance_requested_time, row.last_advance_outcome,
      row.last_advance_job_runs, row.last_advance_finished_at, row.updated_at, expected_version,
    ],
  );
  return result.rowCount === 1;
}
