import pg from 'pg';
import { openDatabase, processIsAlive } from '../../src/platform/db.ts';
import { migrate } from '../../src/platform/migrate.ts';
import { withDatabaseName } from './database.ts';

/**
 * On real PostgreSQL, migrate one template database per run; every test file then gets its own
 * database created from that template in a few milliseconds. Names carry the run's pid, so that two
 * suites on one server (a developer's and CI's) never share or drop each other's databases; leftovers
 * of runs whose process is gone are dropped. PGlite needs no global set-up.
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
  return async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await client.end();
  };
}
