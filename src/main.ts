import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from './platform/config.ts';
import { loadWebhookSettings } from './webhooks/settings.ts';
import { createLogger } from './platform/logger.ts';
import { DataDirectoryLocked } from './platform/db.ts';
import { createServiceInstance, openConfiguredDatabase, resolveMasterKeyring } from './app.ts';
import { resolveDerivationKey } from './platform/derivation-key.ts';
import { limitHeapGrowth } from './platform/heap.ts';

/**
 * `npm start`: migrate, create the sandbox on first start, serve the API and run the worker until
 * SIGTERM or SIGINT, then stop gracefully (in-flight requests and jobs finish first).
 */
async function main(): Promise<void> {
  limitHeapGrowth();
  const config = loadConfig();
  // The webhook settings are read again when the instance is built; reading them first stops a process
  // with a wrong one before it opens the database.
  loadWebhookSettings(process.env, { embedded_database: config.database_url === null });
  const logger = createLogger(config.log_level);
  const keyring = resolveMasterKeyring(config, logger);
  let database;
  try {
    database = await openConfiguredDatabase(config, logger);
  } catch (error) {
    if (error instanceof DataDirectoryLocked) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  // Opening the pinned derivation root checks the key set against the database before anything is served.
  const derivationKey = await resolveDerivationKey(database, keyring, new Date());
  const instance = createServiceInstance({
    config,
    database,
    logger,
    master_key: keyring.current,
    master_key_previous: keyring.previous,
    derivation_key: derivationKey,
  });
  const baseUrl = await instance.listen();

  const sandbox = await instance.services.tenancy.bootstrapSandbox();
  if (sandbox) {
    const directory = path.resolve(config.data_dir);
    fs.mkdirSync(directory, { recursive: true });
    const credentialsPath = path.join(directory, 'sandbox-credentials.json');
    const operatorPath = path.join(directory, 'operator-credentials.json');
    const sandboxFile = {
      base_url: baseUrl,
      api_key: sandbox.api_key,
      signing_secret: sandbox.signing_secret,
      merchant_id: sandbox.merchant_id,
      white_label_id: sandbox.white_label_id,
    };
    const operatorFile = {
      base_url: baseUrl,
      credential_id: sandbox.operator_credential_id,
      role: 'platform_admin',
      token: sandbox.operator_token,
    };
    fs.writeFileSync(credentialsPath, `${JSON.stringify(sandboxFile, null, 2)}\n`, { mode: 0o600 });
    fs.writeFileSync(operatorPath, `${JSON.stringify(operatorFile, null, 2)}\n`, { mode: 0o600 });
    process.stdout.write(
      `First start: created a sandbox brand, merchant and test key.\n` +
        `  Sandbox credentials: ${credentialsPath}\n` +
        `  Operator credential for the CLI and back office: ${operatorPath}\n`,
    );
  }
  process.stdout.write(`Payment service listening at ${baseUrl} (database: ${database.engine})\n`);

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: finishing in-flight requests and jobs');
    const timer = setTimeout(() => {
      logger.error('graceful stop timed out; exiting');
      process.exit(1);
    }, config.shutdown_timeout_ms);
    timer.unref();
    instance.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
