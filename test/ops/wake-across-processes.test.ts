import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LISTENER_APPLICATION_NAME } from '../../src/platform/notifications.ts';
import type { Database } from '../../src/platform/db.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { waitFor } from '../support/service-process.ts';
import { payOverHttp, uploadSlipOverHttp, type PaidOrder } from '../support/slip-over-http.ts';

/**
 * Issue 33, item 4: an api process and a worker process on one PostgreSQL, started with `npm start`'s
 * command. The worker polls once a minute (the longest interval allowed), so a slip that settles within
 * seconds of its 202 was handed over by the notification its job's insert sent. A worker that does not
 * listen shows it: the same upload stays unprocessed.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
/** Well inside the worker's minute of polling: a settlement in this time did not wait for a poll. */
const SETTLED_WITHIN_MS = 30_000;

interface Role {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  stop: () => Promise<void>;
}

function startRole(environment: Record<string, string>): Role {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const [, ...args] = (manifest.scripts.start ?? '').trim().split(/\s+/);
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn', MASTER_KEY, ...environment } });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  return {
    child,
    output: () => output,
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

async function listening(role: Role): Promise<number> {
  return waitFor(() => {
    if (role.child.exitCode !== null) throw new Error(`the process exited before listening:\n${role.output()}`);
    const match = /listening at http:\/\/localhost:(\d+)/.exec(role.output());
    return match ? Number(match[1]) : null;
  }, 90_000, 'the process to start');
}

async function statusOf(database: Database, order: PaidOrder): Promise<string> {
  const { rows } = await database.query<{ status: string }>('SELECT status FROM deposit_orders WHERE deposit_id = $1', [order.deposit_id]);
  return rows[0]?.status ?? 'missing';
}

function settled(database: Database, order: PaidOrder): Promise<true> {
  return waitFor(async () => ((await statusOf(database, order)) === 'settled' ? true : null), SETTLED_WITHIN_MS, `deposit ${order.deposit_id} to settle`);
}

async function listenerPids(database: Database): Promise<number[]> {
  const { rows } = await database.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND query = 'LISTEN jobs_due'`,
    [LISTENER_APPLICATION_NAME],
  );
  return rows.map((row) => row.pid);
}

describe.skipIf(!usingPostgres)('a slip reaches a worker in another process through LISTEN/NOTIFY', () => {
  let testDatabase: TestDatabase;
  let dataDirectory: string;
  let api: Role;
  let worker: Role | null = null;
  let base_url: string;
  let credentials: MerchantCredentials;

  beforeAll(async () => {
    testDatabase = await createTestDatabase();
    dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'pay-wake-'));
    api = startRole({ DATABASE_URL: testDatabase.url!, DATA_DIR: dataDirectory, WORKER_ENABLED: 'false' });
    const port = await listening(api);
    base_url = `http://localhost:${port}`;
    credentials = JSON.parse(fs.readFileSync(path.join(dataDirectory, 'sandbox-credentials.json'), 'utf8')) as MerchantCredentials;
  }, 120_000);

  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
    await testDatabase?.close();
    fs.rmSync(dataDirectory, { recursive: true, force: true });
  });

  async function startWorker(environment: Record<string, string>): Promise<void> {
    worker = startRole({ DATABASE_URL: testDatabase.url!, DATA_DIR: dataDirectory, API_ENABLED: 'false', WORKER_POLL_INTERVAL_MS: '60000', ...environment });
    await listening(worker);
  }

  it('a worker that only polls leaves an uploaded slip waiting for its next poll', async () => {
    await startWorker({ WORKER_LISTEN: 'false' });
    const order = await payOverHttp(base_url, credentials, 'wake-control');
    expect(await uploadSlipOverHttp(order)).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    expect(await statusOf(testDatabase.database, order)).not.toBe('settled');
    expect(await listenerPids(testDatabase.database)).toEqual([]);
    await worker!.stop();
    worker = null;
  }, 150_000);

  it('a listening worker settles a slip uploaded to the api process within seconds, and again after its session is terminated', async () => {
    await startWorker({});
    const [first] = await waitFor(async () => {
      const pids = await listenerPids(testDatabase.database);
      return pids.length === 1 ? pids : null;
    }, 30_000, 'the worker to listen');
    const order = await payOverHttp(base_url, credentials, 'wake-listen');
    expect(await uploadSlipOverHttp(order)).toBe(202);
    await settled(testDatabase.database, order);

    await testDatabase.database.query('SELECT pg_terminate_backend($1)', [first]);
    await waitFor(async () => {
      const pids = await listenerPids(testDatabase.database);
      return pids.length === 1 && pids[0] !== first ? true : null;
    }, 30_000, 'the worker to listen again');
    const after = await payOverHttp(base_url, credentials, 'wake-again');
    expect(await uploadSlipOverHttp(after)).toBe(202);
    await settled(testDatabase.database, after);
    expect(worker!.output()).toContain('the notification listener lost its connection; reconnecting');
  }, 180_000);
});
