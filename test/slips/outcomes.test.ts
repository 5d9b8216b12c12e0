import crypto from 'node:crypto';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { holdInTransaction, untilALockIsWaitedFor, usingPostgres } from '../support/database.ts';
import {
  createDeposit,
  eventTypesOf,
  getDeposit,
  runJobs,
  sandboxTransfer,
  slipBytes,
  uploadJson,
  uploadMultipart,
  depositPolicyBody,
  type CreatedDeposit,
  withdrawalOf,
} from '../support/slips.ts';
import { renderSlipImage } from '../../src/sandbox/slip-image.ts';
import { forgetBankList } from '../../src/banks/service.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';

/**
 * The slip pipeline through the doors users use (issue 10, "Done when"): a merchant creates a sandbox
 * deposit over signed HTTP, the sandbox bank makes the transfer and hands back a real slip image, the
 * end user uploads it to `upload_url` with the capability (multipart, JSON base64 or reference only),
 * and the real job worker claims, reads the pixels, asks the sandbox bank, and settles or sends the
 * order to review. Each outcome of the spec's table is checked on the order, its events, the wallet and
 * the withdrawal the deposit pays.
 */

let app: TestApp;
let counter = 0;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

async function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

function declaredSender() {
  counter += 1;
  return { bank_code: '004', account_number: `71${String(counter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
}

async function deposit(credentials: MerchantCredentials, amount_minor: number, sender = declaredSender()): Promise<CreatedDeposit & { declared: typeof sender }> {
  return { ...(await createDeposit(app, { amount_minor, credentials, sender })), declared: sender };
}

/** Uploads the image as multipart, runs the worker, and reads the order back. */
async function uploadAndProcess(order: CreatedDeposit, credentials: MerchantCredentials, image: Buffer, options: { payload?: string } = {}) {
  const response = await uploadMultipart(app, order.slip_upload, image, options);
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  return getDeposit(app, order.id, credentials);
}

async function balanceOf(credentials: MerchantCredentials) {
  return (await app.signed({ url: '/v1/pay/balance', credentials })).json<{ available_minor: number; pending_clearing_minor: number }>();
}

async function balanceEvents(credentials: MerchantCredentials): Promise<string[]> {
  const { rows } = await app.testDatabase.database.query<{ type: string }>("SELECT type FROM events WHERE merchant_id = $1 AND type LIKE 'balance.%' ORDER BY sequence", [
    credentials.merchant_id,
  ]);
  return rows.map((row) => row.type);
}

async function receiptsOf(order: { id: string }) {
  const { rows } = await app.testDatabase.database.query<{ outcome: string | null; status: string; verification: Record<string, unknown> | null; transfer_sealed: string | null }>(
    'SELECT outcome, status, verification, transfer_sealed FROM slip_receipts WHERE deposit_id = $1 ORDER BY received_at, receipt_id',
    [order.id],
  );
  return rows;
}

/** A new order of `amount_minor` with its sandbox slip uploaded (202) and not processed yet. */
async function orderWithUploadedSlip(amount_minor: number) {
  const owner = await merchant();
  const order = await deposit(owner, amount_minor);
  const transfer = await sandboxTransfer(app, order, {}, owner);
  const accepted = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
  expect(accepted.statusCode, accepted.body).toBe(202);
  return { owner, order, transfer };
}

/** Runs the worker while `holder` holds its locks, and lets the holder commit once the worker waits for one of them. */
async function runJobsPastHolder(holder: ReturnType<typeof holdInTransaction>): Promise<void> {
  await holder.held;
  const processing = runJobs(app);
  await untilALockIsWaitedFor(app.instance.services.database);
  holder.release();
  await holder.done;
  await processing;
}

describe('settled from the pixels', () => {
  it('multipart: the sandbox slip settles the order, credits the wallet and fills the withdrawal', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const before = await withdrawalOf(app, order);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    expect(transfer).toMatchObject({ object: 'sandbox_bank_transfer', amount_minor: 12_000, livemode: false, slip: { media_type: 'image/png' } });
    const settled = await uploadAndProcess(order, owner, slipBytes(transfer));
    expect(settled).toMatchObject({
      status: 'settled',
      settled_via: 'auto',
      partial: false,
      transferred_amount_minor: 12_000,
      amount_received_minor: 12_000,
      overpayment: null,
      verification: { amount_exact: true, within_time_window: true, sender_bank_match: true, sender_account_match: true, sender_name_match: true, receiver_match: true },
      slip: { is_late: false, attempts_left: 2 },
      legs: [{ leg_status: 'complete' }],
    });
    expect(await eventTypesOf(app, order.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.settled']);
    expect(await balanceEvents(owner)).toEqual(['balance.credited']);
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: settled.credited_amount_minor, available_minor: 0 });
    const after = await withdrawalOf(app, order);
    expect(after).toMatchObject({ leg_status: 'filled', filled_minor: before.filled_minor + 12_000 });
    expect(await eventTypesOf(app, after.withdrawal_id)).toContain('withdrawal.filled');
    // The sender the slip proved is registered for the end user.
    const senders = (await app.signed({ url: `/v1/pay/senders?end_user_ref=${encodeURIComponent(order.end_user_ref)}`, credentials: owner })).json<{ data: unknown[] }>();
    expect(senders.data).toHaveLength(1);
    const [receipt] = await receiptsOf(order);
    expect(receipt).toMatchObject({ status: 'processed', outcome: 'settled', verification: { source: 'pixels', bank: 'found', duplicate: false } });
  });

  it('JSON base64 (with line breaks) settles the same way; JPEG slips read too', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const transfer = await sandboxTransfer(app, order, { image_format: 'jpeg' }, owner);
    expect(transfer.slip.media_type).toBe('image/jpeg');
    const wrapped = transfer.slip.image_base64.replace(/(.{76})/g, '$1\r\n');
    const response = await uploadJson(app, order.slip_upload, { image_base64: wrapped });
    expect(response.statusCode, response.body).toBe(202);
    await runJobs(app);
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'settled', settled_via: 'auto', amount_received_minor: 12_000 });
  });

  it("a client's valid payload is used: an image without a readable QR still settles", async () => {
    const owner = await merchant();
    const order = await deposit(owner, 10_100);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    // Cropping the bottom (where the QR is) leaves a slip image no reader can use.
    const topHalf = await sharp(slipBytes(transfer)).extract({ left: 0, top: 0, width: 720, height: 640 }).png().toBuffer();
    const settled = await uploadAndProcess(order, owner, topHalf, { payload: transfer.slip.payload });
    expect(settled).toMatchObject({ status: 'settled' });
    expect((await receiptsOf(order))[0]?.verification).toMatchObject({ source: 'client_payload' });
  });

  it('a slip re-encoded, scaled and photographed still reads from its pixels', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 10_200);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    const photographed = await sharp(slipBytes(transfer)).resize({ width: 540 }).rotate(3, { background: '#d8d4cc' }).jpeg({ quality: 70 }).toBuffer();
    expect(await uploadAndProcess(order, owner, photographed)).toMatchObject({ status: 'settled' });
  });
});

describe('amounts', () => {
  it('short-pay: settled automatically at V (partial), the rest of the leg returns to the withdrawal', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const before = await withdrawalOf(app, order);
    const settled = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, { amount_minor: 9_000 }, owner)));
    expect(settled).toMatchObject({
      status: 'settled',
      settled_via: 'auto',
      partial: true,
      ordered_amount_minor: 12_000,
      transferred_amount_minor: 9_000,
      amount_received_minor: 9_000,
      overpayment: null,
      verification: { amount_exact: false, receiver_match: true },
    });
    expect(settled.credited_amount_minor).toBe(9_000 - (settled.fee_total_minor ?? 0));
    const after = await withdrawalOf(app, order);
    expect(after.filled_minor - before.filled_minor).toBe(9_000);
  });

  it('same-slip overpayment: one deposit.settled with A = X and the excess E as an open claim', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 11_600);
    const settled = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, { amount_minor: 12_100 }, owner)));
    expect(settled).toMatchObject({
      status: 'settled',
      partial: false,
      transferred_amount_minor: 12_100,
      amount_received_minor: 11_600,
      overpayment: { cause: 'same_transfer_excess', amount_minor: 500, status: 'open', action_required: 'contact_support' },
    });
    expect(await eventTypesOf(app, order.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.settled']);
  });
});

describe('to review', () => {
  it('reference only: always under_review with NO_SLIP_IMAGE, the bank answer kept for the reviewer', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    const response = await uploadJson(app, order.slip_upload, { trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, occurred_at: transfer.occurred_at });
    expect(response.statusCode, response.body).toBe(202);
    await runJobs(app);
    const reviewed = await getDeposit(app, order.id, owner);
    expect(reviewed).toMatchObject({ status: 'under_review', review: { escalated: false, four_eyes_required: false } });
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(['NO_SLIP_IMAGE']);
    expect(reviewed.review?.reasons[0]).toMatchObject({ actionable_by: 'end_user', display_th: expect.any(String), display_en: expect.any(String) });
    expect(await eventTypesOf(app, order.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.under_review']);
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: 0 });
    const [receipt] = await receiptsOf(order);
    expect(receipt).toMatchObject({ outcome: 'under_review', verification: { source: 'reference_fields', bank: 'found' } });
    expect(receipt?.transfer_sealed).toMatch(/^v2\./);
  });

  it("reasons[0]: NO_SLIP_IMAGE first for a reference-only slip, then the spec's order, our own codes last", async () => {
    const owner = await merchant();
    // A reference-only slip of a transfer from another name to another receiver: every finding listed, NO_SLIP_IMAGE first.
    const order = await deposit(owner, 12_000);
    const sender = { ...order.declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' };
    const receiver = { bank_code: '069', account_number: '2009998887', account_name_th: 'ศิริพร ใจงาม' };
    const transfer = await sandboxTransfer(app, order, { sender, receiver }, owner);
    const response = await uploadJson(app, order.slip_upload, { trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, occurred_at: transfer.occurred_at });
    expect(response.statusCode, response.body).toBe(202);
    await runJobs(app);
    const reviewed = await getDeposit(app, order.id, owner);
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(['NO_SLIP_IMAGE', 'SENDER_NAME_MISMATCH', 'RECEIVER_MISMATCH']);
    expect(reviewed.review?.reasons[0]).toMatchObject({ actionable_by: 'end_user' });
    // A reference the bank does not know: NO_SLIP_IMAGE before our own TRANSFER_NOT_FOUND.
    const unknown = await deposit(owner, 12_000);
    const unknownResponse = await uploadJson(app, unknown.slip_upload, { trans_ref: '20260801004UNKNOWN0001', sending_bank_code: '004', occurred_at: transfer.occurred_at });
    expect(unknownResponse.statusCode, unknownResponse.body).toBe(202);
    await runJobs(app);
    expect((await getDeposit(app, unknown.id, owner)).review?.reasons.map((reason) => reason.code)).toEqual(['NO_SLIP_IMAGE', 'TRANSFER_NOT_FOUND']);
    // From the pixels: the spec's SENDER_NAME_MISMATCH before its RECEIVER_MISMATCH, our SENDER_ACCOUNT_MISMATCH after both.
    const image = await deposit(owner, 12_000);
    const elsewhere = { sender: { ...image.declared, account_number: '7199999999', account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' }, receiver };
    const fromPixels = await uploadAndProcess(image, owner, slipBytes(await sandboxTransfer(app, image, elsewhere, owner)));
    expect(fromPixels.review?.reasons.map((reason) => reason.code)).toEqual(['SENDER_NAME_MISMATCH', 'RECEIVER_MISMATCH', 'SENDER_ACCOUNT_MISMATCH']);
  });

  it('wrong sender name: SENDER_NAME_MISMATCH with the registered name masked; no money moves', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const before = await withdrawalOf(app, order);
    const sender = { ...order.declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' };
    const reviewed = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, { sender }, owner)));
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons).toEqual([expect.objectContaining({ code: 'SENDER_NAME_MISMATCH', actionable_by: 'support', detail: { registered_name_masked: 'สม*** ใจ***' } })]);
    expect(reviewed.verification).toMatchObject({ sender_name_match: false, sender_account_match: true, amount_exact: true, receiver_match: true });
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: 0 });
    expect(await withdrawalOf(app, order)).toMatchObject({ leg_status: 'reserved', filled_minor: before.filled_minor });
  });

  it('a registered sender (sender_id): another account, bank or name settles without review', async () => {
    const owner = await merchant();
    const first = await deposit(owner, 12_000);
    expect(await uploadAndProcess(first, owner, slipBytes(await sandboxTransfer(app, first, {}, owner)))).toMatchObject({ status: 'settled' });
    const senders = (await app.signed({ url: `/v1/pay/senders?end_user_ref=${encodeURIComponent(first.end_user_ref)}`, credentials: owner })).json<{ data: { id: string }[] }>();
    const sender_id = senders.data[0]?.id;
    expect(sender_id).toBeDefined();
    const byRegisteredSender = async (amount_minor: number): Promise<CreatedDeposit> => {
      const response = await app.signed({
        method: 'POST',
        url: '/v1/pay/deposits',
        idempotency_key: crypto.randomUUID(),
        credentials: owner,
        body: {
          amount_minor,
          currency: 'THB',
          merchant_reference: `registered-${crypto.randomUUID()}`,
          end_user_ref: first.end_user_ref,
          sender_id,
          client: { device_fingerprint: 'device-registered', ip: '203.0.113.7', user_agent: 'slip-test' },
        },
      });
      expect(response.statusCode, response.body).toBe(201);
      return response.json<CreatedDeposit>();
    };
    // Spec, POST /v1/pay/deposits: sender_id "guarantees no review caused by name or account mismatch".
    const otherAccount = await byRegisteredSender(12_000);
    const fromOtherAccount = { sender: { ...first.declared, account_number: '7199999999', account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } };
    const settled = await uploadAndProcess(otherAccount, owner, slipBytes(await sandboxTransfer(app, otherAccount, fromOtherAccount, owner)));
    expect(settled).toMatchObject({ status: 'settled', settled_via: 'auto', amount_received_minor: 12_000 });
    // The booleans still say what the bank reported.
    expect(settled.verification).toMatchObject({ sender_bank_match: true, sender_account_match: false, sender_name_match: false, amount_exact: true });
    expect(settled).not.toHaveProperty('review');
    // An account is its bank and its number: a transfer from another bank is another account, and is not reviewed either.
    const otherBank = await byRegisteredSender(12_000);
    const fromOtherBank = { sender: { ...first.declared, bank_code: '014', account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } };
    const fromAnotherBank = await uploadAndProcess(otherBank, owner, slipBytes(await sandboxTransfer(app, otherBank, fromOtherBank, owner)));
    expect(fromAnotherBank).toMatchObject({ status: 'settled', settled_via: 'auto' });
    expect(fromAnotherBank.verification).toMatchObject({ sender_bank_match: false, sender_account_match: false, sender_name_match: false });
  });

  it('wrong receiver: RECEIVER_MISMATCH without detail, and the transfer stays free for the order it paid', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const receiver = { bank_code: '069', account_number: '2009998887', account_name_th: 'ศิริพร ใจงาม' };
    const reviewed = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, { receiver }, owner)));
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons[0]).toEqual({
      code: 'RECEIVER_MISMATCH',
      display_th: expect.any(String),
      display_en: expect.any(String),
      actionable_by: 'support',
    });
    expect(reviewed.verification).toMatchObject({ receiver_match: false });
    const { rows } = await app.testDatabase.database.query('SELECT 1 FROM slip_transfers WHERE deposit_id = $1', [order.id]);
    expect(rows).toHaveLength(0);
  });

  it('duplicate: the same slip on a second order is DUPLICATE_SLIP, never a second credit', async () => {
    const owner = await merchant();
    const first = await deposit(owner, 10_300);
    const image = slipBytes(await sandboxTransfer(app, first, {}, owner));
    expect(await uploadAndProcess(first, owner, image)).toMatchObject({ status: 'settled' });
    const second = await deposit(owner, 10_300, first.declared);
    const reviewed = await uploadAndProcess(second, owner, image);
    expect(reviewed.status).toBe('under_review');
    // When the sandbox matched the second order to another payee, the receiver differs too (listed after, as the spec lists it).
    const sameReceiver = JSON.stringify(first.legs[0]?.receiver) === JSON.stringify(second.legs[0]?.receiver);
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(sameReceiver ? ['DUPLICATE_SLIP'] : ['DUPLICATE_SLIP', 'RECEIVER_MISMATCH']);
    expect(await balanceEvents(owner)).toEqual(['balance.credited']);
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: (await getDeposit(app, first.id, owner)).credited_amount_minor });
  });

  it.skipIf(!usingPostgres)('duplicate by a hair: another order claims the transfer while this slip is being decided; the decision is taken again, as DUPLICATE_SLIP', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 10_400);
    const other = await deposit(owner, 10_400);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    const accepted = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
    expect(accepted.statusCode, accepted.body).toBe(202);
    const { database } = app.instance.services;

    // Another order's decision that has claimed the same transfer and not committed yet.
    const otherDecision = holdInTransaction(database, async (tx) => {
      await tx.query(
        `INSERT INTO slip_transfers (white_label_id, livemode, sending_bank_code, trans_ref, deposit_id, receipt_id, amount_minor, created_at)
         VALUES ($1, false, $2, $3, $4, 'slrc_other_decision', $5, now())`,
        [app.sandbox.white_label_id, transfer.sending_bank_code, transfer.trans_ref, other.id, transfer.amount_minor],
      );
    });
    // This slip's decision reads the transfer unclaimed and waits on the other claim.
    await runJobsPastHolder(otherDecision);

    const reviewed = await getDeposit(app, order.id, owner);
    expect(reviewed.status).toBe('under_review');
    // The duplicate is named (the sandbox may have split the order in legs, one of which the transfer paid: AMOUNT_MISMATCH, which the spec lists first, then comes before it).
    const codes = reviewed.review?.reasons.map((reason) => reason.code) ?? [];
    expect([['DUPLICATE_SLIP'], ['AMOUNT_MISMATCH', 'DUPLICATE_SLIP']]).toContainEqual(codes);
    expect(await balanceEvents(owner)).toEqual([]);
    expect((await receiptsOf(order)).map((receipt) => receipt.outcome)).toEqual(['under_review']);
    const { rows: holders } = await database.query<{ deposit_id: string }>('SELECT deposit_id FROM slip_transfers WHERE trans_ref = $1', [transfer.trans_ref]);
    expect(holders).toEqual([{ deposit_id: other.id }]);
  });

  it.skipIf(!usingPostgres)('a receipt another run concludes while this run asks the bank is left as that run left it: no claim, no event, no money', async () => {
    const { owner, order } = await orderWithUploadedSlip(12_100);
    const { database } = app.instance.services;

    // Another run holds the receipt: the worker reads the slip and asks the bank without waiting for it,
    // then its transaction waits for the receipt's lock, and finds the receipt concluded.
    const otherRun = holdInTransaction(database, async (tx) => {
      await tx.query('SELECT receipt_id FROM slip_receipts WHERE deposit_id = $1 FOR UPDATE', [order.id]);
      await tx.query("UPDATE slip_receipts SET status = 'processed', outcome = 'not_applicable', processed_at = now() WHERE deposit_id = $1", [order.id]);
    });
    await runJobsPastHolder(otherRun);

    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'awaiting_payment', version: order.version });
    expect(await eventTypesOf(app, order.id)).toEqual(['deposit.created']);
    expect(await balanceEvents(owner)).toEqual([]);
    expect((await receiptsOf(order)).map((receipt) => receipt.outcome)).toEqual(['not_applicable']);
    // The run found nothing left to do: its job succeeded at once, without a failed attempt.
    const { rows: jobs } = await database.query<{ status: string; last_error: string | null }>(
      "SELECT status, last_error FROM jobs WHERE task = 'slips.process' AND payload->>'deposit_id' = $1",
      [order.id],
    );
    expect(jobs).toEqual([{ status: 'succeeded', last_error: null }]);
  });

  it.skipIf(!usingPostgres)("legs changed while the decision waited for the order's lock: the decision is rolled back and taken again on the legs as they are", async () => {
    const { owner, order } = await orderWithUploadedSlip(12_200);
    const { database } = app.instance.services;

    // A change of the order's legs that holds the order's lock until it is told to commit.
    const change = holdInTransaction(database, async (tx) => {
      await tx.query('SELECT 1 FROM deposit_orders WHERE deposit_id = $1 FOR UPDATE', [order.id]);
      await tx.query("UPDATE deposit_legs SET updated_at = updated_at + interval '1 second' WHERE deposit_id = $1", [order.id]);
    });
    const sent: string[] = [];
    database.statement_observer = (sql) => sent.push(sql);
    try {
      // The decision's first statement locks the receipt and waits for the order; it reads the legs as they were.
      await runJobsPastHolder(change);
    } finally {
      database.statement_observer = null;
    }

    // The feed-lock statement read the legs again, found them changed, and the decision was taken again.
    expect(sent.filter((sql) => sql === 'ROLLBACK')).toHaveLength(1);
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'settled', amount_received_minor: 12_200, legs: [{ leg_status: 'complete' }] });
    expect(await eventTypesOf(app, order.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.settled']);
    expect(await balanceEvents(owner)).toEqual(['balance.credited']);
    expect((await receiptsOf(order)).map((receipt) => receipt.outcome)).toEqual(['settled']);
  });

  it.skipIf(!usingPostgres)("a post on the withdrawer's wallet committed while the decision waited for its feed: the fill's keys are not looked up again", async () => {
    const { owner, order } = await orderWithUploadedSlip(12_300);
    const { database, ledger } = app.instance.services;
    const withdrawal = await withdrawalOf(app, order);
    const { rows } = await database.query<{ merchant_id: string }>('SELECT merchant_id FROM withdrawal_orders WHERE withdrawal_id = $1', [withdrawal.withdrawal_id]);
    const withdrawer = { white_label_id: app.sandbox.white_label_id, merchant_id: rows[0]!.merchant_id, livemode: false };

    // Another transaction posts on the withdrawer's wallet (its feed, then its wallet) and holds both until told.
    const post = holdInTransaction(database, async (tx) => {
      const posted = await ledger.post(tx, {
        account: withdrawer,
        type: 'adjustment',
        amount_minor: 100,
        bucket_from: null,
        bucket_to: 'available',
        movement_key: `test_adjustment:${order.id}`,
        source: { type: 'test', id: order.id },
        cause: SYSTEM_CAUSE,
      });
      expect(posted.ok).toBe(true);
    });
    const sent: string[] = [];
    database.statement_observer = (sql) => sent.push(sql);
    try {
      // The decision's feed-lock statement waits for the withdrawer's feed; its snapshot is older than the post.
      await runJobsPastHolder(post);
    } finally {
      database.statement_observer = null;
    }

    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'settled', amount_received_minor: 12_300 });
    expect(await withdrawalOf(app, order)).toMatchObject({ leg_status: 'filled', filled_minor: withdrawal.filled_minor + 12_300 });
    // The wallet moved after the statement's snapshot, but the fill's keys are posted only under the withdrawal's
    // lock, which the decision held before: their lookup stood, and no key was looked up again.
    expect(sent.filter((sql) => sql.includes('FROM balance_transactions WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND movement_key = $4'))).toEqual([]);
    expect(sent.filter((sql) => sql === 'ROLLBACK')).toEqual([]);
  });

  it('a QR naming a transfer the bank has no record of: TRANSFER_NOT_FOUND', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const forged = await renderSlipImage({
      sending_bank_code: '004',
      trans_ref: '20260801004FORGED0001',
      amount_minor: 12_000,
      occurred_at: app.clock.now(),
      sender: { bank_code: '004', account_number: order.declared.account_number, name_th: 'สมชาย ใจดี' },
      receiver: { bank_code: '025', account_number: '8889990001', name_th: 'วรวุฒิ ประเสริฐศักดิ์' },
    });
    const reviewed = await uploadAndProcess(order, owner, forged.bytes);
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(['TRANSFER_NOT_FOUND']);
    // A mini-QR naming a bank that does not exist names no transfer either.
    const other = await deposit(owner, 12_000);
    const nowhere = await renderSlipImage({
      sending_bank_code: '999',
      trans_ref: '20260801999NOWHERE01',
      amount_minor: 12_000,
      occurred_at: app.clock.now(),
      sender: { bank_code: '999', account_number: other.declared.account_number, name_th: 'สมชาย ใจดี' },
      receiver: { bank_code: '025', account_number: '8889990001', name_th: 'วรวุฒิ ประเสริฐศักดิ์' },
    });
    expect((await uploadAndProcess(other, owner, nowhere.bytes)).review?.reasons.map((reason) => reason.code)).toEqual(['TRANSFER_NOT_FOUND']);
    // The sandbox bank refuses a bank that is not in the list.
    const unknown = await app.signed({
      method: 'POST',
      url: '/v1/test/bank/transfers',
      idempotency_key: crypto.randomUUID(),
      credentials: owner,
      body: { deposit_id: other.id, sender: { bank_code: '999', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }, receiver: { bank_code: '998', account_number: '1234567890', account_name_th: 'ก' } },
    });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().error.details.fields).toEqual([
      { path: 'sender.bank_code', reason: 'unknown_bank' },
      { path: 'receiver.bank_code', reason: 'unknown_bank' },
    ]);
  });

  it("the sender's bank switched off: BANK_DISABLED, without asking it", async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000, { bank_code: '011', account_number: '7700000001', account_name_th: 'ธนพล วงศ์สวัสดิ์', account_name_en: 'Thanaphon Wongsawat' });
    const transfer = await sandboxTransfer(app, order, {}, owner);
    await app.testDatabase.database.query("UPDATE banks SET available = false, message_th = 'ปิดปรับปรุง' WHERE bank_code = '011'");
    forgetBankList();
    try {
      const reviewed = await uploadAndProcess(order, owner, slipBytes(transfer));
      expect(reviewed.review?.reasons).toEqual([expect.objectContaining({ code: 'BANK_DISABLED', detail: { bank_code: '011', cause: 'bank_unavailable' } })]);
    } finally {
      await app.testDatabase.database.query("UPDATE banks SET available = true, message_th = NULL WHERE bank_code = '011'");
      forgetBankList();
    }
  });

  it('a slip for an order in review is attached to the review (version moves, status stays)', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    await uploadJson(app, order.slip_upload, { trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, occurred_at: transfer.occurred_at });
    await runJobs(app);
    const reviewed = await getDeposit(app, order.id, owner);
    const attached = await uploadAndProcess(order, owner, slipBytes(transfer));
    expect(attached).toMatchObject({ status: 'under_review', version: reviewed.version + 1, review: { opened_at: reviewed.review?.opened_at } });
    expect((await eventTypesOf(app, order.id)).at(-1)).toBe('deposit.review_updated');
    expect((await receiptsOf(order)).map((receipt) => receipt.outcome)).toEqual(['under_review', 'attached_to_review']);
  });
});

describe('unreadable slips', () => {
  it('deposit.slip_rejected (retryable, attempts left), back to awaiting_payment; the next slip settles', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const noQr = await sharp({ create: { width: 720, height: 1280, channels: 3, background: '#f4f4f4' } }).png().toBuffer();
    const rejected = await uploadAndProcess(order, owner, noQr);
    expect(rejected).toMatchObject({ status: 'awaiting_payment', slip: { attempts_left: 2 } });
    const { rows } = await app.testDatabase.database.query<{ text: string }>("SELECT envelope::text AS text FROM events WHERE object_id = $1 AND type = 'deposit.slip_rejected'", [order.id]);
    expect(JSON.parse(rows[0]!.text).data.object.slip_rejection).toEqual({ retryable: true, reason_code: 'SLIP_UNREADABLE', attempts_left: 2 });
    // The payment instructions are back for the end user.
    expect(rejected.legs[0]?.qr_payload).toEqual(expect.any(String));
    const settled = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, {}, owner)));
    expect(settled).toMatchObject({ status: 'settled', slip: { attempts_left: 1 } });
    expect(await eventTypesOf(app, order.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.slip_rejected', 'deposit.slip_received', 'deposit.settled']);
  });

  it('attempts_left counts uploads, not the slips processed: three uploads leave none, whatever was processed', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const noQr = (shade: string) => sharp({ create: { width: 720, height: 1280, channels: 3, background: shade } }).png().toBuffer();
    expect(await uploadAndProcess(order, owner, await noQr('#f4f4f4'))).toMatchObject({ status: 'awaiting_payment', slip: { attempts_left: 2 } });
    // Two more uploads before the worker runs: the order has had all three of its uploads.
    for (const shade of ['#f0f0f0', '#ececec']) expect((await uploadMultipart(app, order.slip_upload, await noQr(shade))).statusCode).toBe(202);
    const fourth = await uploadMultipart(app, order.slip_upload, await noQr('#e8e8e8'));
    expect(fourth.statusCode, fourth.body).toBe(409);
    await runJobs(app);
    const { rows } = await app.testDatabase.database.query<{ text: string }>(
      "SELECT envelope::text AS text FROM events WHERE object_id = $1 AND type = 'deposit.slip_rejected' ORDER BY sequence",
      [order.id],
    );
    const left = rows.map((row) => (JSON.parse(row.text) as { data: { object: { version: number; slip_rejection: { attempts_left: number }; slip: { attempts_left: number } } } }).data.object);
    // The second slip's rejection already says none are left (it said 1 when only processed slips counted).
    expect(left.map((object) => object.slip_rejection.attempts_left)).toEqual([2, 0, 0]);
    expect(left.map((object) => object.slip.attempts_left)).toEqual([2, 0, 0]);
    // Each upload changed the order when it was claimed: a new version each time.
    expect(new Set(left.map((object) => object.version)).size).toBe(3);
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'awaiting_payment', slip: { attempts_left: 0 } });
  });
});

describe('late slips and closed orders', () => {
  it('paid after the deadline and uploaded inside the window: slip.is_late, under_review with LATE_SLIP', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    // Five minutes after the 15-minute deadline: beyond the two minutes allowed for the banks' clocks.
    app.clock.advance(20 * 60_000);
    await runJobs(app);
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'expired', is_terminal: false });
    const reviewed = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, {}, owner)));
    expect(reviewed).toMatchObject({ status: 'under_review', slip: { is_late: true }, verification: { within_time_window: false } });
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(['LATE_SLIP']);
  });

  it('paid before the deadline and uploaded after it: settles, its withdrawal reserved again', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const transfer = await sandboxTransfer(app, order, {}, owner);
    app.clock.advance(20 * 60_000);
    await runJobs(app);
    expect((await withdrawalOf(app, order)).leg_status).toBe('released');
    const settled = await uploadAndProcess(order, owner, slipBytes(transfer));
    expect(settled).toMatchObject({ status: 'settled', verification: { within_time_window: true } });
    expect((await withdrawalOf(app, order)).leg_status).toBe('filled');
  });

  it('a slip for a canceled order is CANCELED_ORDER_SLIP; a cancel after a slip is refused', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const canceled = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${order.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: owner });
    expect(canceled.json()).toMatchObject({ status: 'canceled' });
    const reviewed = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, {}, owner)));
    expect(reviewed).toMatchObject({ status: 'under_review', slip: { is_late: true } });
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(['CANCELED_ORDER_SLIP']);

    const other = await deposit(owner, 12_000);
    const upload = await uploadMultipart(app, other.slip_upload, slipBytes(await sandboxTransfer(app, other, {}, owner)));
    expect(upload.statusCode).toBe(202);
    // Not processed yet: the slip exists all the same, so the end user may have paid.
    const refused = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${other.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: owner });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ error: { code: 'deposit_not_cancelable', details: { status: 'awaiting_payment', reason: 'slip_received' } } });
    await runJobs(app);
    expect(await getDeposit(app, other.id, owner)).toMatchObject({ status: 'settled' });
  });

  it('a slip accepted before the deadline and processed after it is on time (the window is judged at receipt)', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 12_000);
    const upload = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, owner)));
    expect(upload.statusCode).toBe(202);
    app.clock.advance(30 * 60_000);
    await runJobs(app);
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'settled', slip: { is_late: false } });
  });
});

describe('after settlement', () => {
  it('another transfer to the same receiver: deposit.overpaid and an additional_transfer claim; the first slip again changes nothing', async () => {
    const owner = await merchant();
    const order = await deposit(owner, 10_800);
    const first = slipBytes(await sandboxTransfer(app, order, {}, owner));
    const settled = await uploadAndProcess(order, owner, first);
    expect(settled.status).toBe('settled');
    const again = await uploadAndProcess(order, owner, slipBytes(await sandboxTransfer(app, order, {}, owner)));
    expect(again).toMatchObject({
      status: 'settled',
      version: settled.version + 1,
      transferred_amount_minor: 10_800,
      amount_received_minor: 10_800,
      overpayment: { cause: 'additional_transfer', amount_minor: 10_800, status: 'open' },
    });
    expect((await eventTypesOf(app, order.id)).at(-1)).toBe('deposit.overpaid');
    const unchanged = await uploadAndProcess(order, owner, first);
    expect(unchanged.version).toBe(again.version);
    expect((await receiptsOf(order)).map((receipt) => receipt.outcome)).toEqual(['settled', 'additional_transfer', 'ignored_after_settlement']);
    expect(await balanceEvents(owner)).toEqual(['balance.credited']);
  });
});

describe('policy hold by brand policy', () => {
  it('orders at or above the threshold never settle without a reviewer (POLICY_HOLD); bad settings are 422 and change nothing', async () => {
    const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'slips', request_id: null }, { name: 'Policy Hold Brand' });
    const owner = await app.createMerchant({ white_label_id: brand.id });
    const setPolicy = (policy_hold_min_amount_minor: unknown) =>
      app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: brand.id, policy_hold_min_amount_minor }) });
    const readPolicy = async () => (await app.backoffice({ url: `/v1/bo/deposit-policy?mode=test&white_label_id=${brand.id}` })).json<{ policy_hold_min_amount_minor: number | null }>();
    // No hold unless the brand sets one.
    expect(await readPolicy()).toMatchObject({ policy_hold_min_amount_minor: null });
    const set = await setPolicy(15_000);
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ policy_hold_min_amount_minor: 15_000, source: 'brand' });
    // Bad input gets the spec's validation_error, names the field, and changes nothing.
    for (const [value, reason] of [[15_050, 'must_be_whole_baht'], [0, 'too_small'], [-100, 'too_small'], ['15000', expect.any(String)], [1.5, expect.any(String)]] as const) {
      const refused = await setPolicy(value);
      expect(refused.statusCode, refused.body).toBe(422);
      expect(refused.json()).toMatchObject({ error: { code: 'validation_error', details: { fields: [expect.objectContaining({ path: 'policy_hold_min_amount_minor', reason })] } } });
    }
    expect(await readPolicy()).toMatchObject({ policy_hold_min_amount_minor: 15_000 });

    const below = await deposit(owner, 14_900);
    expect(await uploadAndProcess(below, owner, slipBytes(await sandboxTransfer(app, below, {}, owner)))).toMatchObject({ status: 'settled', settled_via: 'auto' });
    const held = await deposit(owner, 15_000);
    const before = await withdrawalOf(app, held);
    const reviewed = await uploadAndProcess(held, owner, slipBytes(await sandboxTransfer(app, held, {}, owner)));
    expect(reviewed).toMatchObject({ status: 'under_review', verification: { amount_exact: true, sender_name_match: true, receiver_match: true } });
    expect(reviewed.review?.reasons).toEqual([{ code: 'POLICY_HOLD', display_th: expect.stringMatching(/[\u0e00-\u0e7f]/), display_en: expect.any(String), actionable_by: 'support' }]);
    expect(await eventTypesOf(app, held.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.under_review']);
    expect(await withdrawalOf(app, held)).toMatchObject({ leg_status: 'reserved', filled_minor: before.filled_minor });
    // Another reason as well: both are listed, the spec's code first.
    const wrongName = await deposit(owner, 20_000);
    const sender = { ...wrongName.declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' };
    const both = await uploadAndProcess(wrongName, owner, slipBytes(await sandboxTransfer(app, wrongName, { sender }, owner)));
    expect(both.review?.reasons.map((reason) => reason.code)).toEqual(['SENDER_NAME_MISMATCH', 'POLICY_HOLD']);
    // A reviewer's approval settles a held order as any other review.
    const system = { actor_type: 'system', actor_id: 'slips', request_id: null } as const;
    const reviewer = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: brand.id, role: 'reviewer', name: 'Hold reviewer' })).token;
    const approved = await app.backoffice({ method: 'POST', url: `/v1/bo/reviews/${held.id}/approve`, body: {}, token: reviewer });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(await getDeposit(app, held.id, owner)).toMatchObject({ status: 'settled', settled_via: 'review', amount_received_minor: 15_000 });
    // The hold lifted (null): the same amount settles automatically again.
    expect((await setPolicy(null)).json()).toMatchObject({ policy_hold_min_amount_minor: null });
    const lifted = await deposit(owner, 15_000);
    expect(await uploadAndProcess(lifted, owner, slipBytes(await sandboxTransfer(app, lifted, {}, owner)))).toMatchObject({ status: 'settled', settled_via: 'auto' });
  });
});

describe('four eyes by brand policy', () => {
  it('a review of an order at or above the brand threshold needs two approvers; null means never', async () => {
    const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'slips', request_id: null }, { name: 'Four Eyes Brand' });
    const owner = await app.createMerchant({ white_label_id: brand.id });
    const setPolicy = (four_eyes_min_amount_minor: number | null) =>
      app.backoffice({
        method: 'POST',
        url: '/v1/bo/deposit-policy',
        body: depositPolicyBody({ white_label_id: brand.id, four_eyes_min_amount_minor }),
      });
    expect((await setPolicy(15_000)).json()).toMatchObject({ four_eyes_min_amount_minor: 15_000 });
    const wrongName = (order: CreatedDeposit & { declared: ReturnType<typeof declaredSender> }) => ({ sender: { ...order.declared, account_name_th: 'ประเสริฐ มั่นคง', account_name_en: 'Prasert Mankong' } });
    const small = await deposit(owner, 14_900);
    const large = await deposit(owner, 15_000);
    expect((await uploadAndProcess(small, owner, slipBytes(await sandboxTransfer(app, small, wrongName(small), owner)))).review).toMatchObject({ four_eyes_required: false });
    expect((await uploadAndProcess(large, owner, slipBytes(await sandboxTransfer(app, large, wrongName(large), owner)))).review).toMatchObject({
      four_eyes_required: true,
      // One order ahead in this brand's queue, two reviewers' time, the assumed pace of 4 an hour: 60 minutes.
      estimated_resolution_bucket: 'under_1h',
    });
    expect((await setPolicy(null)).json()).toMatchObject({ four_eyes_min_amount_minor: null });
    const never = await deposit(owner, 4_000_000);
    expect((await uploadAndProcess(never, owner, slipBytes(await sandboxTransfer(app, never, wrongName(never), owner)))).review).toMatchObject({ four_eyes_required: false });
  });
});
