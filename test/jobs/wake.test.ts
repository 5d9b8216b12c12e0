import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInTestClock, SystemClock, TestClock } from '../../src/platform/clock.ts';
import { createLogger } from '../../src/platform/logger.ts';
import type { Database } from '../../src/platform/db.ts';
import { LISTENER_APPLICATION_NAME } from '../../src/platform/notifications.ts';
import { enqueueJob, getJob, listenForDueJobs, JOBS_DUE_CHANNEL, Worker } from '../../src/jobs/index.ts';
import { claimDueJobs, markJobFailed } from '../../src/jobs/repository.ts';
import { dueInstantOf } from '../../src/jobs/wake.ts';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { waitFor } from '../support/service-process.ts';

/**
 * Waking the worker when a job falls due, instead of at its next poll (issue 33, item 4). Every worker here
 * polls once a minute, the longest interval allowed, so a job that runs within seconds ran because something
 * woke the worker: the claim's answer of the next run_at (both engines), or a notification on `jobs_due`
 * from another pool playing another process (PostgreSQL).
 */

const MINUTE_MS = 60_000;
const silent = createLogger('silent');

function recordingWorker(database: Database, ran: { task: string; at_ms: number }[], tasks: readonly string[]): Worker {
  const handlers = Object.fromEntries(tasks.map((task) => [task, async () => void ran.push({ task, at_ms: Date.now() })]));
  return new Worker({ database, clock: new SystemClock(), logger: silent, handlers, poll_interval_ms: MINUTE_MS });
}

let testDatabase: TestDatabase;
/** On PostgreSQL, a second pool on the same database: the worker's process, beside the producer's. */
let consumer: Database;
beforeAll(async () => {
  testDatabase = await createTestDatabase();
  if (usingPostgres) consumer = await testDatabase.openAnother();
});
afterAll(async () => {
  await testDatabase.close();
});

describe('the claim answers when the next job falls due', () => {
  it('names the earliest pending job after the ones it claims', async () => {
    const { database } = testDatabase;
    const now = new Date('2026-09-01T00:00:00.000Z');
    const clock = new TestClock(now.toISOString());
    await database.transaction(async (tx) => {
      await enqueueJob(tx, clock, { task: 'claim.due', payload: {} });
      await enqueueJob(tx, clock, { task: 'claim.later', payload: {}, run_at: new Date(now.getTime() + 90_000) });
      await enqueueJob(tx, clock, { task: 'claim.latest', payload: {}, run_at: new Date(now.getTime() + 600_000) });
    });
    const first = await claimDueJobs(database, { now, limit: 4, worker_id: 'w-claim', lease_ms: 3_600_000 });
    expect(first.claimed.map((job) => job.task)).toEqual(['claim.due']);
    expect(first.next_run_at?.toISOString()).toBe('2026-09-01T00:01:30.000Z');
    const later = await claimDueJobs(database, { now: new Date(now.getTime() + 90_000), limit: 4, worker_id: 'w-claim', lease_ms: 3_600_000 });
    expect(later.claimed.map((job) => job.task)).toEqual(['claim.later']);
    expect(later.next_run_at?.toISOString()).toBe('2026-09-01T00:10:00.000Z');
    const last = await claimDueJobs(database, { now: new Date(now.getTime() + 600_000), limit: 4, worker_id: 'w-claim', lease_ms: 3_600_000 });
    expect(last.claimed.map((job) => job.task)).toEqual(['claim.latest']);
    expect(last.next_run_at).toBeNull();
  });

  it('wakes a worker that polls once a minute when a job it learned of at its last poll falls due', async () => {
    const { database } = testDatabase;
    // Written "two minutes ago" for a run_at 1.5 s from now: too far ahead to notify, so only the claim can tell.
    const written = new TestClock(new Date(Date.now() - 2 * MINUTE_MS).toISOString());
    const run_at = new Date(Date.now() + 1_500);
    await database.transaction((tx) => enqueueJob(tx, written, { task: 'falls.due', payload: {}, run_at }));
    const ran: { task: string; at_ms: number }[] = [];
    const worker = recordingWorker(database, ran, ['falls.due']);
    worker.start();
    try {
      await waitFor(() => (ran.length > 0 ? true : null), 30_000, 'the job to run when it falls due');
      expect(ran[0]!.at_ms).toBeGreaterThanOrEqual(run_at.getTime());
    } finally {
      await worker.stop();
    }
  });

});

describe('a test clock that stands still', () => {
  it('under a test clock that stands still, a job just ahead of it does not make the worker poll without end', async () => {
    const { database } = testDatabase;
    const clock = new TestClock('2026-08-01T00:00:00.000Z');
    await database.transaction((tx) => enqueueJob(tx, clock, { task: 'frozen.ahead', payload: {}, run_at: new Date(clock.now().getTime() + 5) }));
    let claims = 0;
    const counting: Database = {
      ...database,
      engine: database.engine,
      query: (sql, params) => {
        if (sql.includes('claimed AS')) claims += 1;
        return database.query(sql, params);
      },
      exec: (sql) => database.exec(sql),
      transaction: (work) => database.transaction(work),
      close: async () => undefined,
    };
    const worker = new Worker({ database: counting, clock, logger: silent, handlers: {}, poll_interval_ms: MINUTE_MS });
    worker.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      // The first poll, and one timed wake for the job ahead; the clock never reaches it, so nothing more.
      expect(claims).toBeLessThanOrEqual(2);
    } finally {
      await worker.stop();
    }
  });
});

describe('notification payloads', () => {
  it('reads a run_at in milliseconds, and nothing else', () => {
    expect(dueInstantOf('1788220800000')?.toISOString()).toBe('2026-09-01T00:00:00.000Z');
    expect(dueInstantOf('')).toBeNull();
    expect(dueInstantOf('soon')).toBeNull();
    expect(dueInstantOf('1e12')).toBeNull();
  });
});

async function listenedPayloads(work: () => Promise<void>): Promise<string[]> {
  const client = new pg.Client({ connectionString: testDatabase.url! });
  await client.connect();
  const payloads: string[] = [];
  client.on('notification', (message) => payloads.push(message.payload ?? ''));
  try {
    await client.query(`LISTEN ${JOBS_DUE_CHANNEL}`);
    await work();
    // A notification is delivered after its commit; a round trip on the listening session lets it arrive.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await client.query('SELECT 1');
  } finally {
    await client.end();
  }
  return payloads;
}

describe.skipIf(!usingPostgres)('the trigger on jobs', () => {
  it('a job due within a minute notifies with its run_at on commit; a later one, a test clock\'s and a rolled-back one do not; a retry does', async () => {
    // Before every other job of this file's database, so that the claim below takes one of this test's.
    const clock = new TestClock('2026-07-01T00:00:00.000Z');
    const now = clock.now().getTime();
    const payloads = await listenedPayloads(async () => {
      await testDatabase.database.transaction(async (tx) => {
        await enqueueJob(tx, clock, { task: 'notify.now', payload: {} });
        await enqueueJob(tx, clock, { task: 'notify.now', payload: { second: true } });
        await enqueueJob(tx, clock, { task: 'notify.soon', payload: {}, run_at: new Date(now + 30_000) });
        await enqueueJob(tx, clock, { task: 'notify.far', payload: {}, run_at: new Date(now + 2 * MINUTE_MS) });
        const scope = { test_clock_id: 'clock_wake', white_label_id: 'brand_wake', merchant_id: 'merchant_wake', now: clock.now() };
        await runInTestClock(scope, () => enqueueJob(tx, clock, { task: 'notify.test_clock', payload: {}, run_at: new Date(now + 5) }));
      });
      await expect(
        testDatabase.database.transaction(async (tx) => {
          await enqueueJob(tx, clock, { task: 'notify.rolled_back', payload: {}, run_at: new Date(now + 1) });
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      const claimed = await claimDueJobs(testDatabase.database, { now: clock.now(), limit: 1, worker_id: 'w-retry', lease_ms: 15_000 });
      const job = claimed.claimed[0]!;
      await markJobFailed(testDatabase.database, { job_id: job.job_id, worker_id: 'w-retry', attempt: job.attempts }, {
        now: clock.now(), retry_from: clock.now(), last_error: 'try again', permanent: false, base_backoff_ms: 1_000, max_backoff_ms: 3_600_000,
      });
    });
    // Two jobs due now fold into one notification; the retry is due a second after its failure.
    expect(payloads).toEqual([String(now), String(now + 30_000), String(now + 1_000)]);
  });

});

describe.skipIf(!usingPostgres)('a worker listening in another process', () => {
  it('a job committed by another process runs at once, and one due in a second runs when it falls due', async () => {
    const ran: { task: string; at_ms: number }[] = [];
    const worker = recordingWorker(consumer, ran, ['notified.now', 'notified.soon']);
    const listener = listenForDueJobs(worker, { connection_string: testDatabase.url!, logger: silent });
    worker.start();
    listener.start();
    try {
      await waitFor(() => (listener.listening ? true : null), 10_000, 'the listener to listen');
      const committed_ms = Date.now();
      const run_at = new Date(committed_ms + 1_000);
      await testDatabase.database.transaction(async (tx) => {
        await enqueueJob(tx, new SystemClock(), { task: 'notified.now', payload: {} });
        await enqueueJob(tx, new SystemClock(), { task: 'notified.soon', payload: {}, run_at });
      });
      await waitFor(() => (ran.length === 2 ? true : null), 30_000, 'both jobs to run');
      expect(ran.map((entry) => entry.task)).toEqual(['notified.now', 'notified.soon']);
      expect(ran[1]!.at_ms).toBeGreaterThanOrEqual(run_at.getTime());
    } finally {
      await listener.stop();
      await worker.stop();
    }
  });

  it('reconnects after its session is terminated, and polls once on reconnecting for what it missed meanwhile', async () => {
    const ran: { task: string; at_ms: number }[] = [];
    const worker = recordingWorker(consumer, ran, ['missed.while.away']);
    // A second's backoff leaves time to commit a job while nobody listens.
    const listener = listenForDueJobs(worker, { connection_string: testDatabase.url!, logger: silent, minimum_backoff_ms: 1_000 });
    worker.start();
    listener.start();
    try {
      await waitFor(() => (listener.listening ? true : null), 10_000, 'the listener to listen');
      const terminated = await testDatabase.database.query<{ done: boolean }>(
        `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
        [LISTENER_APPLICATION_NAME],
      );
      expect(terminated.rows.map((row) => row.done)).toEqual([true]);
      await waitFor(() => (listener.listening ? null : true), 10_000, 'the listener to notice');
      const job_id = await testDatabase.database.transaction((tx) => enqueueJob(tx, new SystemClock(), { task: 'missed.while.away', payload: {} }));
      await waitFor(() => (ran.length === 1 ? true : null), 30_000, 'the missed job to run');
      expect(listener.listens).toBe(2);
      await waitFor(async () => ((await getJob(testDatabase.database, job_id!))?.status === 'succeeded' ? true : null), 10_000, 'the success to be recorded');
    } finally {
      await listener.stop();
      await worker.stop();
    }
  });
});
