import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openConfiguredDatabase } from '../../src/app.ts';
import { loadConfig } from '../../src/platform/config.ts';
import { openDatabase, type Database, type DatabasePooling } from '../../src/platform/db.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { deferWrite } from '../../src/platform/unit-of-work.ts';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { ensurePgBouncer, startPgBouncer, type PgBouncer } from '../support/pgbouncer.ts';

/**
 * The setting for transaction pooling (DATABASE_POOLING=transaction, src/platform/db.ts), through a private
 * PgBouncer 1.18 in transaction pooling with ONE server connection: every client's transactions then share
 * one server session, so that anything one of them left in it (a named statement, a time zone, an open or
 * aborted transaction) is seen by the next. PostgreSQL only: PGlite has no pooler to stand behind.
 */

const binary = usingPostgres ? ensurePgBouncer() : null;

let testDatabase: TestDatabase;
let pgbouncer: PgBouncer;
let bouncedUrl: string;
const opened: Database[] = [];

async function throughPgBouncer(pooling: DatabasePooling): Promise<Database> {
  const database = await openDatabase({ database_url: bouncedUrl, data_dir: null, pool_size: 4, pooling });
  opened.push(database);
  return database;
}

beforeAll(async () => {
  if (binary === null) return;
  testDatabase = await createTestDatabase();
  const name = new URL(testDatabase.url!).pathname.slice(1);
  pgbouncer = await startPgBouncer(binary!, { server_url: process.env.DATABASE_URL!, pool_size: 1 });
  bouncedUrl = pgbouncer.url(name);
  await testDatabase.database.exec('CREATE TABLE bounced_rows (id text PRIMARY KEY, value integer NOT NULL CHECK (value >= 0))');
});
afterAll(async () => {
  for (const database of opened) await database.close().catch(() => undefined);
  await pgbouncer?.stop();
  await testDatabase?.close();
});

describe.skipIf(binary === null)('the default setting behind PgBouncer in transaction pooling', () => {

  it('the default setting (for direct connections) is refused by it, and its named statements would break behind it', async () => {
    // PgBouncer 1.18 refuses the `options` startup parameter, which the default sends for the time zone.
    const refused = await throughPgBouncer('session');
    await expect(refused.query('SELECT 1')).rejects.toThrow(/unsupported startup parameter: options/);
    // Told to drop that parameter, it lets the default in, and the named statements collide: a second pool
    // prepares the same name on the same server session, where the first one left it.
    const lenient = await startPgBouncer(binary!, { server_url: process.env.DATABASE_URL!, pool_size: 1, ignore_startup_parameters: ['options'] });
    try {
      const url = lenient.url(new URL(bouncedUrl).pathname.slice(1));
      const [first, second] = [await openDatabase({ database_url: url, data_dir: null, pool_size: 2 }), await openDatabase({ database_url: url, data_dir: null, pool_size: 2 })];
      opened.push(first, second);
      await first.query('SELECT value FROM bounced_rows WHERE id = $1', ['a']);
      await expect(second.query('SELECT value FROM bounced_rows WHERE id = $1', ['a'])).rejects.toThrow(/prepared statement "s_[0-9a-f]+" already exists/);
    } finally {
      await lenient.stop();
    }
  });

});

describe.skipIf(binary === null)('DATABASE_POOLING=transaction behind PgBouncer in transaction pooling', () => {
  it('statements and transactions of several pools share the session and leave no statement in it', async () => {
    const pools = [await throughPgBouncer('transaction'), await throughPgBouncer('transaction'), await throughPgBouncer('transaction')];
    await Promise.all(
      pools.flatMap((database, index) =>
        Array.from({ length: 20 }, async (_, round) => {
          const id = `p${index}-${round}`;
          await database.query('INSERT INTO bounced_rows (id, value) VALUES ($1, $2)', [id, round]);
          // Deferred writes: pipelined with the next read (queryAfter) and with COMMIT (commit).
          await database.transaction(async (tx) => {
            await deferWrite(tx, { sql: 'UPDATE bounced_rows SET value = value + 1 WHERE id = $1', params: [id], expected_rows: 1, rows_written: [`bounced_rows:${id}`] });
            const { rows } = await tx.query<{ value: number }>('SELECT value FROM bounced_rows WHERE id = $1', [id]);
            expect(rows[0]?.value).toBe(round + 1);
            await deferWrite(tx, { sql: 'UPDATE bounced_rows SET value = value + 1 WHERE id = $1', params: [id], expected_rows: 1, rows_written: [`bounced_rows:${id}`] });
          });
        }),
      ),
    );
    const { rows } = await pools[0]!.query<{ count: number; total: number }>("SELECT count(*)::int AS count, sum(value)::int AS total FROM bounced_rows WHERE id LIKE 'p%'");
    expect(rows[0]).toEqual({ count: 60, total: 3 * (190 + 40) });
    // The one server session that ran all of it holds no prepared statement.
    const { rows: prepared } = await pools[1]!.query<{ count: number }>('SELECT count(*)::int AS count FROM pg_prepared_statements');
    expect(prepared[0]?.count).toBe(0);
    const stats = await pgbouncer.show('SHOW STATS');
    expect(Number(stats.find((row) => row.database === new URL(bouncedUrl).pathname.slice(1))?.total_xact_count)).toBeGreaterThan(120);
  });

  it('a failed transaction is rolled back before the server session serves another client', async () => {
    const [first, second] = [await throughPgBouncer('transaction'), await throughPgBouncer('transaction')];
    await first.query("INSERT INTO bounced_rows (id, value) VALUES ('r', 1)");
    // The deferred write fails its CHECK inside the pipelined round trip of the read that follows it.
    await expect(
      first.transaction(async (tx) => {
        await deferWrite(tx, { sql: "UPDATE bounced_rows SET value = -1 WHERE id = 'r'", params: [], expected_rows: 1, rows_written: ['bounced_rows:r'] });
        await tx.query("SELECT value FROM bounced_rows WHERE id = 'r'");
      }),
    ).rejects.toMatchObject({ code: '23514' });
    const { rows } = await second.query<{ value: number; in_transaction: boolean }>(
      "SELECT value, now() <> statement_timestamp() AS in_transaction FROM bounced_rows WHERE id = 'r'",
    );
    expect(rows[0]).toEqual({ value: 1, in_transaction: false });
  });

  it('keeps every transaction in UTC although another client of the server session set another time zone', async () => {
    const database = await throughPgBouncer('transaction');
    const other = new pg.Client({ connectionString: bouncedUrl });
    await other.connect();
    try {
      await other.query("SET TimeZone = 'Asia/Bangkok'");
      expect((await other.query<{ TimeZone: string }>('SHOW TimeZone')).rows[0]?.TimeZone).toBe('Asia/Bangkok');
      const { rows } = await database.query<{ zone: string }>("SELECT current_setting('TimeZone') AS zone");
      expect(rows[0]?.zone).toBe('UTC');
      const inTransaction = await database.transaction(async (tx) => (await tx.query<{ zone: string }>("SELECT current_setting('TimeZone') AS zone")).rows[0]?.zone);
      expect(inTransaction).toBe('UTC');
    } finally {
      await other.end();
    }
  });

});

describe.skipIf(binary === null)('the service configured with DATABASE_POOLING=transaction', () => {
  it('migrates and serves through PgBouncer in transaction pooling', async () => {
    const name = `${new URL(testDatabase.url!).pathname.slice(1)}_service`;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    try {
      const config = loadConfig({ DATABASE_URL: pgbouncer.url(name), DATABASE_POOLING: 'transaction', LOG_LEVEL: 'silent' });
      expect(config.database_pooling).toBe('transaction');
      const database = await openConfiguredDatabase(config, createLogger('silent'));
      opened.push(database);
      const { rows } = await database.query<{ migrations: number; prepared: number }>(
        'SELECT (SELECT count(*)::int FROM schema_migrations) AS migrations, (SELECT count(*)::int FROM pg_prepared_statements) AS prepared',
      );
      expect(rows[0]?.migrations).toBeGreaterThan(30);
      expect(rows[0]?.prepared).toBe(0);
      await database.close();
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  });
});
