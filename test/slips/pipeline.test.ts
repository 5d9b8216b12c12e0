import crypto from 'node:crypto';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { accountOf, depositServiceWithoutSandboxLiquidity, fundAvailable, inTransaction, SOMCHAI, SOMYING, verifiedBeneficiary } from '../support/withdrawals.ts';
import { depositPolicyBody, getDeposit, LIVE_GATEWAY, liveOrderWithSlip, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';
import { startFakeSlipProvider, foundAnswer, sendJson, type FakeSlipProvider } from '../support/fake-slip-provider.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { CreateDepositInput, DepositService, DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import { BANK_CHECK_WAIT_MS } from '../../src/verification/service.ts';

/**
 * The slip pipeline beyond one leg and one environment:
 * - multi-leg orders (how slips map to legs by receiver, when the order settles, and what its deadline
 *   does to a partly paid order), with the orders split across two withdrawals as live matching does;
 * - live mode through the HTTP verification adapter and a local provider: a found transfer settles,
 *   an unreachable provider makes the slip wait with retries and then go to review (BANK_DISABLED).
 */

let app: TestApp;
let provider: FakeSlipProvider;

beforeAll(async () => {
  provider = await startFakeSlipProvider();
  app = await createTestApp({ config: { SLIP_VERIFIER_URL: provider.url, SLIP_VERIFIER_KEY: 'provider-key-for-tests', SLIP_VERIFIER_TIMEOUT_MS: '500' } });
});
afterAll(async () => {
  await app.close();
  await provider.close();
});

describe('multi-leg orders', () => {
  let depositor: MerchantCredentials;
  let withdrawer: MerchantCredentials;
  let plain: DepositService;
  let beneficiaries: { somchai: string; somying: string };
  let brand_id: string;

  beforeAll(async () => {
    // A brand of its own, where deposits are split across withdrawals as in live mode: no sandbox
    // counterparty covers the whole amount, so 60,000 satang takes two legs.
    const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'slips', request_id: null }, { name: 'Multi-leg Brand' });
    brand_id = brand.id;
    depositor = await app.createMerchant({ white_label_id: brand.id });
    withdrawer = await app.createMerchant({ white_label_id: brand.id });
    await fundAvailable(app, accountOf(withdrawer), 100_000_000);
    beneficiaries = { somchai: await verifiedBeneficiary(app, accountOf(withdrawer), SOMCHAI), somying: await verifiedBeneficiary(app, accountOf(withdrawer), SOMYING) };
    plain = depositServiceWithoutSandboxLiquidity(app);
  });

  async function withdrawal(beneficiary_id: string, amount_minor: number): Promise<WithdrawalView> {
    const response = await app.signed({
      method: 'POST',
      url: '/v1/pay/withdrawals',
      idempotency_key: crypto.randomUUID(),
      credentials: withdrawer,
      body: { amount_minor, currency: 'THB', merchant_reference: crypto.randomUUID().slice(0, 30), end_user_ref: 'payee', beneficiary_id },
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json<WithdrawalView>();
  }

  async function withdrawalNow(id: string) {
    return (await app.signed({ url: `/v1/pay/withdrawals/${id}`, credentials: withdrawer })).json<WithdrawalView & { filled_minor: number; remaining_minor: number }>();
  }

  /** Two withdrawals (40,000 to Somchai, 30,000 to Somying) and a 60,000 deposit split over both. */
  async function splitOrder(): Promise<{ order: CreatedDeposit; first: WithdrawalView; second: WithdrawalView }> {
    const first = await withdrawal(beneficiaries.somchai, 40_000);
    app.clock.advance(1_000);
    const second = await withdrawal(beneficiaries.somying, 30_000);
    const reference = crypto.randomUUID().slice(0, 20);
    const body = {
      amount_minor: 60_000,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: { bank_code: '004', account_number: '7300000001', account_name_th: 'สมชาย ใจดี' },
    };
    const created = await inTransaction(app, (tx) => plain.create(tx, accountOf(depositor), body as unknown as CreateDepositInput, SYSTEM_CAUSE));
    expect(created.deposit.legs.map((leg) => leg.amount_minor)).toEqual([40_000, 20_000]);
    return { order: { ...created.deposit, slip_upload: created.slip_upload! } as CreatedDeposit, first, second };
  }

  async function pay(order: CreatedDeposit, leg: number, options: Record<string, unknown> = {}): Promise<DepositView> {
    const transfer = await sandboxTransfer(app, order, { leg_ref: order.legs[leg]!.leg_ref, ...options }, depositor);
    const response = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
    expect(response.statusCode, response.body).toBe(202);
    await runJobs(app);
    return getDeposit(app, order.id, depositor);
  }

  async function eventTypes(id: string): Promise<string[]> {
    const { rows } = await app.testDatabase.database.query<{ type: string }>('SELECT type FROM events WHERE object_id = $1 ORDER BY sequence', [id]);
    return rows.map((row) => row.type);
  }

  it('a slip pays the leg whose receiver it names; the order waits for the rest, then settles with each withdrawal filled by its own leg', async () => {
    const { order, first, second } = await splitOrder();
    // The second leg first: slips map to legs by receiver, not by their order of arrival.
    const waiting = await pay(order, 1);
    expect(waiting).toMatchObject({ status: 'awaiting_payment', legs: [{ leg_status: 'pending' }, { leg_status: 'complete' }], slip: { attempts_left: 2 } });
    expect(waiting.legs[0]?.qr_payload).toEqual(expect.any(String));
    expect(waiting.legs[1]).not.toHaveProperty('qr_payload');
    expect((await eventTypes(order.id)).slice(-2)).toEqual(['deposit.slip_received', 'deposit.leg_paid']);
    expect((await withdrawalNow(second.id)).filled_minor).toBe(0);

    const settled = await pay(order, 0);
    expect(settled).toMatchObject({
      status: 'settled',
      partial: false,
      transferred_amount_minor: 60_000,
      amount_received_minor: 60_000,
      verification: { amount_exact: true, receiver_match: true },
      legs: [{ leg_status: 'complete' }, { leg_status: 'complete' }],
    });
    expect((await withdrawalNow(first.id)).filled_minor).toBe(40_000);
    expect((await withdrawalNow(second.id)).filled_minor).toBe(20_000);
  });

  it('only some legs paid by the deadline: the order settles short on what was paid, the unpaid leg goes back', async () => {
    const { order, first, second } = await splitOrder();
    expect(await pay(order, 0)).toMatchObject({ status: 'awaiting_payment' });
    app.clock.advance(16 * 60_000);
    await runJobs(app);
    expect(await getDeposit(app, order.id, depositor)).toMatchObject({
      status: 'settled',
      settled_via: 'auto',
      partial: true,
      transferred_amount_minor: 40_000,
      amount_received_minor: 40_000,
    });
    expect((await withdrawalNow(first.id)).filled_minor).toBe(40_000);
    expect((await withdrawalNow(second.id)).remaining_minor).toBe(30_000);
  });

  it('a leg paid more and another less cannot fill the withdrawals right: AMOUNT_MISMATCH', async () => {
    const { order } = await splitOrder();
    await pay(order, 0, { amount_minor: 45_000 });
    const reviewed = await pay(order, 1, { amount_minor: 15_000 });
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons).toEqual([expect.objectContaining({ code: 'AMOUNT_MISMATCH', detail: { expected_minor: 60_000, observed_minor: 60_000 } })]);
  });

  it('a leg paid from another name goes to review at once, without waiting for the other legs', async () => {
    const { order } = await splitOrder();
    const reviewed = await pay(order, 0, { sender: { bank_code: '004', account_number: '7300000001', account_name_th: 'ประเสริฐ มั่นคง' } });
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(['SENDER_NAME_MISMATCH', 'AMOUNT_MISMATCH']);
  });

  it("the brand's policy hold: a partly paid held order goes to review at its deadline instead of settling short", async () => {
    const setHold = async (policy_hold_min_amount_minor: number | null) => {
      const response = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: brand_id, policy_hold_min_amount_minor }) });
      expect(response.statusCode, response.body).toBe(200);
    };
    await setHold(60_000);
    try {
      const { order, first } = await splitOrder();
      // The hold is on settling, not on paying: the first leg's slip is recorded and the order waits for the other.
      expect(await pay(order, 0)).toMatchObject({ status: 'awaiting_payment', legs: [{ leg_status: 'complete' }, { leg_status: 'pending' }] });
      app.clock.advance(16 * 60_000);
      await runJobs(app);
      const held = await getDeposit(app, order.id, depositor);
      expect(held).toMatchObject({ status: 'under_review', review: { four_eyes_required: false } });
      expect(held.review?.reasons.map((reason) => reason.code)).toEqual(['POLICY_HOLD']);
      expect((await eventTypes(order.id)).at(-1)).toBe('deposit.under_review');
      expect((await withdrawalNow(first.id)).filled_minor).toBe(0);
    } finally {
      await setHold(null);
    }
  });

  it('an unreadable slip on a partly paid order keeps what was paid; the deadline still settles it', async () => {
    const { order } = await splitOrder();
    await pay(order, 0);
    const blank = await sharp({ create: { width: 600, height: 900, channels: 3, background: '#ffffff' } }).jpeg().toBuffer();
    expect((await uploadMultipart(app, order.slip_upload, blank)).statusCode).toBe(202);
    await runJobs(app);
    expect(await getDeposit(app, order.id, depositor)).toMatchObject({ status: 'awaiting_payment', legs: [{ leg_status: 'complete' }, { leg_status: 'pending' }], slip: { attempts_left: 1 } });
    app.clock.advance(16 * 60_000);
    await runJobs(app);
    expect(await getDeposit(app, order.id, depositor)).toMatchObject({ status: 'settled', partial: true, transferred_amount_minor: 40_000 });
  });
});

describe('live mode through the verification provider', () => {
  let live: MerchantCredentials;

  beforeAll(async () => {
    live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const policy = await app.backoffice({
      method: 'POST',
      url: '/v1/bo/deposit-policy',
      body: depositPolicyBody({ white_label_id: app.sandbox.white_label_id, mode: 'live', gateway: LIVE_GATEWAY }),
    });
    expect(policy.statusCode, policy.body).toBe(200);
  });

  const liveOrder = () => liveOrderWithSlip(app, live, '20260801004LIVE');

  it('a transfer the provider confirms settles the live order from the slip pixels', async () => {
    const { order, slip, trans_ref } = await liveOrder();
    provider.reset();
    provider.answer((_request, response) =>
      sendJson(
        response,
        200,
        foundAnswer({
          sending_bank_code: '004',
          trans_ref,
          amount: '250.00',
          occurred_at: app.clock.now().toISOString(),
          sender: { bank_code: '004', account: 'xxx-x-x0000-x', name_th: 'นาย สมชาย ใ', name_en: null },
          receiver: { bank_code: '014', account: 'xxx-x-x8147-x', name_th: 'บริษัท สยามซอฟต์ จำกัด', name_en: null },
        }),
      ),
    );
    expect((await uploadMultipart(app, order.slip_upload, slip)).statusCode).toBe(202);
    await runJobs(app);
    expect(await getDeposit(app, order.id, live)).toMatchObject({ status: 'settled', livemode: true, settled_via: 'auto', amount_received_minor: 25_000 });
    expect(provider.requests).toHaveLength(1);
    expect(provider.requests[0]).toMatchObject({ method: 'POST', path: '/v1/transfers/verify', headers: { authorization: 'Bearer provider-key-for-tests' } });
    expect(JSON.parse(provider.requests[0]!.body)).toEqual({ sending_bank_code: '004', trans_ref });
  });

  it('an unreachable provider never loses the slip: retried with backoff, then review with BANK_DISABLED', async () => {
    const { order, slip } = await liveOrder();
    provider.reset();
    provider.answer((_request, response) => sendJson(response, 503, { error: 'down' }));
    expect((await uploadMultipart(app, order.slip_upload, slip)).statusCode).toBe(202);
    await runJobs(app);
    expect((await getDeposit(app, order.id, live)).status).toBe('slip_processing');
    const { rows } = await app.testDatabase.database.query<{ attempts: number; status: string; last_error: string }>(
      "SELECT attempts, status, last_error FROM jobs WHERE task = 'slips.process' AND payload->>'deposit_id' = $1",
      [order.id],
    );
    expect(rows[0]).toMatchObject({ status: 'pending', attempts: 1, last_error: expect.stringContaining('bank verification unavailable') });
    // The queue's backoff (1 s doubling) runs the job again until the wait is over.
    for (let round = 0; round < 12 && (await getDeposit(app, order.id, live)).status === 'slip_processing'; round += 1) {
      app.clock.advance(BANK_CHECK_WAIT_MS / 4);
      await runJobs(app);
    }
    const reviewed = await getDeposit(app, order.id, live);
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons).toEqual([expect.objectContaining({ code: 'BANK_DISABLED', detail: { bank_code: '004', cause: 'verification_unavailable' } })]);
    expect(provider.requests.length).toBeGreaterThan(1);
  });
});
