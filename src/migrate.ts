import { loadConfig } from './platform/config.ts';
import { createLogger } from './platform/logger.ts';
import { DataDirectoryLocked, openDatabase } from './platform/db.ts';
import { migrate } from './platform/migrate.ts';

/**
 * `npm run migrate` (`node dist/migrate.js` from the build): applies the migrations this code has to the
 * database of DATABASE_URL (the embedded one in DATA_DIR without it) and exits, so that an upgrade can
 * migrate once, as its own step, before processes started with MIGRATE_ON_START=false take the new code.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.log_level);
  const database = await openDatabase({
    database_url: config.database_url,
    data_dir: config.database_url ? null : config.data_dir,
    pooling: config.database_pooling,
    pool_size: 1,
  });
  try {
    const applied = await migrate(database);
    logger.info({ applied }, 'migrations applied');
    process.stdout.write(
      applied.length === 0 ? `The database (${database.engine}) has every migration.\n` : `Applied ${applied.length} migrations to the database (${database.engine}).\n`,
    );
  } finally {
    await database.close();
  }
}

main().catch((error: unknown) => {
  const message = error instanceof DataDirectoryLocked || error instanceof Error ? error.message : String(error);
  process.stderr.write(`migration failed: ${message}\n`);
  process.exit(1);
});
