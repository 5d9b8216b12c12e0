import crypto from 'node:crypto';
import pg from 'pg';
import { openDatabase, type Database, type Queryable } from '../../src/platform/db.ts';
import { migrate } from '../../src/platform/migrate.ts';

/** This run's prefix, set by the global set-up (pgtest_<pid>): its template and file databases. */
function runPrefix(): string {
  const prefix = process.env.PGTEST_RUN_PREFIX;
  if (!prefix) throw new Error('PGTEST_RUN_PREFIX is missing: the vitest global set-up did not run');
  return prefix;
}

export function withDatabaseName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

export const usingPostgres = Boolean(process.env.DATABASE_URL);

function throughPgBouncer(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  // PgBouncer trusts its loopback clients; it holds the server's password itself.
  parsed.password = '';
  return parsed.toString();
}

/**
 * Resolves once some session of this database waits for a lock (PostgreSQL; up to `timeout_ms`), for a test
 * that holds a lock and must know that the statement it is testing has reached it.
 */
export async function untilALockIsWaitedFor(database: Database, timeout_ms = 5_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (Date.now() < deadline) {
    const { rows } = await database.query<{ waiting: number }>(
      `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if ((rows[0]?.waiting ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * True when another session holds a lock on a row `select_for_update` names: the statement (a `SELECT … FOR
 * UPDATE NOWAIT`, PostgreSQL) fails with 55P03 then. A row it locks here is released at once (its own transaction).
 */
export async function isLockedElsewhere(database: Database, select_for_update_nowait: string, params: readonly unknown[]): Promise<boolean> {
  try {
    await database.query(select_for_update_nowait, params);
    return false;
  } catch (error) {
    if ((error as { code?: string }).code === '55P03') return true;
    throw error;
  }
}

/**
 * Runs `work` in a transaction that stays open until `release()` is called, for a test that holds locks while
 * the path it tests runs: `held` resolves once `work` has run (its locks are taken), `done` once it committed.
 */
export function holdInTransaction(database: Database, work: (tx: Queryable) => Promise<void>): { held: Promise<void>; release: () => void; done: Promise<void> } {
  let release!: () => void;
  const mayCommit = new Promise<void>((resolve) => (release = resolve));
  let markHeld!: () => void;
  const held = new Promise<void>((resolve) => (markHeld = resolve));
  const done = database.transaction(async (tx) => {
    await work(tx);
    markHeld();
    await mayCommit;
  });
  // A failure of `work` rejects `done`; `held` then never resolves, so the test fails on `done` or times out.
  return { held: Promise.race([held, done]), release, done };
}

export interface TestDatabase {
  database: Database;
  /** Connection string of this file's own database on PostgreSQL; null on PGlite. */
  url: string | null;
  /** Opens another pool on the same database (to play a second process); PostgreSQL only. */
  openAnother(): Promise<Database>;
  close(): Promise<void>;
}

/** A fresh, migrated database for one test file: PGlite in memory, or a new PostgreSQL database. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const url = process.env.DATABASE_URL;
  if (!url) {
    const database = await openDatabase({ database_url: null, data_dir: null });
    await migrate(database);
    return {
      database,
      url: null,
      openAnother: () => Promise.reject(new Error('a second connection needs PostgreSQL')),
      close: () => database.close(),
    };
  }
  const name = `${runPrefix()}_file_${crypto.randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} TEMPLATE ${runPrefix()}_template`);
  await admin.end();
  // In the PgBouncer pass the file's database is reached through the run's PgBouncer (global-setup.ts).
  const pgbouncerPort = process.env.PGTEST_PGBOUNCER_PORT;
  const fileUrl = pgbouncerPort ? throughPgBouncer(withDatabaseName(url, name), Number(pgbouncerPort)) : withDatabaseName(url, name);
  const pooling = pgbouncerPort ? 'transaction' : 'session';
  const database = await openDatabase({ database_url: fileUrl, data_dir: null, pool_size: 20, pooling });
  const others: Database[] = [];
  return {
    database,
    url: fileUrl,
    async openAnother() {
      const another = await openDatabase({ database_url: fileUrl, data_dir: null, pool_size: 20, pooling });
      others.push(another);
      return another;
    },
    async close() {
      for (const other of others) await other.close();
      await database.close();
      const cleanup = new pg.Client({ connectionString: url });
      await cleanup.connect();
      await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await cleanup.end();
    },
  };
}
