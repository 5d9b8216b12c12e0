import crypto from 'node:crypto';
import pg from 'pg';
import { openDatabase, type Database } from '../../src/platform/db.ts';
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
  const fileUrl = withDatabaseName(url, name);
  const database = await openDatabase({ database_url: fileUrl, data_dir: null, pool_size: 20 });
  const others: Database[] = [];
  return {
    database,
    url: fileUrl,
    async openAnother() {
      const another = await openDatabase({ database_url: fileUrl, data_dir: null, pool_size: 20 });
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
