import pg from 'pg';
import { openDatabase, processIsAlive } from '../../src/platform/db.ts';
import { migrate } from '../../src/platform/migrate.ts';
import { withDatabaseName } from './database.ts';
import { ensurePgBouncer, startPgBouncer, type PgBouncer } from './pgbouncer.ts';

/**
 * On real PostgreSQL, migrate one template database per run; every test file then gets its own
 * database created from that template in a few milliseconds. Names carry the run's pid, so that two
 * suites on one server (a developer's and CI's) never share or drop each other's databases; leftovers
 * of runs whose process is gone are dropped. PGlite needs no global set-up.
 *
 * The PgBouncer pass (`npm run test:pgbouncer`, PGTEST_PGBOUNCER=1) also starts a private PgBouncer in
 * transaction pooling: the test files' databases are then opened through it with DATABASE_POOLING=transaction
 * (test/support/database.ts), while the creating and dropping of databases goes to the server directly.
 */
export async function setup(): Promise<() => Promise<void>> {
  const url = process.env.DATABASE_URL;
  if (!url) return async () => {};
  const runPrefix = `pgtest_${process.pid}`;
  const template = `${runPrefix}_template`;
  // Test files run in forked workers, which inherit this environment.
  process.env.PGTEST_RUN_PREFIX = runPrefix;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const existing = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'pgtest\\_%'");
  for (const { datname } of existing.rows) {
    const owner = Number(/^pgtest_(\d+)_/.exec(datname)?.[1]);
    if (!Number.isSafeInteger(owner) || owner === process.pid || !processIsAlive(owner)) {
      await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
    }
  }
  await admin.query(`CREATE DATABASE ${template}`);
  const database = await openDatabase({ database_url: withDatabaseName(url, template), data_dir: null });
  await migrate(database);
  await database.close();
  await admin.end();
  const pgbouncer = process.env.PGTEST_PGBOUNCER === '1' ? await startPassPgBouncer(url) : null;
  return async () => {
    if (pgbouncer) await stopPassPgBouncer(pgbouncer);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await client.end();
  };
}

async function startPassPgBouncer(url: string): Promise<PgBouncer> {
  const binary = ensurePgBouncer();
  if (binary === null) throw new Error('the PgBouncer pass needs pgbouncer (scripts/ensure-pgbouncer.sh)');
  const pgbouncer = await startPgBouncer(binary, { server_url: url });
  process.env.PGTEST_PGBOUNCER_PORT = String(pgbouncer.port);
  // Service processes the tests start inherit this environment, and so the setting.
  process.env.DATABASE_POOLING = 'transaction';
  process.stderr.write(`[pgbouncer pass] PgBouncer 1.18 (transaction pooling) on 127.0.0.1:${pgbouncer.port}, pid ${pgbouncer.pid}\n`);
  return pgbouncer;
}

/** Prints what went through PgBouncer (its own counters), so that the pass shows it was used, and stops it. */
async function stopPassPgBouncer(pgbouncer: PgBouncer): Promise<void> {
  try {
    const stats = await pgbouncer.show('SHOW STATS');
    const total = (column: string) => stats.filter((row) => row.database !== 'pgbouncer').reduce((sum, row) => sum + Number(row[column] ?? 0), 0);
    const databases = stats.filter((row) => String(row.database).startsWith('pgtest_')).length;
    process.stderr.write(`[pgbouncer pass] through PgBouncer: ${total('total_xact_count')} transactions, ${total('total_query_count')} statements, ${databases} test databases\n`);
  } finally {
    await pgbouncer.stop();
  }
}
