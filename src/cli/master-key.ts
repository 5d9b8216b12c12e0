import { parseArgs } from 'node:util';
import { openConfiguredDatabase, resolveMasterKeyring } from '../app.ts';
import { masterKeyId, SecretBox, type MasterKeyring } from '../platform/crypto.ts';
import { DataDirectoryLocked, type Database } from '../platform/db.ts';
import { resolveDerivationKey } from '../platform/derivation-key.ts';
import { createLogger, scrubText } from '../platform/logger.ts';
import { EventFieldSealer } from '../events/sealed-fields.ts';
import { countStale, DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, rotateAll } from '../key-rotation/rotation.ts';
import { EvidenceCipher } from '../slips/evidence-store.ts';
import { loadCliConfig, type CliEnvironment, type TextSink } from './backends.ts';

/**
 * `npm run cli -- master-key <status|rotate>`: rotation of MASTER_KEY over what is stored (docs/operations.md,
 * "Rotating MASTER_KEY"). It opens the database itself with the service's own MASTER_KEY and MASTER_KEY_PREVIOUS
 * (PostgreSQL beside the running service; the embedded PGlite directory only while the service is stopped).
 *
 * - `status`: the key ids configured, and per sealed column how many values are still under an earlier key.
 *   "previous_key_still_needed": false means MASTER_KEY_PREVIOUS can be removed.
 * - `rotate [--batch-size N]`: seals every such value again under MASTER_KEY, N rows per transaction, and
 *   reports the counts. Running it again resumes an interrupted pass; on a finished rotation it changes nothing.
 *
 * Exit codes: 0 done (status: whatever it shows), 1 failed or some value could not be opened, 2 usage.
 */

const PROGRAM = 'npm run cli -- master-key';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

export interface MasterKeyCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
}

function help(): string {
  return [
    `Usage: ${PROGRAM} <status|rotate> [--batch-size N] [--json]`,
    '',
    'Rotation of MASTER_KEY over the values stored sealed (docs/operations.md, "Rotating MASTER_KEY").',
    '',
    '  status   the configured key ids, and per column how many values are under an earlier key',
    `  rotate   seals those values again under MASTER_KEY, --batch-size rows per transaction (default ${DEFAULT_BATCH_SIZE})`,
    '',
    'Uses MASTER_KEY, MASTER_KEY_PREVIOUS and DATABASE_URL (or DATA_DIR, with the service stopped) like the service.',
    '',
  ].join('\n');
}

interface Opened {
  database: Database;
  keyring: MasterKeyring;
}

async function openWithKeys(env: CliEnvironment, stderr: TextSink): Promise<Opened> {
  const config = loadCliConfig(env);
  const logger = createLogger('error', { write: (line: string) => void stderr.write(line) });
  const keyring = resolveMasterKeyring(config, logger);
  const database = await openConfiguredDatabase(config, logger);
  try {
    // The same check as a start: a key set that opens nothing of this database stops here, before any batch.
    await resolveDerivationKey(database, keyring, new Date());
  } catch (error) {
    await database.close();
    throw error;
  }
  return { database, keyring };
}

function keyIds(keyring: MasterKeyring): { current: string; previous: string[] } {
  return { current: masterKeyId(keyring.current), previous: keyring.previous.map((key) => masterKeyId(key)) };
}

async function status(opened: Opened, json: boolean, stdout: TextSink): Promise<number> {
  const ids = keyIds(opened.keyring);
  const columns = await countStale(opened.database, ids.current);
  const stale = columns.reduce((sum, column) => sum + column.stale, 0);
  const report = { current_key_id: ids.current, previous_key_ids: ids.previous, stale_values: stale, previous_key_still_needed: stale > 0, columns };
  if (json) {
    stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return EXIT_OK;
  }
  const lines = [`MASTER_KEY: ${ids.current}`, `MASTER_KEY_PREVIOUS: ${ids.previous.join(', ') || '(none)'}`, ''];
  for (const column of columns) lines.push(`${column.column.padEnd(42)} ${String(column.stale).padStart(10)} under an earlier key`);
  lines.push('', stale === 0 ? 'Every value is under MASTER_KEY: MASTER_KEY_PREVIOUS can be removed.' : `${stale} values still need MASTER_KEY_PREVIOUS: run '${PROGRAM} rotate'.`);
  stdout.write(`${lines.join('\n')}\n`);
  return EXIT_OK;
}

async function rotate(opened: Opened, batch_size: number, json: boolean, io: MasterKeyCliIo): Promise<number> {
  const keys = {
    box: SecretBox.fromKeyring(opened.keyring),
    evidence: new EvidenceCipher(opened.keyring.current, opened.keyring.previous),
    events: new EventFieldSealer(SecretBox.fromKeyring(opened.keyring)),
  };
  const onBatch = json ? undefined : (column: string, resealed: number) => void io.stderr.write(`${column}: ${resealed} sealed again\n`);
  const columns = await rotateAll(opened.database, keys, batch_size, onBatch);
  const resealed = columns.reduce((sum, column) => sum + column.resealed, 0);
  const failed = columns.reduce((sum, column) => sum + column.failed, 0);
  const report = { current_key_id: keys.box.current_key_id, resealed, failed, columns };
  if (json) {
    io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const lines = columns.map((column) => `${column.column.padEnd(42)} ${String(column.resealed).padStart(10)} sealed again${column.failed > 0 ? `, ${column.failed} failed` : ''}`);
    lines.push('', `${resealed} values sealed again under ${keys.box.current_key_id}; ${failed} could not be opened.`);
    for (const column of columns) if (column.first_failure !== null) lines.push(`first failure: ${column.first_failure}`);
    io.stdout.write(`${lines.join('\n')}\n`);
  }
  return failed === 0 ? EXIT_OK : EXIT_FAILED;
}

function parse(argv: readonly string[]): { action: string | undefined; batch_size: number; json: boolean; help: boolean } {
  const parsed = parseArgs({
    args: argv.slice(1),
    allowPositionals: true,
    options: { 'batch-size': { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean' } },
  });
  const batchText = parsed.values['batch-size'] ?? String(DEFAULT_BATCH_SIZE);
  const batch_size = /^[1-9][0-9]{0,4}$/.test(batchText) ? Number(batchText) : Number.NaN;
  if (!(batch_size <= MAX_BATCH_SIZE)) throw new Error(`--batch-size must be a whole number from 1 to ${MAX_BATCH_SIZE}`);
  return { action: parsed.positionals[0], batch_size, json: parsed.values.json === true, help: parsed.values.help === true };
}

export async function runMasterKeyCli(argv: readonly string[], io: MasterKeyCliIo): Promise<number> {
  let options: ReturnType<typeof parse>;
  try {
    options = parse(argv);
  } catch (error) {
    io.stderr.write(`error: usage: ${error instanceof Error ? error.message : String(error)}\n\n${help()}`);
    return EXIT_USAGE;
  }
  if (options.help) {
    io.stdout.write(help());
    return EXIT_OK;
  }
  if (options.action !== 'status' && options.action !== 'rotate') {
    io.stderr.write(`error: usage: ${options.action === undefined ? 'an action is required' : `unknown action '${options.action}'`}\n\n${help()}`);
    return EXIT_USAGE;
  }
  let opened: Opened;
  try {
    opened = await openWithKeys(io.env, io.stderr);
  } catch (error) {
    const code = error instanceof DataDirectoryLocked ? 'data_directory_locked' : 'master_key_unusable';
    io.stderr.write(`error: ${code}: ${scrubText(error instanceof Error ? error.message : String(error))}\n`);
    return EXIT_FAILED;
  }
  try {
    return options.action === 'status' ? await status(opened, options.json, io.stdout) : await rotate(opened, options.batch_size, options.json, io);
  } catch (error) {
    io.stderr.write(`error: rotation_failed: ${scrubText(error instanceof Error ? error.message : String(error))}\n`);
    return EXIT_FAILED;
  } finally {
    await opened.database.close();
  }
}
