import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/platform/db.ts';
import { migrate } from '../../src/platform/migrate.ts';
import { TestClock } from '../../src/platform/clock.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { enqueueJob, Worker } from '../../src/jobs/index.ts';
import { createTestDatabase, usingPostgres } from '../support/database.ts';
import { createTestApp } from '../support/app.ts';

/**
 * A job enqueued before a stop runs after the next start: on PGlite the data directory is closed and
 * opened again by a new database handle; on PostgreSQL a new pool plays the restarted process.
 */
describe('durable jobs survive a restart', () => {
  it('runs, after reopening the database, a job that was due while the service was down', async () => {
    const clock = new TestClock('2026-08-01T00:00:00.000Z');
    let directory: string | null = null;
    let reopen: () => Promise<Database>;
    let cleanup = async () => {};
    let first: Database;
    if (usingPostgres) {
      const testDatabase = await createTestDatabase();
      first = await testDatabase.openAnother();
      reopen = () => testDatabase.openAnother();
      cleanup = () => testDatabase.close();
    } else {
      directory = fs.mkdtempSync(path.join(os.tmpdir(), 'restart-'));
      const dataDirectory = directory;
      first = await openDatabase({ database_url: null, data_dir: dataDirectory });
      await migrate(first);
      reopen = () => openDatabase({ database_url: null, data_dir: dataDirectory });
      cleanup = async () => fs.rmSync(dataDirectory, { recursive: true, force: true });
    }
    try {
      await first.transaction((tx) =>
        enqueueJob(tx, clock, { task: 'deadline.reached', payload: { order: 'dep_1' }, run_at: new Date('2026-08-01T01:00:00.000Z') }),
      );
      if (!usingPostgres) await first.close();
      clock.advance(2 * 3600 * 1000);
      const second = await reopen();
      const ran: unknown[] = [];
      const worker = new Worker({
        database: second,
        clock,
        logger: createLogger('silent'),
        handlers: { 'deadline.reached': async (job) => void ran.push(job.payload) },
      });
      expect(await worker.runDueJobs()).toBe(1);
      expect(ran).toEqual([{ order: 'dep_1' }]);
      await worker.stop();
      if (!usingPostgres) await second.close();
    } finally {
      await cleanup();
    }
  });
});

describe('advertised address', () => {
  it('uses PUBLIC_BASE_URL without a trailing slash when it is set', async () => {
    const app = await createTestApp({ config: { PUBLIC_BASE_URL: 'https://pay.example.co.th/' } });
    try {
      expect(app.instance.services.publicBaseUrl()).toBe('https://pay.example.co.th');
    } finally {
      await app.close();
    }
  });

  it('reports ready once listening and not ready while stopping', async () => {
    const app = await createTestApp({ config: { PORT: '0', WORKER_ENABLED: 'false' } });
    try {
      const base = await app.instance.listen();
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready', database: app.testDatabase.database.engine });
    } finally {
      await app.close();
    }
  });
});
