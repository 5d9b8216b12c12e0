import { describe, it, expect, beforeAll, afterAll, beforeEach } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { TestClock } from '../../src/platform/clock.ts';
import { Rollback, type Database } from '../../src/platform/db.ts';
import { createLogger, type Logger } from '../../src/platform/logger.ts';
import { createMetrics, type Metrics } from '../../src/ops/metrics.ts';
import { InvariantViolation } from '../../src/platform/assert.ts';
import {
  Worker,
  cancelJobsByKey,
  enqueueJob,
  getJob,
  purgeFinishedJobs,
  type ClaimedJob,
  type JobHandler,
  type JobSpec,
  type WorkerOptions,
} from '../../src/jobs/index.ts';
import { completeAndClaimDueJobs } from '../../src/jobs/repository.ts';

let testDatabase: TestDatabase;
let database: Database;

beforeAll(async () => {
  testDatabase = await createTestDatabase();
  database = testDatabase.database;
});

afterAll(async () => {
  await testDatabase.close();
});

beforeEach(async () => {
  // One database serves the whole file, so every test starts from an empty queue.
  await database.query('DELETE FROM jobs');
});

interface CapturedLogger {
  logger: Logger;
  lines: string[];
}

function captureLogger(): CapturedLogger {
  const lines: string[] = [];
  return { logger: createLogger('debug', { write: (line: string) => void lines.push(line) }), lines };
}

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

function deferred(): Deferred {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

/** Polls a condition with real time, a bounded number of times, because the worker loop runs on timers. */
async function waitFor(condition: () => Promise<boolean> | boolean, timeout_ms = 5_000): Promise<void> {
  const step_ms = 10;
  for (let waited_ms = 0; waited_ms <= timeout_ms; waited_ms += step_ms) {
    if (await condition()) return;
    await sleep(step_ms);
  }
  throw new Error('condition not met in time');
}

async function enqueue(clock: TestClock, spec: JobSpec): Promise<string | null> {
  return database.transaction((tx) => enqueueJob(tx, clock, spec));
}

async function enqueueOrFail(clock: TestClock, spec: JobSpec): Promise<string> {
  const job_id = await enqueue(clock, spec);
  if (job_id === null) throw new Error('expected a new job');
  return job_id;
}

async function job(job_id: string) {
  const row = await getJob(database, job_id);
  if (row === null) throw new Error(`job ${job_id} not found`);
  return row;
}

async function countJobs(): Promise<number> {
  const result = await database.query<{ count: number }>('SELECT count(*)::integer AS count FROM jobs');
  return result.rows[0]?.count ?? 0;
}

async function counterValue(metrics: Metrics, task: string, outcome: string): Promise<number> {
  const metric = await metrics.jobs_total.get();
  return metric.values.find((value) => value.labels.task === task && value.labels.outcome === outcome)?.value ?? 0;
}

function newWorker(
  clock: TestClock,
  handlers: Record<string, JobHandler>,
  options: Partial<Omit<WorkerOptions, 'clock' | 'handlers'>> = {},
): Worker {
  return new Worker({ database, logger: createLogger('silent'), ...options, clock, handlers });
}

/** Rows that the plan's scans of `relation` returned or filtered out (EXPLAIN ANALYZE, JSON format). */
function scannedRows(plan: unknown, relation: string): number {
  let total = 0;
  const visit = (node: unknown, depth: number): void => {
    if (depth > 100 || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const child of node) visit(child, depth + 1);
      return;
    }
    const fields = node as Record<string, unknown>;
    if (fields['Relation Name'] === relation) {
      for (const key of ['Actual Rows', 'Rows Removed by Filter', 'Rows Removed by Index Recheck']) {
        const value = fields[key];
        if (typeof value === 'number') total += value * (typeof fields['Actual Loops'] === 'number' ? fields['Actual Loops'] : 1);
      }
    }
    for (const value of Object.values(fields)) visit(value, depth + 1);
  };
  visit(typeof plan === 'string' ? JSON.parse(plan) : plan, 0);
  return total;
}

describe('enqueueJob', () => {
  it('creates the job only when the surrounding transaction commits', async () => {
    const clock = new TestClock();
    await expect(
      database.transaction(async (tx) => {
        const job_id = await enqueueJob(tx, clock, { task: 'send_webhook', payload: { n: 1 } });
        expect(job_id).toMatch(/^job_/);
        throw new Rollback(null);
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(await countJobs()).toBe(0);

    const job_id = await enqueueOrFail(clock, { task: 'send_webhook', payload: { n: 2 }, white_label_id: 'wl_A' });
    const row = await job(job_id);
    expect(row).toMatchObject({
      status: 'pending',
      task: 'send_webhook',
      payload: { n: 2 },
      attempts: 0,
      max_attempts: 10,
      white_label_id: 'wl_A',
      job_key: null,
      locked_by: null,
      locked_until: null,
    });
    expect(row.run_at.getTime()).toBe(clock.now().getTime());
  });

  it('refuses max_attempts outside 1..100 and an empty task', async () => {
    const clock = new TestClock();
    await expect(enqueue(clock, { task: 'x', payload: {}, max_attempts: 101 })).rejects.toBeInstanceOf(InvariantViolation);
    await expect(enqueue(clock, { task: 'x', payload: {}, max_attempts: 0 })).rejects.toBeInstanceOf(InvariantViolation);
    await expect(enqueue(clock, { task: '', payload: {} })).rejects.toBeInstanceOf(InvariantViolation);
    expect(await countJobs()).toBe(0);
  });

  it('dedupes by job_key while a job with the key is pending or running, and allows it again afterwards', async () => {
    const clock = new TestClock();
    const first = await enqueueOrFail(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_1' });
    expect(await enqueue(clock, { task: 'expire_deposit', payload: { other: true }, job_key: 'deadline:dep_1' })).toBeNull();
    expect(await enqueue(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_2' })).toMatch(/^job_/);
    expect(await countJobs()).toBe(2);

    // While the keyed job runs, a second enqueue with the key is still a no-op.
    let duplicate_while_running: string | null | undefined;
    const worker = newWorker(clock, {
      expire_deposit: async (claimed) => {
        if (claimed.job_id !== first) return;
        duplicate_while_running = await enqueue(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_1' });
      },
    });
    expect(await worker.runDueJobs()).toBe(2);
    expect(duplicate_while_running).toBeNull();
    expect((await job(first)).status).toBe('succeeded');

    // Once the keyed job has finished, the key is free again.
    expect(await enqueue(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_1' })).toMatch(/^job_/);
  });

  it('cancelJobsByKey deletes the pending job with the key and nothing else', async () => {
    const clock = new TestClock();
    await enqueueOrFail(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_9', run_at: new Date(clock.now().getTime() + 60_000) });
    const other = await enqueueOrFail(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_10' });
    expect(await database.transaction((tx) => cancelJobsByKey(tx, 'deadline:dep_9'))).toBe(1);
    expect(await database.transaction((tx) => cancelJobsByKey(tx, 'deadline:dep_9'))).toBe(0);
    expect(await countJobs()).toBe(1);
    expect((await job(other)).status).toBe('pending');

    // A cancellation inside a transaction that rolls back keeps the job.
    await expect(
      database.transaction(async (tx) => {
        expect(await cancelJobsByKey(tx, 'deadline:dep_10')).toBe(1);
        throw new Rollback(null);
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(await countJobs()).toBe(1);

    // The key is free after cancellation.
    expect(await enqueue(clock, { task: 'expire_deposit', payload: {}, job_key: 'deadline:dep_9' })).toMatch(/^job_/);
  });
});

describe('Worker', () => {
  it('runs a job with the claimed fields and marks it succeeded', async () => {
    const clock = new TestClock();
    const metrics = createMetrics();
    const seen: ClaimedJob[] = [];
    const job_id = await enqueueOrFail(clock, { task: 'greet', payload: { name: 'a' }, white_label_id: 'wl_B', max_attempts: 3 });
    const worker = newWorker(clock, { greet: async (claimed) => void seen.push(claimed) }, { metrics, worker_id: 'worker-one' });
    expect(await worker.runDueJobs()).toBe(1);
    expect(seen).toEqual([{ job_id, task: 'greet', payload: { name: 'a' }, attempt: 1, max_attempts: 3, white_label_id: 'wl_B' }]);
    const row = await job(job_id);
    expect(row).toMatchObject({ status: 'succeeded', attempts: 1, locked_until: null, locked_by: 'worker-one', last_error: null });
    expect(await counterValue(metrics, 'greet', 'succeeded')).toBe(1);
    expect((await metrics.job_duration_seconds.get()).values.find((value) => value.metricName === 'job_duration_seconds_count')?.value).toBe(1);
    expect(await worker.runDueJobs()).toBe(0);
  });

  it('does not run a job before its run_at', async () => {
    const clock = new TestClock();
    const runs: string[] = [];
    const job_id = await enqueueOrFail(clock, { task: 'later', payload: {}, run_at: new Date(clock.now().getTime() + 5 * 60_000) });
    const worker = newWorker(clock, { later: async (claimed) => void runs.push(claimed.job_id) });
    expect(await worker.runDueJobs()).toBe(0);
    clock.advance(5 * 60_000 - 1);
    expect(await worker.runDueJobs()).toBe(0);
    expect((await job(job_id)).status).toBe('pending');
    clock.advance(1);
    expect(await worker.runDueJobs()).toBe(1);
    expect(runs).toEqual([job_id]);
  });

  it('retries with backoff of 1 s, 2 s, 4 s computed in SQL, then fails after max_attempts without logging the payload', async () => {
    const clock = new TestClock();
    const metrics = createMetrics();
    const { logger, lines } = captureLogger();
    const attempts_seen: number[] = [];
    const job_id = await enqueueOrFail(clock, {
      task: 'flaky',
      payload: { secret_note: 'payload-must-not-be-logged' },
      max_attempts: 4,
    });
    const worker = newWorker(
      clock,
      {
        flaky: async (claimed) => {
          attempts_seen.push(claimed.attempt);
          throw new Error(`bank timeout on attempt ${claimed.attempt}`);
        },
      },
      { logger, metrics },
    );

    for (const expected_delay_ms of [1_000, 2_000, 4_000]) {
      const failed_at = clock.now().getTime();
      expect(await worker.runDueJobs()).toBe(1);
      const row = await job(job_id);
      expect(row.status).toBe('pending');
      expect(row.locked_until).toBeNull();
      expect(row.locked_by).toBeNull();
      expect(row.run_at.getTime() - failed_at).toBe(expected_delay_ms);
      expect(row.last_error).toBe(`Error: bank timeout on attempt ${attempts_seen.length}`);
      // Not due again until the backoff has passed.
      clock.advance(expected_delay_ms - 1);
      expect(await worker.runDueJobs()).toBe(0);
      clock.advance(1);
    }
    expect(await worker.runDueJobs()).toBe(1);
    const row = await job(job_id);
    expect(row).toMatchObject({ status: 'failed', attempts: 4, locked_until: null, last_error: 'Error: bank timeout on attempt 4' });
    expect(attempts_seen).toEqual([1, 2, 3, 4]);
    clock.advance(24 * 3_600_000);
    expect(await worker.runDueJobs()).toBe(0);

    expect(await counterValue(metrics, 'flaky', 'retried')).toBe(3);
    expect(await counterValue(metrics, 'flaky', 'failed')).toBe(1);
    const log = lines.join('');
    expect(log).toContain(job_id);
    expect(log).toContain('"task":"flaky"');
    expect(log).not.toContain('payload-must-not-be-logged');
  });

  it('caps the backoff at max_backoff_ms and truncates last_error to 500 characters', async () => {
    const clock = new TestClock();
    const job_id = await enqueueOrFail(clock, { task: 'flaky', payload: {}, max_attempts: 5 });
    const worker = newWorker(clock, { flaky: async () => { throw new Error('x'.repeat(2_000)); } }, { max_backoff_ms: 1_500 });
    const delays_ms: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const failed_at = clock.now().getTime();
      expect(await worker.runDueJobs()).toBe(1);
      const row = await job(job_id);
      delays_ms.push(row.run_at.getTime() - failed_at);
      expect(row.last_error).toHaveLength(500);
      clock.set(row.run_at);
    }
    expect(delays_ms).toEqual([1_000, 1_500, 1_500]);
  });

  it('fails a job of an unknown task permanently with a clear last_error', async () => {
    const clock = new TestClock();
    const metrics = createMetrics();
    const unknown = await enqueueOrFail(clock, { task: 'no_such_task', payload: {}, max_attempts: 10 });
    const inherited = await enqueueOrFail(clock, { task: 'toString', payload: {} });
    const worker = newWorker(clock, { known: async () => {} }, { metrics });
    expect(await worker.runDueJobs()).toBe(2);
    expect(await job(unknown)).toMatchObject({ status: 'failed', attempts: 1, last_error: 'no handler is registered for task "no_such_task"' });
    expect(await job(inherited)).toMatchObject({ status: 'failed', last_error: 'no handler is registered for task "toString"' });
    expect(await counterValue(metrics, 'no_such_task', 'failed')).toBe(1);
  });

  it('lets another worker take over an expired lease and ignores the stale worker completing late', async () => {
    const clock = new TestClock();
    const stale_entered = deferred();
    const stale_release = deferred();
    const runs: Array<{ worker: string; attempt: number }> = [];
    const job_id = await enqueueOrFail(clock, { task: 'slow', payload: {}, max_attempts: 5 });
    const stale = newWorker(
      clock,
      {
        slow: async (claimed) => {
          runs.push({ worker: 'stale', attempt: claimed.attempt });
          stale_entered.resolve();
          await stale_release.promise;
          throw new Error('the stale worker finally gave up');
        },
      },
      { worker_id: 'stale-worker', lease_ms: 10_000, heartbeat_interval_ms: 0 },
    );
    const fresh = newWorker(
      clock,
      { slow: async (claimed) => void runs.push({ worker: 'fresh', attempt: claimed.attempt }) },
      { worker_id: 'fresh-worker', lease_ms: 10_000 },
    );

    const stale_run = stale.runDueJobs();
    await stale_entered.promise;
    expect(await job(job_id)).toMatchObject({ status: 'running', locked_by: 'stale-worker', attempts: 1 });

    // The lease is still valid one millisecond before it ends, so nobody else may take the job.
    clock.advance(9_999);
    expect(await fresh.runDueJobs()).toBe(0);
    clock.advance(1);
    expect(await fresh.runDueJobs()).toBe(1);
    expect(await job(job_id)).toMatchObject({ status: 'succeeded', locked_by: 'fresh-worker', attempts: 2 });

    // The stale worker's failure arrives late and must not turn the job back into pending.
    stale_release.resolve();
    expect(await stale_run).toBe(1);
    expect(await job(job_id)).toMatchObject({ status: 'succeeded', locked_by: 'fresh-worker', attempts: 2, last_error: null });
    expect(runs).toEqual([
      { worker: 'stale', attempt: 1 },
      { worker: 'fresh', attempt: 2 },
    ]);
  });

  it('a live worker renews its lease while its handler runs; a stalled handler stops being renewed and is taken over', async () => {
    // A clock that moves in real time, as in production: the heartbeat is real time, the lease is service time.
    const clock = new TestClock();
    const ticking = setInterval(() => clock.advance(10), 10);
    try {
      const release = deferred();
      const entered = deferred();
      const job_id = await enqueueOrFail(clock, { task: 'long', payload: {} });
      const owner = newWorker(
        clock,
        {
          long: async () => {
            entered.resolve();
            await release.promise;
          },
        },
        { worker_id: 'live-owner', lease_ms: 300, heartbeat_interval_ms: 50, max_renewed_run_ms: 60_000 },
      );
      const other = newWorker(clock, { long: async () => {} }, { worker_id: 'other' });
      const running = owner.runDueJobs();
      await entered.promise;
      // Four leases long: without the heartbeat the other worker would have taken the job over.
      await sleep(1_200);
      expect(await other.runDueJobs()).toBe(0);
      expect(await job(job_id)).toMatchObject({ status: 'running', locked_by: 'live-owner', attempts: 1 });
      release.resolve();
      await running;
      expect(await job(job_id)).toMatchObject({ status: 'succeeded', attempts: 1 });

      // A handler past max_renewed_run_ms is stalled: its lease runs out and another worker takes over.
      const stalled_release = deferred();
      const stalled_entered = deferred();
      const stalled_id = await enqueueOrFail(clock, { task: 'stuck', payload: {} });
      const stuck = newWorker(
        clock,
        {
          stuck: async () => {
            stalled_entered.resolve();
            await stalled_release.promise;
          },
        },
        { worker_id: 'stuck-owner', lease_ms: 300, heartbeat_interval_ms: 50, max_renewed_run_ms: 400 },
      );
      const stuck_run = stuck.runDueJobs();
      await stalled_entered.promise;
      await sleep(1_200);
      const rescuer = newWorker(clock, { stuck: async () => {} }, { worker_id: 'rescuer' });
      expect(await rescuer.runDueJobs()).toBe(1);
      expect(await job(stalled_id)).toMatchObject({ status: 'succeeded', locked_by: 'rescuer', attempts: 2 });
      stalled_release.resolve();
      await stuck_run;
    } finally {
      clearInterval(ticking);
    }
  });

  it('fences a stale success by attempt even when the same worker id took the job over', async () => {
    const clock = new TestClock();
    const first_entered = deferred();
    const first_release = deferred();
    let calls = 0;
    const job_id = await enqueueOrFail(clock, { task: 'slow', payload: {} });
    const worker = newWorker(
      clock,
      {
        slow: async () => {
          calls += 1;
          if (calls === 1) {
            first_entered.resolve();
            await first_release.promise;
            return;
          }
          throw new Error('second attempt fails');
        },
      },
      { worker_id: 'same-worker', lease_ms: 1_000, heartbeat_interval_ms: 0 },
    );
    const first_run = worker.runDueJobs();
    await first_entered.promise;
    clock.advance(1_000);
    expect(await worker.runDueJobs()).toBe(1);
    expect(await job(job_id)).toMatchObject({ status: 'pending', attempts: 2 });
    first_release.resolve();
    await first_run;
    // The first claim's success is discarded: the row still reflects the second attempt's failure.
    expect(await job(job_id)).toMatchObject({ status: 'pending', attempts: 2, last_error: 'Error: second attempt fails' });
  });

  it('fails a job whose lease expired during the final attempt instead of running it again', async () => {
    const clock = new TestClock();
    const entered = deferred();
    const release = deferred();
    let calls = 0;
    const job_id = await enqueueOrFail(clock, { task: 'crashy', payload: {}, max_attempts: 1 });
    const crashed = newWorker(
      clock,
      {
        crashy: async () => {
          calls += 1;
          entered.resolve();
          await release.promise;
        },
      },
      { worker_id: 'crashed', lease_ms: 1_000, heartbeat_interval_ms: 0 },
    );
    const crashed_run = crashed.runDueJobs();
    await entered.promise;
    clock.advance(1_000);
    const survivor = newWorker(clock, { crashy: async () => void (calls += 1) }, { worker_id: 'survivor' });
    expect(await survivor.runDueJobs()).toBe(1);
    expect(await job(job_id)).toMatchObject({ status: 'failed', attempts: 2 });
    expect((await job(job_id)).last_error).toContain('lease expired during the final attempt');
    release.resolve();
    await crashed_run;
    expect(calls).toBe(1);
    expect((await job(job_id)).status).toBe('failed');
  });

  it('stop() waits for a running handler to finish and record its outcome', async () => {
    const clock = new TestClock();
    const entered = deferred();
    const release = deferred();
    const job_id = await enqueueOrFail(clock, { task: 'slow', payload: {} });
    const worker = newWorker(
      clock,
      {
        slow: async (_claimed, context) => {
          entered.resolve();
          await release.promise;
          // The handler opens its own transaction; no worker transaction may be holding the database.
          await context.database.transaction((tx) => tx.query('SELECT 1'));
        },
      },
      { poll_interval_ms: 5 },
    );
    worker.start();
    await entered.promise;
    let stopped = false;
    const stopping = worker.stop().then(() => {
      stopped = true;
    });
    await sleep(100);
    expect(stopped).toBe(false);
    // Nothing new is claimed once stop() has been called.
    const later = await enqueueOrFail(clock, { task: 'slow', payload: {} });
    release.resolve();
    await stopping;
    expect(stopped).toBe(true);
    expect((await job(job_id)).status).toBe('succeeded');
    await sleep(50);
    expect((await job(later)).status).toBe('pending');
    expect(await worker.runDueJobs()).toBe(0);
  });

  it('start() polls in the background and wake() polls at once instead of waiting for the interval', async () => {
    const clock = new TestClock();
    const runs: string[] = [];
    const worker = newWorker(clock, { quick: async (claimed) => void runs.push(claimed.job_id) }, { poll_interval_ms: 60_000 });
    worker.start();
    try {
      await sleep(50);
      const job_ids: string[] = [];
      for (let index = 0; index < 10; index += 1) job_ids.push(await enqueueOrFail(clock, { task: 'quick', payload: { index } }));
      worker.wake();
      // Ten jobs at concurrency 4 need several claims; finishing handlers wake the loop for the rest.
      await waitFor(() => runs.length === 10, 5_000);
      expect([...runs].sort()).toEqual([...job_ids].sort());
    } finally {
      await worker.stop();
    }
  });

  it('with a backlog, a finishing job claims its successor in the statement that records its success, never above the concurrency', async () => {
    const clock = new TestClock();
    const job_ids: string[] = [];
    await database.transaction(async (tx) => {
      for (let index = 0; index < 40; index += 1) {
        const job_id = await enqueueJob(tx, clock, { task: 'backlog', payload: { index } });
        if (job_id !== null) job_ids.push(job_id);
      }
    });
    const runs: string[] = [];
    let running = 0;
    let most_running = 0;
    const worker = newWorker(
      clock,
      {
        backlog: async (claimed) => {
          running += 1;
          most_running = Math.max(most_running, running);
          await sleep(2);
          running -= 1;
          runs.push(claimed.job_id);
        },
      },
      { concurrency: 3, poll_interval_ms: 60_000 },
    );
    const statements: string[] = [];
    database.statement_observer = (sql) => void statements.push(sql);
    worker.start();
    try {
      await waitFor(async () => (await database.query<{ count: number }>(`SELECT count(*)::int AS count FROM jobs WHERE status = 'succeeded'`)).rows[0]?.count === 40, 10_000);
    } finally {
      await worker.stop();
      database.statement_observer = null;
    }
    expect([...runs].sort()).toEqual([...job_ids].sort());
    expect(most_running).toBeLessThanOrEqual(3);
    const completedAndClaimed = statements.filter((sql) => /WITH done AS/.test(sql)).length;
    const completedAlone = statements.filter((sql) => /^\s*UPDATE jobs\s+SET status = 'succeeded'/.test(sql)).length;
    const claimedAlone = statements.filter((sql) => /^\s*WITH pending AS/.test(sql)).length;
    // Each success is recorded once; most of them carried the next claim (one statement for two). Without
    // it the same run makes about 54 statements (40 successes, 14 claims), measured.
    expect(completedAndClaimed + completedAlone).toBe(40);
    expect(completedAndClaimed).toBeGreaterThanOrEqual(30);
    expect(completedAndClaimed + completedAlone + claimedAlone).toBeLessThanOrEqual(45);
  });

  it('a success recorded with the next claim is fenced by its lease, and the claim never takes the job it completes', async () => {
    const clock = new TestClock();
    const mine = await enqueueOrFail(clock, { task: 'fenced', payload: {} });
    // Claimed by worker-one, then its lease runs out and worker-two takes it over (attempt 2).
    await database.query(`UPDATE jobs SET status = 'running', locked_by = 'worker-one', attempts = 1, locked_until = $2 WHERE job_id = $1`, [mine, new Date(clock.now().getTime() - 1)]);
    const next = await enqueueOrFail(clock, { task: 'fenced', payload: { next: true } });
    // worker-one finishes late: its success is not recorded, and it may not take its own expired job over.
    const late = await completeAndClaimDueJobs(database, { job_id: mine, worker_id: 'worker-one', attempt: 1 }, { now: clock.now(), limit: 1, worker_id: 'worker-one', lease_ms: 60_000 });
    expect(late.claimed.map((job) => job.job_id)).toEqual([next]);
    expect(late.completed).toBe(true);
    // Now the lease really is lost: worker-two holds attempt 2; worker-one's record changes nothing.
    await database.query(`UPDATE jobs SET status = 'running', locked_by = 'worker-two', attempts = 2, locked_until = $2 WHERE job_id = $1`, [mine, new Date(clock.now().getTime() + 60_000)]);
    const lost = await completeAndClaimDueJobs(database, { job_id: mine, worker_id: 'worker-one', attempt: 1 }, { now: clock.now(), limit: 1, worker_id: 'worker-one', lease_ms: 60_000 });
    expect(lost).toEqual({ completed: false, claimed: [] });
    expect(await job(mine)).toMatchObject({ status: 'running', locked_by: 'worker-two', attempts: 2 });
  });

  it('runDueJobs also runs jobs that handlers enqueue as due, up to the limit', async () => {
    const clock = new TestClock();
    const runs: number[] = [];
    await enqueueOrFail(clock, { task: 'chain', payload: { step: 0 } });
    const worker = newWorker(clock, {
      chain: async (claimed, context) => {
        const step = claimed.payload.step as number;
        runs.push(step);
        await context.database.transaction((tx) => enqueueJob(tx, context.clock, { task: 'chain', payload: { step: step + 1 } }));
      },
    });
    expect(await worker.runDueJobs({ limit: 5 })).toBe(5);
    expect(runs).toEqual([0, 1, 2, 3, 4]);
  });

  it('a claim reads the jobs it claims, not the backlog behind them nor the finished and future jobs', async () => {
    const clock = new TestClock();
    // A backlog (due jobs waiting for a free slot), jobs due later (deposit expiries), finished jobs
    // (kept a day), and one running job whose worker died: the mix a busy service claims from.
    await database.transaction(async (tx) => {
      for (let index = 0; index < 300; index += 1) await enqueueJob(tx, clock, { task: 'due', payload: { index } });
      for (let index = 0; index < 300; index += 1) {
        await enqueueJob(tx, clock, { task: 'later', payload: { index }, run_at: new Date(clock.now().getTime() + 3_600_000) });
      }
      for (let index = 0; index < 300; index += 1) await enqueueJob(tx, clock, { task: 'done', payload: { index } });
    });
    await database.query(`UPDATE jobs SET status = 'succeeded' WHERE task = 'done'`);
    const abandoned = await enqueueOrFail(clock, { task: 'due', payload: { abandoned: true } });
    await database.query(`UPDATE jobs SET status = 'running', locked_by = 'dead', locked_until = $2 WHERE job_id = $1`, [abandoned, new Date(clock.now().getTime() - 1)]);
    await database.query('ANALYZE jobs');
    // The worker's own claim statement, as it sent it.
    const sent: string[] = [];
    database.statement_observer = (sql) => void sent.push(sql);
    const ran: string[] = [];
    const worker = newWorker(clock, { due: async (claimed) => void ran.push(claimed.job_id) });
    try {
      expect(await worker.runDueJobs({ limit: 4 })).toBe(4);
    } finally {
      database.statement_observer = null;
    }
    expect(ran).toHaveLength(4);
    const claim = sent.find((sql) => /SKIP LOCKED/.test(sql) && /SET status = 'running'/.test(sql));
    expect(claim).toBeDefined();
    // Replayed under EXPLAIN ANALYZE and rolled back: every row a scan of jobs returned or filtered out.
    const rows_read = await database
      .transaction(async (tx) => {
        const { rows } = await tx.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${claim as string}`, [clock.now(), 4, 'probe', 60_000]);
        throw new Rollback(rows[0]?.['QUERY PLAN']);
      })
      .catch((error: unknown) => {
        if (!(error instanceof Rollback)) throw error;
        return scannedRows(error.value, 'jobs');
      });
    // The four claimed, the abandoned one and the next few of the index: not the 900 others (the
    // single OR statement this replaced read all 300 due ones, checked).
    expect(rows_read).toBeGreaterThanOrEqual(4);
    expect(rows_read).toBeLessThanOrEqual(50);
  });

  it('purgeFinishedJobs deletes succeeded jobs older than a day and keeps failed and recent ones', async () => {
    const clock = new TestClock();
    const old_success = await enqueueOrFail(clock, { task: 'ok', payload: {} });
    const old_failure = await enqueueOrFail(clock, { task: 'bad', payload: {}, max_attempts: 1 });
    const worker = newWorker(clock, { ok: async () => {}, bad: async () => { throw new Error('no'); } });
    expect(await worker.runDueJobs()).toBe(2);
    clock.advance(12 * 3_600_000);
    const recent_success = await enqueueOrFail(clock, { task: 'ok', payload: {} });
    expect(await worker.runDueJobs()).toBe(1);
    clock.advance(12 * 3_600_000);
    expect(await purgeFinishedJobs(database, clock)).toBe(0);
    clock.advance(1);
    expect(await purgeFinishedJobs(database, clock)).toBe(1);
    expect(await getJob(database, old_success)).toBeNull();
    expect((await job(old_failure)).status).toBe('failed');
    expect((await job(recent_success)).status).toBe('succeeded');
  });

  it.skipIf(!usingPostgres)('two workers on two pools racing over 200 jobs run each exactly once', async () => {
    const clock = new TestClock();
    const other_database = await testDatabase.openAnother();
    const job_ids: string[] = [];
    await database.transaction(async (tx) => {
      for (let index = 0; index < 200; index += 1) {
        const job_id = await enqueueJob(tx, clock, { task: 'count', payload: { index } });
        if (job_id !== null) job_ids.push(job_id);
      }
    });
    const invocations = new Map<string, number>();
    const ran_by = { first: 0, second: 0 };
    const handlerFor =
      (name: 'first' | 'second'): JobHandler =>
      async (claimed, context) => {
        invocations.set(claimed.job_id, (invocations.get(claimed.job_id) ?? 0) + 1);
        ran_by[name] += 1;
        await context.database.transaction((tx) => tx.query('SELECT pg_sleep(0.001)'));
      };
    const first = newWorker(clock, { count: handlerFor('first') }, { worker_id: 'first', concurrency: 8 });
    const second = newWorker(clock, { count: handlerFor('second') }, { worker_id: 'second', concurrency: 8, database: other_database });
    const [first_ran, second_ran] = await Promise.all([first.runDueJobs(), second.runDueJobs()]);
    expect(first_ran + second_ran).toBe(200);
    // Both workers took part, so the exactly-once result really comes from racing claims.
    expect(first_ran).toBeGreaterThan(0);
    expect(second_ran).toBeGreaterThan(0);
    expect(ran_by.first + ran_by.second).toBe(200);
    expect(invocations.size).toBe(200);
    for (const job_id of job_ids) expect(invocations.get(job_id)).toBe(1);
    const statuses = await database.query<{ status: string; count: number }>(
      'SELECT status, count(*)::integer AS count FROM jobs GROUP BY status',
    );
    expect(statuses.rows).toEqual([{ status: 'succeeded', count: 200 }]);
  });
});
