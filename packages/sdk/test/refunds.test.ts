import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { ApiError, isApiError, type DepositOrder, type DepositRefunds, type PaymentClient, type WithdrawalOrder } from '../src/index.ts';
import type { MerchantCredentials } from '../../../test/support/app.ts';
import { runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../../../test/support/slips.ts';
import { accountOf, fundAvailable } from '../../../test/support/withdrawals.ts';
import { startService, type ListeningService } from './support/service.ts';

/**
 * `refunds.create` and `refunds.list` against the real service over HTTP: a merchant of its own has a deposit paid
 * through the sandbox bank and settled by the worker, then refunds it with the SDK; the answers are the typed
 * withdrawal order, the deposit's typed `refunds` summary and the typed refusals of the refund codes.
 */

let service: ListeningService;

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await service.close();
});

interface Merchant {
  credentials: MerchantCredentials;
  client: PaymentClient;
}

/** A merchant with cleared money of its own: a refund is funded from `available_minor`, not from the deposit's pending credit. */
async function fundedMerchant(): Promise<Merchant> {
  const credentials = await service.app.createMerchant({ white_label_id: service.app.sandbox.white_label_id });
  await fundAvailable(service.app, accountOf(credentials), 1_000_000);
  return { credentials, client: service.client({ api_key: credentials.api_key, signing_secret: credentials.signing_secret }) };
}

function depositBody(amount_minor: number) {
  const reference = `sdk-rfd-${crypto.randomUUID()}`;
  return {
    amount_minor,
    currency: 'THB' as const,
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { bank_code: '002', account_number: `66${String(crypto.randomInt(0, 100_000_000)).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.9', user_agent: 'sdk-test' },
  };
}

/** A deposit created with the SDK, paid from its declared account through the sandbox bank, and settled by the worker. */
async function settledDeposit(merchant: Merchant, amount_minor: number): Promise<DepositOrder> {
  const order = await merchant.client.deposits.create(depositBody(amount_minor));
  const transfer = await sandboxTransfer(service.app, order, {}, merchant.credentials);
  const upload = await uploadMultipart(service.app, order.slip_upload!, slipBytes(transfer));
  expect(upload.statusCode, upload.body).toBe(202);
  await runJobs(service.app);
  const settled = await merchant.client.deposits.retrieve(order.id);
  expect(settled).toMatchObject({ status: 'settled', amount_received_minor: amount_minor });
  return settled;
}

describe('refunds.create and refunds.list', () => {
  it('refunds a settled deposit in parts: the typed withdrawal order, one refund per key, the list, the summary and the withdrawal filter', async () => {
    const merchant = await fundedMerchant();
    const deposit = await settledDeposit(merchant, 50_000);
    expect(deposit.refunds).toEqual({ amount_refundable_minor: 50_000, amount_refunded_minor: 0, refund_ids: [] });

    const key = crypto.randomUUID();
    const first = await merchant.client.refunds.create(deposit.id, { amount_minor: 20_000, reason_code: 'canceled_purchase', note: 'ยกเลิกคำสั่งซื้อ', metadata: { ticket: 'T-7' } }, { idempotency_key: key });
    expectTypeOf(first).toEqualTypeOf<WithdrawalOrder>();
    expect(first).toMatchObject({
      object: 'withdrawal_order',
      status: 'open',
      refund_of_deposit_id: deposit.id,
      refund_reason_code: 'canceled_purchase',
      refund_note: 'ยกเลิกคำสั่งซื้อ',
      amount_total_minor: 20_000,
      end_user_ref: deposit.end_user_ref,
      metadata: { ticket: 'T-7' },
    });
    const replayed = await merchant.client.request<WithdrawalOrder>({
      method: 'POST',
      path: `/v1/pay/deposits/${deposit.id}/refunds`,
      body: { amount_minor: 20_000, reason_code: 'canceled_purchase', note: 'ยกเลิกคำสั่งซื้อ', metadata: { ticket: 'T-7' } },
      idempotency_key: key,
    });
    expect(replayed).toMatchObject({ http_status: 201, idempotent_replay: true, data: { id: first.id } });

    const second = await merchant.client.refunds.create(deposit.id, { amount_minor: 30_000, reason_code: 'other' });
    expect(second).not.toHaveProperty('refund_note');
    const listed = await merchant.client.refunds.list(deposit.id);
    expectTypeOf(listed.data).toEqualTypeOf<WithdrawalOrder[]>();
    expect(listed).toMatchObject({ object: 'list' });
    expect(listed.data.map((order) => order.id)).toEqual([first.id, second.id]);

    const after = await merchant.client.deposits.retrieve(deposit.id);
    expectTypeOf(after.refunds).toEqualTypeOf<DepositRefunds | undefined>();
    expect(after.refunds).toEqual({ amount_refundable_minor: 0, amount_refunded_minor: 0, refund_ids: [first.id, second.id] });
    // The deposit's version does not move with its refunds: they are orders of their own.
    expect(after.version).toBe(deposit.version);
    const filtered = await merchant.client.withdrawals.list({ refund_of_deposit_id: deposit.id, order: 'asc' });
    expect(filtered.data.map((order) => order.id)).toEqual([first.id, second.id]);
  });

});

describe('refund refusals', () => {
  it('are typed ApiErrors with their details: over the refundable amount, an unsettled deposit, an unknown deposit', async () => {
    const merchant = await fundedMerchant();
    const deposit = await settledDeposit(merchant, 30_000);
    await merchant.client.refunds.create(deposit.id, { amount_minor: 10_000, reason_code: 'overpayment' });

    const over = await merchant.client.refunds.create(deposit.id, { amount_minor: 25_000, reason_code: 'customer_request' }).catch((thrown: unknown) => thrown);
    expect(isApiError(over, 'refund_exceeds_refundable')).toBe(true);
    if (isApiError(over, 'refund_exceeds_refundable')) {
      expectTypeOf(over.details.refundable_minor).toEqualTypeOf<number>();
      expect(over).toMatchObject({ http_status: 422, retryable: false, details: { deposit_id: deposit.id, amount_minor: 25_000, refundable_minor: 20_000 } });
    }

    const unpaid = await merchant.client.deposits.create(depositBody(10_000));
    const unsettled = await merchant.client.refunds.create(unpaid.id, { amount_minor: 10_000, reason_code: 'customer_request' }).catch((thrown: unknown) => thrown);
    expect(isApiError(unsettled, 'deposit_not_refundable')).toBe(true);
    if (isApiError(unsettled, 'deposit_not_refundable')) {
      expectTypeOf(unsettled.details.status).toEqualTypeOf<string>();
      expect(unsettled).toMatchObject({ http_status: 409, details: { status: 'awaiting_payment' } });
    }

    const missing = await merchant.client.refunds.list('dep_01K0NOSUCHDEPOSIT00000000').catch((thrown: unknown) => thrown);
    expect(missing).toBeInstanceOf(ApiError);
    expect(missing).toMatchObject({ code: 'resource_not_found', http_status: 404 });
    const invalid = await merchant.client.refunds.create(deposit.id, { amount_minor: 10_050, reason_code: 'customer_request' }).catch((thrown: unknown) => thrown);
    expect(isApiError(invalid)).toBe(true);
    expect((invalid as ApiError).http_status).toBe(422);
    expect((await merchant.client.refunds.list(deposit.id)).data).toHaveLength(1);
  });

  it('another merchant cannot refund or list the deposit: 404', async () => {
    const owner = await fundedMerchant();
    const deposit = await settledDeposit(owner, 20_000);
    const stranger = await fundedMerchant();
    await expect(stranger.client.refunds.create(deposit.id, { amount_minor: 10_000, reason_code: 'customer_request' })).rejects.toMatchObject({ code: 'resource_not_found', http_status: 404 });
    await expect(stranger.client.refunds.list(deposit.id)).rejects.toMatchObject({ code: 'resource_not_found' });
    expect((await owner.client.deposits.retrieve(deposit.id)).refunds?.refund_ids).toEqual([]);
  });
});
