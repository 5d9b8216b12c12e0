import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Database } from './db.ts';

/**
 * Numbered SQL migrations in ./migrations, applied in order at start-up (or by `npm run migrate`), each in
 * its own transaction. A checksum per file proves a landed migration was never edited. On PostgreSQL an
 * advisory lock makes concurrent start-ups wait for each other instead of racing. The directory is found
 * from this file's place: `src/platform/` and the build's `dist/platform/` both sit two levels below it.
 */
export const MIGRATIONS_DIRECTORY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');
const MIGRATION_LOCK_KEY = 7_413_902_001;

interface MigrationFile {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export function readMigrations(directory = MIGRATIONS_DIRECTORY): MigrationFile[] {
  const files = fs.readdirSync(directory).filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file)).sort();
  return files.map((file, index) => {
    const version = Number(file.slice(0, 4));
    if (version !== index + 1) throw new Error(`migration numbering has a gap or repeat at ${file}`);
    const sql = fs.readFileSync(path.join(directory, file), 'utf8');
    return { version, name: file, sql, checksum: crypto.createHash('sha256').update(sql).digest('hex') };
  });
}

export async function migrate(database: Database, directory = MIGRATIONS_DIRECTORY): Promise<number[]> {
  const migrations = readMigrations(directory);
  const applied: number[] = [];
  await database.transaction(async (tx) => {
    if (database.engine === 'postgres') await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await tx.query<{ version: number; name: string; checksum: string }>(
      'SELECT version, name, checksum FROM schema_migrations ORDER BY version',
    );
    const done = new Map(rows.map((row) => [row.version, row]));
    for (const migration of migrations) {
      const previous = done.get(migration.version);
      if (previous) {
        if (previous.checksum !== migration.checksum) {
          throw new Error(`migration ${migration.name} was edited after it was applied; add a new migration instead`);
        }
        continue;
      }
      await tx.exec(migration.sql);
      await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
        migration.version,
        migration.name,
        migration.checksum,
      ]);
      applied.push(migration.version);
    }
  });
  return applied;
}

/**
 * For a start told not to migrate (MIGRATE_ON_START=false): the migrations of this code that the database
 * has not applied, by file name. A migration applied with other contents is an error, as in `migrate`.
 * Migrations the database has and this code does not are no concern here: an older process beside a
 * newer schema is what a rolling upgrade looks like.
 */
export async function pendingMigrations(database: Database, directory = MIGRATIONS_DIRECTORY): Promise<string[]> {
  const migrations = readMigrations(directory);
  const { rows: present } = await database.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
  if (present[0]?.present !== true) return migrations.map((migration) => migration.name);
  const { rows } = await database.query<{ version: number; checksum: string }>('SELECT version, checksum FROM schema_migrations');
  const applied = new Map(rows.map((row) => [row.version, row.checksum]));
  const pending: string[] = [];
  for (const migration of migrations) {
    const checksum = applied.get(migration.version);
    if (checksum === undefined) pending.push(migration.name);
    else if (checksum !== migration.checksum) throw new Error(`migration ${migration.name} was edited after it was applied; add a new migration instead`);
  }
  return pending;
}

/** Throws a one-line error naming what is missing when the database is behind this code's migrations. */
export async function assertMigrated(database: Database, directory = MIGRATIONS_DIRECTORY): Promise<void> {
  const pending = await pendingMigrations(database, directory);
  if (pending.length === 0) return;
  const range = pending.length === 1 ? pending[0] : `${pending[0]} … ${pending[pending.length - 1]}`;
  throw new Error(
    `the database is behind this code's migrations (${pending.length} not applied: ${range}) and MIGRATE_ON_START is false: run the migrations first (\`npm run migrate\`)`,
  );
}
