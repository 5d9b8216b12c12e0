import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../../src/http/canonical.ts';
import { runCli } from '../../src/cli/commands.ts';
import { openDatabase, type Database } from '../../src/platform/db.ts';
import { migrate } from '../../src/platform/migrate.ts';
import { MasterKeyMismatch, resolveDerivationKey } from '../../src/platform/derivation-key.ts';
import { masterKeyId } from '../../src/platform/crypto.ts';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { createDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';

/**
 * Rotating MASTER_KEY end to end (docs/operations.md, "Rotating MASTER_KEY"), on the engine the suite runs on:
 * a service under the old key seals things by being used (an API key, a webhook signing key, a deposit with its
 * declared sender, a slip image sent to review, idempotent answers); it restarts with MASTER_KEY=new and
 * MASTER_KEY_PREVIOUS=old and everything still verifies and opens; `npm run cli -- master-key rotate` (run in
 * process, on the same database) seals every value again; it restarts with the new key alone and everything
 * still works; and a key set that does not hold the database's key is refused at start and by the CLI.
 */

const OLD_KEY = crypto.randomBytes(32);
const NEW_KEY = crypto.randomBytes(32);
const STRANGER_KEY = crypto.randomBytes(32);

/** The database as a restarted process sees it: PGlite reopened from its directory, or a new PostgreSQL pool. */
interface Storage {
  open(): Promise<Database>;
  /** What the CLI is given to reach the same database. */
  environment: Record<string, string>;
  cleanup(): Promise<void>;
}

async function createStorage(): Promise<Storage> {
  if (usingPostgres) {
    // Each start opens a pool of its own and closes it on stop; the test database's own pool only drops the database at the end.
    const testDatabase: TestDatabase = await createTestDatabase();
    const url = testDatabase.url!;
    return { open: () => openDatabase({ database_url: url, data_dir: null }), environment: { DATABASE_URL: url }, cleanup: () => testDatabase.close() };
  }
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'master-key-'));
  const first = await openDatabase({ database_url: null, data_dir: directory });
  await migrate(first);
  await first.close();
  return {
    open: () => openDatabase({ database_url: null, data_dir: directory }),
    environment: { DATA_DIR: directory },
    cleanup: async () => fs.rmSync(directory, { recursive: true, force: true }),
  };
}

interface Started {
  app: TestApp;
  base_url: string;
}

/** Starts the service as `npm start` does: the key ring, the pinned derivation root opened with it, then the server. */
async function startService(storage: Storage, current: Buffer, previous: Buffer[], existing?: { sandbox: MerchantCredentials; operator_token: string }): Promise<Started> {
  const database = await storage.open();
  const derivation_key = await resolveDerivationKey(database, { current, previous }, new Date());
  const testDatabase: TestDatabase = { database, url: null, openAnother: () => storage.open(), close: () => database.close() };
  // Load shedding is off: this machine's load is not what the test is about, and a shed request would fail it. The
  // worker is off: the test runs the due jobs itself (runJobs), and a running worker woken by the job's notification
  // could take the slip's job first and leave it unfinished when the test reads the order.
  const app = await createTestApp({ config: { LOAD_SHEDDING: 'false', WORKER_ENABLED: 'false', PUBLIC_BASE_URL: 'http://localhost:3999', CHECKOUT_BASE_URL: 'http://localhost:3999' }, testDatabase, master_key: current, master_key_previous: previous, derivation_key, existing_sandbox: existing });
  await app.instance.listen();
  // The advertised address is fixed (so that checkout URLs compare across starts); requests go to the bound port.
  const { port } = app.instance.app.server.address() as { port: number };
  return { app, base_url: `http://127.0.0.1:${port}` };
}

async function cli(storage: Storage, args: string[], keys: { current: Buffer; previous: Buffer[] }): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const env = { ...storage.environment, LOG_LEVEL: 'silent', MASTER_KEY: keys.current.toString('base64'), MASTER_KEY_PREVIOUS: keys.previous.map((key) => key.toString('base64')).join(',') };
  const code = await runCli(['master-key', ...args], { stdout: { write: (text: string) => void (stdout += text) }, stderr: { write: (text: string) => void (stderr += text) }, env });
  return { code, stdout, stderr };
}

/** A signed GET over a real socket, as a merchant's client sends it. */
async function signedGet(started: Started, credentials: MerchantCredentials, target: string): Promise<Response> {
  const headers = signedHeaders({
    api_key: credentials.api_key,
    signing_secret: credentials.signing_secret,
    method: 'GET',
    target,
    body: '',
    timestamp_seconds: Math.floor(started.app.clock.now().getTime() / 1000),
    nonce: crypto.randomBytes(12).toString('hex'),
  });
  return fetch(`${started.base_url}${target}`, { headers });
}

interface Sealed {
  sandbox: MerchantCredentials;
  operator_token: string;
  second_key: MerchantCredentials;
  review: CreatedDeposit;
  receipt_id: string;
  image: Buffer;
  deposit_body: string;
  replay: { idempotency_key: string; body: Record<string, unknown>; answer: string };
  webhook_public_key: string;
}

/** What a merchant and a reviewer see; equal before and after a rotation. */
async function observe(started: Started, sealed: Sealed) {
  const { app, base_url } = started;
  for (const credentials of [sealed.sandbox, sealed.second_key]) {
    expect((await signedGet(started, credentials, '/v1/pay/deposits?limit=1')).status).toBe(200);
  }
  const deposit = await signedGet(started, sealed.sandbox, `/v1/pay/deposits/${sealed.review.id}`);
  expect(deposit.status).toBe(200);
  expect(await deposit.text()).toBe(sealed.deposit_body);
  const replayed = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: sealed.replay.idempotency_key, body: sealed.replay.body });
  expect(replayed.headers['idempotency-replayed'] ?? 'true').toBe('true');
  expect(replayed.body).toBe(sealed.replay.answer);
  const image = await fetch(`${base_url}/v1/bo/reviews/${sealed.review.id}/slips/${sealed.receipt_id}/image?white_label_id=${sealed.sandbox.white_label_id}`, {
    headers: { authorization: `Bearer ${sealed.operator_token}` },
  });
  expect(image.status).toBe(200);
  expect(Buffer.from(await image.arrayBuffer()).equals(sealed.image)).toBe(true);
  // The live webhook signing key's private half opens and signs what its published public half verifies.
  const signer = await app.instance.services.webhooks.signingKeys.signer({ white_label_id: sealed.sandbox.white_label_id, livemode: true });
  const message = Buffer.from('rotation check');
  const publicKey = crypto.createPublicKey({ key: Buffer.from(sealed.webhook_public_key, 'base64'), format: 'der', type: 'spki' });
  expect(crypto.verify(null, message, publicKey, crypto.sign(null, message, signer.private_key))).toBe(true);
}

async function sealThingsByUsingTheService(started: Started): Promise<Sealed> {
  const { app, base_url } = started;
  const created = await app.backoffice({ method: 'POST', url: `/v1/bo/merchants/${app.sandbox.merchant_id}/api-keys`, body: { mode: 'test' } });
  expect(created.statusCode, created.body).toBe(201);
  const key = created.json<{ api_key: string; signing_secret: string }>();
  const second_key = { ...app.sandbox, api_key: key.api_key, signing_secret: key.signing_secret };
  const published = await fetch(`${base_url}/v1/webhooks/signing-keys`);
  // The live set is listed first, and a new database has one key in it.
  const live = ((await published.json()) as { keys: { public_key: string }[] }).keys[0];
  expect(live).toBeDefined();
  const review = await createDeposit(app, { amount_minor: 11_000, sender: { bank_code: '004', account_number: '7700000001', account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' } });
  const transfer = await sandboxTransfer(app, review, { sender: { bank_code: '004', account_number: '7700000001', account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } });
  const image = slipBytes(transfer);
  expect((await uploadMultipart(app, review.slip_upload, image)).statusCode).toBe(202);
  await runJobs(app);
  const { rows } = await app.testDatabase.database.query<{ receipt_id: string }>('SELECT receipt_id FROM slip_receipts WHERE deposit_id = $1', [review.id]);
  const deposit = await signedGet(started, app.sandbox, `/v1/pay/deposits/${review.id}`);
  const deposit_body = await deposit.text();
  expect((JSON.parse(deposit_body) as { status: string }).status).toBe('under_review');
  const replayBody = { amount_minor: 12_000, currency: 'THB', merchant_reference: 'rotation-replay', end_user_ref: 'rotation-user', sender: { bank_code: '002', account_number: '1234500001', account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' }, client: { device_fingerprint: 'rotation-device', ip: '203.0.113.9', user_agent: 'rotation' } };
  const idempotency_key = crypto.randomUUID();
  const first = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key, body: replayBody });
  expect(first.statusCode, first.body).toBe(201);
  return {
    sandbox: app.sandbox,
    operator_token: app.operator_token,
    second_key,
    review,
    receipt_id: rows[0]!.receipt_id,
    image,
    deposit_body,
    replay: { idempotency_key, body: replayBody, answer: first.body },
    webhook_public_key: live!.public_key,
  };
}

/** Steps 3 and 4 of the procedure: status, rotate (in small batches), rotate again (nothing left), status. */
async function rotateWithTheCli(storage: Storage, keys: { current: Buffer; previous: Buffer[] }): Promise<void> {
  // The operator's check before and after the rotation command (the service is stopped on PGlite, whose
  // directory one process holds; on PostgreSQL it could stay up).
  const before = await cli(storage, ['status', '--json'], keys);
  expect(before.code, before.stderr).toBe(0);
  const statusBefore = JSON.parse(before.stdout) as { current_key_id: string; previous_key_ids: string[]; stale_values: number; previous_key_still_needed: boolean; columns: { column: string; stale: number }[] };
  expect(statusBefore.current_key_id).toBe(masterKeyId(keys.current));
  expect(statusBefore.previous_key_ids).toEqual(keys.previous.map((key) => masterKeyId(key)));
  expect(statusBefore.previous_key_still_needed).toBe(true);
  const staleBefore = Object.fromEntries(statusBefore.columns.map((column) => [column.column, column.stale]));
  for (const column of ['master_key_derivation.key_sealed', 'api_keys.signing_secret_sealed', 'webhook_signing_keys.private_key_sealed', 'deposit_orders.sender_account_sealed', 'slip_receipts.wrapped_key', 'slip_receipts.transfer_sealed', 'idempotency_records.response_body']) {
    expect(staleBefore[column], `${column} in ${JSON.stringify(staleBefore)}`).toBeGreaterThan(0);
  }

  // Small batches, so that the walk over several batches per table is what runs.
  const rotated = await cli(storage, ['rotate', '--batch-size', '2', '--json'], keys);
  expect(rotated.code, rotated.stderr).toBe(0);
  const rotation = JSON.parse(rotated.stdout) as { resealed: number; failed: number; columns: { column: string; resealed: number }[] };
  expect(rotation.failed).toBe(0);
  expect(rotation.resealed).toBe(statusBefore.stale_values);
  for (const column of rotation.columns) expect(column.resealed, column.column).toBe(staleBefore[column.column]);

  const again = await cli(storage, ['rotate', '--json'], keys);
  expect(again.code, again.stderr).toBe(0);
  expect((JSON.parse(again.stdout) as { resealed: number }).resealed).toBe(0);
  const after = await cli(storage, ['status'], keys);
  expect(after.code, after.stderr).toBe(0);
  expect(after.stdout).toContain('MASTER_KEY_PREVIOUS can be removed');
}

/** A key set that does not hold the database's key is refused by the start's check and by the CLI, naming only key ids. */
async function expectRefused(storage: Storage, current: Buffer, database_key: Buffer): Promise<void> {
  const database = await storage.open();
  try {
    const refused = await resolveDerivationKey(database, { current, previous: [] }, new Date()).then(() => null, (error: unknown) => error);
    expect(refused).toBeInstanceOf(MasterKeyMismatch);
    expect((refused as Error).message).toContain(`master key ${masterKeyId(database_key)}`);
    expect((refused as Error).message).not.toContain(database_key.toString('base64'));
  } finally {
    await database.close();
  }
  const status = await cli(storage, ['status'], { current, previous: [] });
  expect(status.code).toBe(1);
  expect(status.stderr).toMatch(/master_key_unusable: MASTER_KEY and MASTER_KEY_PREVIOUS do not open this database/);
}

describe('rotating MASTER_KEY', () => {
  let storage: Storage;
  let sealed: Sealed;

  beforeAll(async () => {
    storage = await createStorage();
  }, 240_000);

  afterAll(async () => {
    await storage.cleanup();
  });

  it('keeps everything working from the old key, through both keys and a rotation, to the new key alone', async () => {
    const first = await startService(storage, OLD_KEY, []);
    try {
      sealed = await sealThingsByUsingTheService(first);
    } finally {
      await first.app.close();
    }

    const both = await startService(storage, NEW_KEY, [OLD_KEY], sealed);
    try {
      await observe(both, sealed);
      // New values are sealed under the new key from now on, beside the old ones.
      const fresh = await createDeposit(both.app, { amount_minor: 13_000 });
      const { rows } = await both.app.testDatabase.database.query<{ sealed: string }>('SELECT sender_account_sealed AS sealed FROM deposit_orders WHERE deposit_id = $1', [fresh.id]);
      expect(rows[0]!.sealed.startsWith(`v2.${masterKeyId(NEW_KEY)}.`)).toBe(true);
    } finally {
      await both.app.close();
    }

    await rotateWithTheCli(storage, { current: NEW_KEY, previous: [OLD_KEY] });

    const alone = await startService(storage, NEW_KEY, [], sealed);
    try {
      await observe(alone, sealed);
    } finally {
      await alone.app.close();
    }

    // A key set without the database's key: the old key alone (a rollback of the configuration after the
    // rotation) and a stranger's key are refused before anything is served, and by the CLI.
    for (const current of [OLD_KEY, STRANGER_KEY]) await expectRefused(storage, current, NEW_KEY);
  }, 600_000);
});
