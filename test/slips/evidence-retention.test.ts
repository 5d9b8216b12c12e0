import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import { startLocalS3, type LocalS3 } from '../support/s3.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { DAY_MS } from '../../src/platform/time.ts';
import { EVIDENCE_RETENTION_TASK } from '../../src/slips/retention.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * The evidence retention (EVIDENCE_RETENTION_DAYS) through the job worker: slips are uploaded at the
 * payer's address and processed, the clock moves past the retention, the worker's housekeeping schedules
 * the hourly job and the worker runs it. The old image of a settled order is purged (gone from its store,
 * its wrapped key erased, 410 `slip_evidence_purged` at both image reads, `evidence_purged_at` on the review
 * desk); the old images of an order under review, with an open claim and with an unresolved dispute are
 * kept, and so is a recent one. Once the claim is decided, the next run purges its order's image too.
 * On the S3 store (s3rver) and on the default PostgreSQL store.
 */

const RETENTION_DAYS = 90;

interface Uploaded {
  deposit_id: string;
  receipt_id: string;
  owner: MerchantCredentials;
  image: Buffer;
}

/** Uploads a slip of `options.paid` (the order's amount by default) and runs the worker; `sender` overrides the transfer's sender. */
async function paidOrder(app: TestApp, owner: MerchantCredentials, options: { amount_minor?: number; paid_minor?: number; sender?: Record<string, string> } = {}): Promise<Uploaded> {
  const declared = { bank_code: '004', account_number: `81${crypto.randomInt(10_000_000, 99_999_999)}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
  const order = await createDeposit(app, { amount_minor: options.amount_minor ?? 12_000, credentials: owner, sender: declared });
  const transfer = await sandboxTransfer(app, order, { ...(options.paid_minor === undefined ? {} : { amount_minor: options.paid_minor }), ...(options.sender ? { sender: { ...declared, ...options.sender } } : {}) }, owner);
  const image = slipBytes(transfer);
  const uploaded = await uploadMultipart(app, order.slip_upload, image);
  expect(uploaded.statusCode, uploaded.body).toBe(202);
  await runJobs(app);
  return { deposit_id: order.id, receipt_id: uploaded.json<{ receipt_id: string }>().receipt_id, owner, image };
}

/** A deposit that filled a withdrawal of its own brand, disputed by the withdrawer with evidence: open past its deadline. */
async function disputedOrder(app: TestApp): Promise<Uploaded & { dispute_id: string }> {
  const withdrawer = await app.createMerchant();
  const depositor = await app.createMerchant({ white_label_id: withdrawer.white_label_id });
  await fundAvailable(app, accountOf(withdrawer), 1_000_000);
  const beneficiary_id = await verifiedBeneficiary(app, accountOf(withdrawer));
  const reference = `wd-${crypto.randomBytes(6).toString('hex')}`;
  const created = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    credentials: withdrawer,
    body: { amount_minor: 12_000, currency: 'THB', merchant_reference: reference, end_user_ref: `payee-${reference}`, beneficiary_id },
  });
  expect(created.statusCode, created.body).toBe(201);
  const paid = await paidOrder(app, depositor);
  const withdrawal = (await app.signed({ url: `/v1/pay/withdrawals/${created.json<WithdrawalView>().id}`, credentials: withdrawer })).json<WithdrawalView>();
  const leg_ref = withdrawal.fills?.[0]?.leg_ref;
  expect(leg_ref).toBeDefined();
  const opened = await app.signed({
    method: 'POST',
    url: `/v1/pay/withdrawals/${withdrawal.id}/disputes`,
    idempotency_key: crypto.randomUUID(),
    credentials: withdrawer,
    body: { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED', note: 'The payee says nothing arrived' },
  });
  expect(opened.statusCode, opened.body).toBe(201);
  const dispute_id = opened.json<WithdrawalView>().dispute!.id;
  const evidence = await app.signed({
    method: 'POST',
    url: `/v1/pay/disputes/${dispute_id}/evidence`,
    idempotency_key: crypto.randomUUID(),
    credentials: withdrawer,
    body: { kind: 'bank_statement_line', reference: 'STMT-2026-08-01-0042', note: 'No credit of this amount on the statement' },
  });
  expect(evidence.statusCode, evidence.body).toBe(202);
  return { ...paid, dispute_id };
}

function merchantImage(app: TestApp, order: Uploaded) {
  return app.signed({ url: `/v1/pay/deposits/${order.deposit_id}/slip`, credentials: order.owner });
}

function reviewerImage(app: TestApp, order: Uploaded) {
  return app.backoffice({ url: `/v1/bo/reviews/${order.deposit_id}/slips/${order.receipt_id}/image?white_label_id=${order.owner.white_label_id}` });
}

async function receiptState(app: TestApp, order: Uploaded) {
  const { rows } = await app.testDatabase.database.query<{ purged: boolean; wrapped_key: string | null; blob_store: string | null; blob_rows: number }>(
    `SELECT evidence_purged_at IS NOT NULL AS purged, wrapped_key, blob_store,
            (SELECT count(*)::integer FROM slip_blobs b WHERE b.white_label_id = r.white_label_id AND b.blob_key = r.receipt_id) AS blob_rows
       FROM slip_receipts r WHERE receipt_id = $1`,
    [order.receipt_id],
  );
  return rows[0]!;
}

/** Moves the clock to the next top of the hour and lets the worker run what fell due: the retention's run among it. */
async function runRetention(app: TestApp): Promise<void> {
  await app.instance.housekeep();
  const { rows } = await app.testDatabase.database.query<{ run_at: Date }>(`SELECT run_at FROM jobs WHERE task = $1 AND status = 'pending' ORDER BY run_at LIMIT 1`, [EVIDENCE_RETENTION_TASK]);
  expect(rows).toHaveLength(1);
  app.clock.set(new Date(rows[0]!.run_at));
  await runJobs(app);
}

async function expectKept(app: TestApp, order: Uploaded): Promise<void> {
  const read = await merchantImage(app, order);
  expect(read.statusCode, read.body).toBe(200);
  expect(read.rawPayload.equals(order.image)).toBe(true);
  expect((await receiptState(app, order)).purged).toBe(false);
}

async function expectPurged(app: TestApp, order: Uploaded): Promise<void> {
  const merchantRead = await merchantImage(app, order);
  expect(merchantRead.statusCode).toBe(410);
  expect(errorOf(merchantRead)).toMatchObject({ code: 'slip_evidence_purged', details: { receipt_id: order.receipt_id } });
  const reviewerRead = await reviewerImage(app, order);
  expect(reviewerRead.statusCode).toBe(410);
  expect(errorOf(reviewerRead).code).toBe('slip_evidence_purged');
  const detail = await app.backoffice({ url: `/v1/bo/reviews/${order.deposit_id}?white_label_id=${order.owner.white_label_id}` });
  expect(detail.statusCode, detail.body).toBe(200);
  expect(detail.json<{ slips: unknown[] }>().slips).toEqual([
    expect.objectContaining({ receipt_id: order.receipt_id, media_type: 'image/png', evidence_purged_at: expect.any(String), image_url: null, outcome: expect.any(String) }),
  ]);
  expect(await receiptState(app, order)).toEqual({ purged: true, wrapped_key: null, blob_store: null, blob_rows: 0 });
}

function retentionSuite(store: 's3' | 'postgres'): void {
  describe(`the evidence retention with the ${store} store`, () => {
    let s3: LocalS3 | null = null;
    let app: TestApp;
    const logLines: string[] = [];

    beforeAll(async () => {
      s3 = store === 's3' ? await startLocalS3() : null;
      app = await createTestApp({
        config: { ...(s3?.config ?? {}), EVIDENCE_RETENTION_DAYS: String(RETENTION_DAYS) },
        logger: createLogger('info', { write: (line: string) => void logLines.push(line) }),
      });
    });
    afterAll(async () => {
      await app?.close();
      await s3?.close();
    });

    const objectKey = (order: Uploaded) => `slips/${order.owner.white_label_id}/${order.receipt_id}`;

    it('purges an old settled image, keeps those of an open review, claim and dispute and a recent one; a decided claim releases its image', async () => {
      const owner = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
      const settled = await paidOrder(app, owner);
      expect((await getDeposit(app, settled.deposit_id, owner)).status).toBe('settled');
      const reviewed = await paidOrder(app, owner, { sender: { account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } });
      expect((await getDeposit(app, reviewed.deposit_id, owner)).status).toBe('under_review');
      const overpaid = await paidOrder(app, owner, { amount_minor: 11_600, paid_minor: 12_100 });
      const claim_id = (await getDeposit(app, overpaid.deposit_id, owner)).overpayment?.claim_id;
      expect(claim_id).toMatch(/^clm_/);
      const disputed = await disputedOrder(app);

      app.clock.advance((RETENTION_DAYS + 1) * DAY_MS);
      await runJobs(app);
      const recent = await paidOrder(app, owner);
      const objectsBefore = s3 === null ? [] : await s3.keys();
      await runRetention(app);

      await expectPurged(app, settled);
      for (const kept of [reviewed, overpaid, disputed, recent]) await expectKept(app, kept);
      if (s3 !== null) {
        expect(objectsBefore).toContain(objectKey(settled));
        expect(await s3.keys()).toEqual(objectsBefore.filter((key) => key !== objectKey(settled)));
      }
      const runs = logLines.filter((line) => line.includes('slip evidence retention run'));
      expect(runs).toHaveLength(1);
      expect(JSON.parse(runs[0]!)).toMatchObject({ retention_days: RETENTION_DAYS, examined: 4, purged: 1, kept_for_open_cases: 3, blobs_deleted: s3 === null ? 0 : 1, complete: true });
      for (const order of [settled, reviewed, overpaid, disputed, recent]) for (const id of [order.deposit_id, order.receipt_id, order.owner.merchant_id]) expect(runs[0]).not.toContain(id);

      // The claim decided, the next hour's run purges its order's image; the others stay as they were.
      const system = { actor_type: 'system' as const, actor_id: 'retention-test', request_id: null };
      const operator = await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: owner.white_label_id, role: 'operator', name: 'Operator' });
      const resolved = await app.backoffice({
        method: 'POST',
        url: `/v1/bo/claims/${claim_id}/resolve`,
        body: { resolution_code: 'refunded_to_payer', note: 'ผู้โอนยืนยันทางโทรศัพท์ ร้านค้าคืนเงินให้แล้วนอกระบบ ref 42' },
        token: operator.token,
      });
      expect(resolved.statusCode, resolved.body).toBe(200);
      await runRetention(app);
      await expectPurged(app, overpaid);
      for (const kept of [reviewed, disputed, recent]) await expectKept(app, kept);
      await expectPurged(app, settled);
    });
  });
}

retentionSuite('s3');
retentionSuite('postgres');
