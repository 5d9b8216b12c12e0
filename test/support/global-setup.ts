import pg from 'pg';
import { openDatabase } from '../../src/platform/db.ts';
import { migrate } from '../../src/platform/migrate.ts';
import { TEMPLATE_DATABASE, withDatabaseName } from './database.ts';

/**
 * On real PostgreSQL, migrate one template database per run; every test file then gets its own
 * database created from that template in a few milliseconds. PGlite needs no global set-up.
 */
export async function setup(): Promise<() => Promise<void>> {
  const url = process.env.DATABASE_URL;
  if (!url) return async () => {};
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
  const template = await openDatabase({ database_url: withDatabaseName(url, TEMPLATE_DATABASE), data_dir: null });
  await migrate(template);
  await template.close();
  const stale = await admin.query<{ datname: string }>(
    "SELECT datname FROM pg_database WHERE datname LIKE 'pgtest\\_file\\_%'",
  );
  // Databases left by a crashed run are dropped; one still in use (another run) is left alone.
  for (const row of stale.rows) {
    await admin.query(`DROP DATABASE IF EXISTS ${row.datname}`).catch(() => undefined);
  }
  await admin.end();
  return async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE} WITH (FORCE)`);
    await client.end();
  };
}
