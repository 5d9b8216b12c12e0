import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './platform/config.ts';
import { keysById, type MasterKeyring } from './platform/crypto.ts';
import { openDatabase, type Database } from './platform/db.ts';
import type { Logger } from './platform/logger.ts';
import { assertMigrated, migrate } from './platform/migrate.ts';

/**
 * What a process does before it builds a service instance (src/app.ts): find its master keys and open its
 * database with the schema up to date. `src/main.ts`, `src/migrate.ts` and the CLI call these.
 */

function decodeMasterKey(text: string, name: string): Buffer {
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error(`${name} must be 32 bytes in standard base64`);
  return key;
}

/**
 * The master key seals secrets at rest. Production passes MASTER_KEY; the embedded default keeps a
 * generated key beside its data (mode 0600) so that a fresh machine starts with no set-up.
 */
export function resolveMasterKey(config: Config, logger: Logger): Buffer {
  if (config.master_key_base64) return decodeMasterKey(config.master_key_base64, 'MASTER_KEY');
  if (config.production) throw new Error('MASTER_KEY is required when NODE_ENV=production');
  const keyPath = path.join(path.resolve(config.data_dir), 'master.key');
  fs.mkdirSync(path.dirname(keyPath), { recursive: true });
  if (!fs.existsSync(keyPath)) {
    fs.writeFileSync(keyPath, crypto.randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
    logger.warn({ path: keyPath }, 'generated a master key for development; set MASTER_KEY in production');
  }
  const key = Buffer.from(fs.readFileSync(keyPath, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`the master key in ${keyPath} is not 32 bytes`);
  return key;
}

/**
 * The current master key and the earlier ones of a rotation (MASTER_KEY_PREVIOUS, only with MASTER_KEY:
 * the generated development key is never rotated). Each key is checked here, so a wrong one stops the start.
 */
export function resolveMasterKeyring(config: Config, logger: Logger): MasterKeyring {
  if (config.master_key_previous_base64.length > 0 && !config.master_key_base64) throw new Error('MASTER_KEY_PREVIOUS is set without MASTER_KEY');
  const ring = {
    current: resolveMasterKey(config, logger),
    previous: config.master_key_previous_base64.map((text, index) => decodeMasterKey(text, `MASTER_KEY_PREVIOUS (key ${index + 1})`)),
  };
  keysById(ring);
  return ring;
}

export async function openConfiguredDatabase(config: Config, logger: Logger): Promise<Database> {
  const database = await openDatabase({
    database_url: config.database_url,
    data_dir: config.database_url ? null : config.data_dir,
    pooling: config.database_pooling,
    pool_size: config.db_pool_size,
  });
  if (database.engine === 'pglite') {
    logger.warn(
      { data_dir: path.resolve(config.data_dir) },
      'running on embedded PGlite (one process, fsync off): for trying and development only; production runs on PostgreSQL (DATABASE_URL)',
    );
  }
  await bringSchemaUpToDate(database, config, logger);
  return database;
}

/** Migrates at start (the default), or, with MIGRATE_ON_START=false, only refuses a database that is behind. */
async function bringSchemaUpToDate(database: Database, config: Config, logger: Logger): Promise<void> {
  if (!config.migrate_on_start) {
    await assertMigrated(database);
    return;
  }
  const applied = await migrate(database);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
}
