import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { closedPort, startLocalS3, type LocalS3 } from '../support/s3.ts';
import { loadConfig } from '../../src/platform/config.ts';

/**
 * The S3 evidence store (SLIP_EVIDENCE_STORE=s3) against a real S3-compatible server (s3rver), through the
 * upload address a payer uses: the object holds only ciphertext under `<prefix><brand>/<receipt id>`, the
 * worker settles the order from it, and the merchant's and the reviewer's image reads answer the bytes. A
 * store that is down answers the spec's 503 and leaves no receipt; an upload refused after its object was
 * written (the slip limit), and a replay, leave no object behind.
 */

let s3: LocalS3;
let app: TestApp;

beforeAll(async () => {
  s3 = await startLocalS3();
  app = await createTestApp({ config: s3.config });
});
afterAll(async () => {
  await app?.close();
  await s3?.close();
});

async function receiptRows(deposit_id: string): Promise<{ receipt_id: string; blob_store: string | null }[]> {
  const { rows } = await app.testDatabase.database.query<{ receipt_id: string; blob_store: string | null }>(
    'SELECT receipt_id, blob_store FROM slip_receipts WHERE deposit_id = $1 ORDER BY received_at, receipt_id',
    [deposit_id],
  );
  return rows;
}

describe('slip evidence in an S3 object store', () => {
  it('keeps only ciphertext in the bucket under brand and receipt id; the order settles and both image reads answer the bytes', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const transfer = await sandboxTransfer(app, order);
    const png = slipBytes(transfer);
    const uploaded = await uploadMultipart(app, order.slip_upload, png);
    expect(uploaded.statusCode, uploaded.body).toBe(202);
    const { receipt_id } = uploaded.json<{ receipt_id: string }>();

    const key = `slips/${app.sandbox.white_label_id}/${receipt_id}`;
    expect(await s3.keys()).toContain(key);
    const stored = await s3.object(key);
    expect(stored?.length).toBe(png.length + 28);
    expect(stored!.includes(png.subarray(0, 16))).toBe(false);
    // The key names ids only: no account number, reference or payload of the transfer.
    for (const secret of [transfer.trans_ref, transfer.slip.payload, order.slip_upload.token]) expect(key).not.toContain(secret);
    expect(await receiptRows(order.id)).toEqual([{ receipt_id, blob_store: 's3' }]);
    const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM slip_blobs');
    expect(rows[0]?.count).toBe(0);

    await runJobs(app);
    expect((await getDeposit(app, order.id)).status).toBe('settled');
    const merchantRead = await app.signed({ url: `/v1/pay/deposits/${order.id}/slip` });
    expect(merchantRead.statusCode).toBe(200);
    expect(merchantRead.rawPayload.equals(png)).toBe(true);
    const reviewerRead = await app.backoffice({ url: `/v1/bo/reviews/${order.id}/slips/${receipt_id}/image?white_label_id=${app.sandbox.white_label_id}` });
    expect(reviewerRead.statusCode, reviewerRead.body).toBe(200);
    expect(reviewerRead.headers['content-type']).toBe('image/png');
    expect(reviewerRead.rawPayload.equals(png)).toBe(true);
  });

});

describe('objects of uploads that made no receipt', () => {
  it('a replay answers the first receipt and leaves one object; an upload refused by the slip limit leaves none', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000, expires_in_seconds: 3_600 });
    const png = slipBytes(await sandboxTransfer(app, order));
    const idempotency_key = crypto.randomUUID();
    const first = await uploadMultipart(app, order.slip_upload, png, { idempotency_key });
    expect(first.statusCode, first.body).toBe(202);
    const before = await s3.keys();
    const replay = await uploadMultipart(app, order.slip_upload, png, { idempotency_key });
    expect(replay.statusCode).toBe(202);
    expect(replay.headers['idempotent-replay']).toBe('true');
    expect(replay.json()).toEqual(first.json());
    expect(await s3.keys()).toEqual(before);

    // Two more uploads reach the limit of three; the fourth is refused after its object was written.
    for (let upload = 0; upload < 2; upload += 1) expect((await uploadMultipart(app, order.slip_upload, png)).statusCode).toBe(202);
    const full = await s3.keys();
    const refused = await uploadMultipart(app, order.slip_upload, png);
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused).code).toBe('slip_limit_reached');
    expect(await s3.keys()).toEqual(full);
    const receipts = await receiptRows(order.id);
    expect(receipts).toHaveLength(3);
    expect(full.filter((key) => receipts.some((receipt) => key.endsWith(`/${receipt.receipt_id}`)))).toHaveLength(3);
  });

});

describe('an object store that is down', () => {
  it('an object store that does not answer: 503 slip_intake_unavailable, and no receipt, job or idempotency record is left', async () => {
    const port = await closedPort();
    const down = await createTestApp({
      config: { ...s3.config, SLIP_EVIDENCE_S3_ENDPOINT: `http://127.0.0.1:${port}`, SLIP_EVIDENCE_S3_TIMEOUT_MS: '2000', SLIP_EVIDENCE_S3_MAX_ATTEMPTS: '2' },
    });
    try {
      const order = await createDeposit(down, { amount_minor: 12_000 });
      const png = slipBytes(await sandboxTransfer(down, order));
      const idempotency_key = crypto.randomUUID();
      const failed = await uploadMultipart(down, order.slip_upload, png, { idempotency_key });
      expect(failed.statusCode).toBe(503);
      expect(errorOf(failed).code).toBe('slip_intake_unavailable');
      expect(failed.headers['retry-after']).toBe('1');
      const { rows } = await down.testDatabase.database.query<{ receipts: number; jobs: number; records: number }>(
        `SELECT (SELECT count(*)::integer FROM slip_receipts) AS receipts, (SELECT count(*)::integer FROM jobs WHERE task = 'slips.process') AS jobs,
                (SELECT count(*)::integer FROM idempotency_records WHERE merchant_id LIKE 'capability:%') AS records`,
      );
      expect(rows[0]).toEqual({ receipts: 0, jobs: 0, records: 0 });
      expect(await getDeposit(down, order.id)).toMatchObject({ status: order.status, version: order.version });
    } finally {
      await down.close();
    }
  });
});

describe('configuration of the S3 store and the retention', () => {
  it('needs a bucket, both halves of a credential or neither, and a retention of at least 90 days; no secret in the message', () => {
    const secret = 'a-secret-that-must-not-be-printed';
    expect(() => loadConfig({ SLIP_EVIDENCE_STORE: 's3' })).toThrow(/SLIP_EVIDENCE_S3_BUCKET is required/);
    expect(() => loadConfig({ SLIP_EVIDENCE_STORE: 's3', SLIP_EVIDENCE_S3_BUCKET: 'ev' })).toThrow(/SLIP_EVIDENCE_S3_BUCKET/);
    let message = '';
    try {
      loadConfig({ SLIP_EVIDENCE_STORE: 's3', SLIP_EVIDENCE_S3_BUCKET: 'evidence', SLIP_EVIDENCE_S3_SECRET_ACCESS_KEY: secret });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/set together or not at all/);
    expect(message).not.toContain(secret);
    expect(() => loadConfig({ EVIDENCE_RETENTION_DAYS: '7' })).toThrow(/EVIDENCE_RETENTION_DAYS/);
    expect(() => loadConfig({ SLIP_EVIDENCE_S3_PREFIX: '../other/' })).toThrow(/SLIP_EVIDENCE_S3_PREFIX/);
    expect(loadConfig({}).evidence_retention_days).toBeNull();
    expect(loadConfig({}).slip_evidence_s3).toBeNull();
    expect(loadConfig({ ...s3.config, EVIDENCE_RETENTION_DAYS: '1830' })).toMatchObject({
      slip_evidence_store: 's3',
      evidence_retention_days: 1830,
      slip_evidence_s3: { bucket: 'slip-evidence', prefix: 'slips/', force_path_style: true, timeout_ms: 10_000, max_attempts: 3 },
    });
  });
});
