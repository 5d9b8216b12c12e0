import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, eventsOfMerchant, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import { accountOf, fundAvailable, inTransaction, verifiedBeneficiary } from '../support/withdrawals.ts';
import { balanceOf, clearCredits, refundsOf, settledDeposit, withdrawalOf } from '../support/refunds.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';

/**
 * Refunds to the payer (issue 32) through the doors a merchant and an operator use: sandbox deposits settle from a
 * verified sender over signed HTTP and the job worker, their credit clears on the test clock, the merchant refunds
 * over POST /v1/pay/deposits/{id}/refunds, the sandbox counterparty's deposits fill the refund (its scenarios,
 * docs/decisions/sandbox.md, choose how much), and the wallet,
 * the events, the deposit's refund summary and the refunds' claim on the deposit are checked after each step.
 */

let app: TestApp;
const system = { actor_type: 'system' as const, actor_id: 'refunds-test', request_id: null };
let operator: string;

beforeAll(async () => {
  app = await createTestApp();
  operator = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'Refund operator' })).token;
});
afterAll(async () => {
  await app.close();
});

function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

function refund(owner: MerchantCredentials, deposit_id: string, body: Record<string, unknown>, idempotency_key: string = crypto.randomUUID()) {
  return app.signed({ method: 'POST', url: `/v1/pay/deposits/${deposit_id}/refunds`, idempotency_key, credentials: owner, body });
}

async function created(owner: MerchantCredentials, deposit_id: string, amount_minor: number, extra: Record<string, unknown> = {}): Promise<WithdrawalView> {
  const response = await refund(owner, deposit_id, { amount_minor, reason_code: 'customer_request', ...extra });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<WithdrawalView>();
}

describe('creating refunds', () => {
  it('a full refund pays the verified sender from available; the deposit says what is left, the wallet reserves amount and fee', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const before = await balanceOf(app, owner);
    const order = await created(owner, deposit.id, 100_000, { note: 'ลูกค้ายกเลิกคำสั่งซื้อ', metadata: { ticket: 'T-1' } });
    expect(order).toMatchObject({
      object: 'withdrawal_order',
      status: 'open',
      refund_of_deposit_id: deposit.id,
      refund_reason_code: 'customer_request',
      refund_note: 'ลูกค้ายกเลิกคำสั่งซื้อ',
      amount_total_minor: 100_000,
      remaining_minor: 100_000,
      end_user_ref: deposit.end_user_ref,
      metadata: { ticket: 'T-1' },
    });
    // The payee is the account the bank verified as the sender: the deposit's declared account, verified at once.
    const payee = await app.signed({ url: `/v1/pay/beneficiaries/${order.beneficiary_id}`, credentials: owner });
    expect(payee.json()).toMatchObject({ status: 'verified', bank_code: deposit.sender.bank_code, account_number_masked: deposit.sender.account_number_masked });
    const after = await balanceOf(app, owner);
    expect(before.available_minor - after.available_minor).toBe(order.total_locked_minor);
    expect(after.reserved_minor - before.reserved_minor).toBe(order.total_locked_minor);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 0, amount_refunded_minor: 0, refund_ids: [order.id] });
    expect((await refundsOf(app, owner, deposit.id)).map((item) => item.id)).toEqual([order.id]);
    const events = (await eventsOfMerchant(app, owner.merchant_id)).filter((event) => event.data.object.id === order.id);
    expect(events.map((event) => event.type)).toEqual(['withdrawal.created']);
    expect(events[0]!.data.object).toMatchObject({ refund_of_deposit_id: deposit.id, refund_reason_code: 'customer_request' });
  });

  it('several partial refunds up to the amount received, then 422 with what is left; the same key replays the same refund', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const key = crypto.randomUUID();
    const first = await refund(owner, deposit.id, { amount_minor: 30_000, reason_code: 'canceled_purchase' }, key);
    expect(first.statusCode, first.body).toBe(201);
    const replay = await refund(owner, deposit.id, { amount_minor: 30_000, reason_code: 'canceled_purchase' }, key);
    expect(replay.statusCode).toBe(201);
    expect(replay.json<WithdrawalView>().id).toBe(first.json<WithdrawalView>().id);
    expect((await getDeposit(app, deposit.id, owner)).refunds?.amount_refundable_minor).toBe(70_000);
    const second = await created(owner, deposit.id, 50_000);
    const over = await refund(owner, deposit.id, { amount_minor: 30_000, reason_code: 'customer_request' });
    expect(over.statusCode).toBe(422);
    expect(errorOf(over)).toMatchObject({ code: 'refund_exceeds_refundable', details: { refundable_minor: 20_000, amount_minor: 30_000 } });
    const last = await created(owner, deposit.id, 20_000);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({
      amount_refundable_minor: 0,
      amount_refunded_minor: 0,
      refund_ids: [first.json<WithdrawalView>().id, second.id, last.id],
    });
  });

});

describe('refusing refunds', () => {
  it('refuses an over-refund, an unsettled deposit, another tenant’s deposit and bad input, changing nothing', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const before = await balanceOf(app, owner);
    const over = await refund(owner, deposit.id, { amount_minor: 100_100, reason_code: 'customer_request' });
    expect(over.statusCode).toBe(422);
    expect(errorOf(over)).toMatchObject({ code: 'refund_exceeds_refundable', details: { refundable_minor: 100_000 } });

    const unpaid = await createDeposit(app, { amount_minor: 50_000, credentials: owner });
    const unsettled = await refund(owner, unpaid.id, { amount_minor: 10_000, reason_code: 'customer_request' });
    expect(unsettled.statusCode).toBe(409);
    expect(errorOf(unsettled)).toMatchObject({ code: 'deposit_not_refundable', details: { status: 'awaiting_payment' } });

    // Another merchant of the brand, and a merchant of another brand: the deposit does not exist for them.
    for (const stranger of [await merchant(), await app.createMerchant()]) {
      await settledDeposit(app, stranger, 100_000);
      const foreign = await refund(stranger, deposit.id, { amount_minor: 10_000, reason_code: 'customer_request' });
      expect(foreign.statusCode).toBe(404);
      expect(errorOf(foreign).code).toBe('resource_not_found');
      expect((await app.signed({ url: `/v1/pay/deposits/${deposit.id}/refunds`, credentials: stranger })).statusCode).toBe(404);
    }

    const bad = [
      { amount_minor: 10_050, reason_code: 'customer_request' },
      { amount_minor: 10_000, reason_code: 'because' },
      { amount_minor: 10_000, reason_code: 'customer_request', beneficiary_id: 'ben_x' },
      { amount_minor: -1, reason_code: 'customer_request' },
      { amount_minor: 10_000, reason_code: 'customer_request', note: 'x'.repeat(501) },
    ];
    const codes = [];
    for (const body of bad) {
      const response = await refund(owner, deposit.id, body);
      codes.push([response.statusCode, errorOf(response).code]);
    }
    expect(codes).toEqual([[422, 'amount_not_supported'], [422, 'validation_error'], [422, 'validation_error'], [422, 'validation_error'], [422, 'validation_error']]);
    expect(await balanceOf(app, owner)).toMatchObject({ available_minor: before.available_minor, reserved_minor: before.reserved_minor });
    expect(await refundsOf(app, owner, deposit.id)).toEqual([]);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 100_000, amount_refunded_minor: 0, refund_ids: [] });
  });

});

describe('refunds without a proven payer or cleared money', () => {
  it('a deposit paid from another account than the one declared, approved by a reviewer, has no proven payer: 409', async () => {
    const owner = await merchant();
    const order = await createDeposit(app, { amount_minor: 100_000, credentials: owner });
    // The bank's transfer came from another account of the same bank and name: the checks send it to review.
    const declared = await getDeposit(app, order.id, owner);
    const transfer = await sandboxTransfer(app, order, { sender: { bank_code: declared.sender.bank_code, account_number: '7199999999', account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' } }, owner);
    expect((await uploadMultipart(app, order.slip_upload, slipBytes(transfer))).statusCode).toBe(202);
    await runJobs(app);
    expect((await getDeposit(app, order.id, owner)).review?.reasons.map((reason) => reason.code)).toContain('SENDER_ACCOUNT_MISMATCH');
    const reviewer = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'reviewer', name: 'Refund reviewer' })).token;
    const approved = await app.instance.app.inject({
      method: 'POST',
      url: `/v1/bo/reviews/${order.id}/approve`,
      headers: { authorization: `Bearer ${reviewer}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ note: 'ผู้โอนยืนยันว่าโอนจากบัญชีอื่นของตนเอง ตรวจสอบแล้ว' }),
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect((await getDeposit(app, order.id, owner)).status).toBe('settled');
    await clearCredits(app, owner);
    const refused = await refund(owner, order.id, { amount_minor: 10_000, reason_code: 'customer_request' });
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused)).toMatchObject({ code: 'refund_payee_unverified', details: { reason: 'sender_not_verified' } });
    expect(await refundsOf(app, owner, order.id)).toEqual([]);
  });

  it('pending clearing cannot fund a refund: 402 insufficient_balance with the spec’s details, and nothing is claimed', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    const response = await refund(owner, deposit.id, { amount_minor: 50_000, reason_code: 'customer_request' });
    expect(response.statusCode).toBe(402);
    expect(errorOf(response)).toMatchObject({ code: 'insufficient_balance', details: { available_minor: 0, pending_clearing_minor: deposit.credited_amount_minor } });
    expect(errorOf(response).details.required_minor).toBeGreaterThan(50_000);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 100_000, amount_refunded_minor: 0, refund_ids: [] });
  });

});

describe('refunds racing for the same deposit', () => {
  it('two concurrent refunds for the last baht: exactly one wins, the other is told what is left', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    await created(owner, deposit.id, 90_000);
    const answers = await Promise.all([0, 1, 2, 3].map(() => refund(owner, deposit.id, { amount_minor: 10_000, reason_code: 'duplicate_payment' })));
    const statuses = answers.map((answer) => answer.statusCode).sort();
    expect(statuses).toEqual([201, 422, 422, 422]);
    for (const answer of answers.filter((candidate) => candidate.statusCode === 422)) {
      expect(errorOf(answer)).toMatchObject({ code: 'refund_exceeds_refundable', details: { refundable_minor: 0 } });
    }
    expect((await refundsOf(app, owner, deposit.id)).length).toBe(2);
    const { rows } = await app.testDatabase.database.query<{ committed_minor: number; refundable_cap_minor: number }>(
      'SELECT committed_minor, refundable_cap_minor FROM withdrawal_refund_allowances WHERE deposit_id = $1',
      [deposit.id],
    );
    expect(rows).toEqual([{ committed_minor: 100_000, refundable_cap_minor: 100_000 }]);
  });

  it('without the deposit’s lock, two creations racing for the same remainder still end with one refund: the allowance decides', async () => {
    // The refunds layer locks the deposit first; the withdrawal creation alone, run twice at once, must not rely on it.
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const account = accountOf(owner);
    const beneficiary_id = await verifiedBeneficiary(app, account);
    // Enough in the wallet for both: only the deposit's allowance may refuse one.
    await fundAvailable(app, account, 100_000);
    const before = await balanceOf(app, owner);
    const attempt = (reference: string) =>
      inTransaction(app, async (tx) => {
        const result = await app.instance.services.withdrawals.create(
          tx,
          account,
          { amount_minor: 60_000, merchant_reference: reference, end_user_ref: 'race', beneficiary_id, refund: { deposit_id: deposit.id, reason_code: 'other', note: null, refundable_cap_minor: 100_000 } },
          SYSTEM_CAUSE,
        );
        if (!result.ok) throw result.error;
        return result.value;
      }).then(
        (view) => ({ ok: true as const, view }),
        (error: unknown) => ({ ok: false as const, code: (error as { code?: string }).code }),
      );
    const outcomes = await Promise.all([attempt(`race-a-${deposit.id}`), attempt(`race-b-${deposit.id}`)]);
    expect(outcomes.filter((outcome) => outcome.ok).length).toBe(1);
    expect(outcomes.find((outcome) => !outcome.ok)).toMatchObject({ code: 'refund_exceeds_refundable' });
    const winner = outcomes.find((outcome) => outcome.ok)!;
    const after = await balanceOf(app, owner);
    expect(before.available_minor - after.available_minor).toBe(winner.ok ? winner.view.total_locked_minor : NaN);
    const { rows } = await app.testDatabase.database.query<{ committed_minor: number }>('SELECT committed_minor FROM withdrawal_refund_allowances WHERE deposit_id = $1', [deposit.id]);
    expect(rows).toEqual([{ committed_minor: 60_000 }]);
  });

  it('the database refuses a claim beyond the deposit’s credit even when the statement’s condition is bypassed', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    await created(owner, deposit.id, 100_000);
    await expect(
      app.testDatabase.database.query('UPDATE withdrawal_refund_allowances SET committed_minor = committed_minor + 100 WHERE deposit_id = $1', [deposit.id]),
    ).rejects.toThrow(/withdrawal_refund_allowances_within_cap/);
  });
});

/** Lets `total_ms` pass on the test clock a second at a time, running every job as it falls due (the sandbox's fills). */
async function passTime(total_ms: number): Promise<void> {
  for (let passed = 0; passed < total_ms; passed += 1_000) {
    app.clock.advance(1_000);
    await runJobs(app);
  }
}

/** Passes time a second at a time until the refund has `fills` settled fills (at most a minute); returns it and how long it took. */
async function untilFilled(owner: MerchantCredentials, id: string, fills: number): Promise<{ order: WithdrawalView; waited_ms: number }> {
  const started = app.clock.now().getTime();
  for (;;) {
    const order = await withdrawalOf(app, owner, id);
    if (order.settled_splits >= fills) return { order, waited_ms: app.clock.now().getTime() - started };
    if (app.clock.now().getTime() - started > 60_000) throw new Error(`refund ${id} has ${order.settled_splits} fills, not ${fills}, after a minute`);
    await passTime(1_000);
  }
}

/** The balance transactions of one refund, from the merchant's feed (balance.* events carry them). */
async function movementsOf(owner: MerchantCredentials, order_id: string): Promise<{ type: string; amount_minor: number }[]> {
  return (await eventsOfMerchant(app, owner.merchant_id))
    .map((event) => event.data.object as { object?: string; type?: string; amount_minor?: number; source?: { id: string } })
    .filter((object) => object.object === 'balance_transaction' && object.source?.id === order_id)
    .map((object) => ({ type: object.type!, amount_minor: object.amount_minor! }));
}

describe('a refund’s life as a withdrawal', () => {
  it('is filled in two chunks by the sandbox counterparty’s deposits within seconds, with every event and wallet movement; the deposit counts what was paid', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const order = await created(owner, deposit.id, 50_000);
    const afterCreation = await balanceOf(app, owner);
    const { order: settled, waited_ms } = await untilFilled(owner, order.id, 2);
    // The first chunk comes 5 s after creation, the second 5 s after the first fill; each settles from its slip at once.
    expect(waited_ms).toBeLessThanOrEqual(12_000);
    expect(settled).toMatchObject({ status: 'settled', filled_minor: 50_000, remaining_minor: 0, reserved_minor: 0, settled_splits: 2, fee_recognized_minor: order.fee_total_minor, refunded_minor: 0 });
    expect(settled.fills?.map((fill) => fill.amount_minor)).toEqual([25_000, 25_000]);
    const types = (await eventsOfMerchant(app, owner.merchant_id)).filter((event) => event.data.object.id === order.id).map((event) => event.type);
    expect(types).toEqual(['withdrawal.created', 'withdrawal.leg_reserved', 'withdrawal.filled', 'withdrawal.leg_reserved', 'withdrawal.filled']);
    // The reservation paid out: nothing came back to available, reserved lost amount and fee.
    const afterFills = await balanceOf(app, owner);
    expect(afterFills.available_minor).toBe(afterCreation.available_minor);
    expect(afterCreation.reserved_minor - afterFills.reserved_minor).toBe(order.total_locked_minor);
    const movements = await movementsOf(owner, order.id);
    expect(movements.map((movement) => movement.type).sort()).toEqual(['fee', 'fee', 'withdrawal_reserved', 'withdrawal_settled', 'withdrawal_settled']);
    expect(movements.filter((movement) => movement.type === 'withdrawal_settled').map((movement) => movement.amount_minor)).toEqual([25_000, 25_000]);
    expect(movements.filter((movement) => movement.type === 'fee').reduce((sum, movement) => sum + movement.amount_minor, 0)).toBe(order.fee_total_minor);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 50_000, amount_refunded_minor: 50_000, refund_ids: [order.id] });
    // Each chunk is a deposit of the sandbox counterparty, matched to this refund alone and settled from its slip.
    const { rows } = await app.testDatabase.database.query<{ merchant_id: string; status: string; settled_via: string }>(
      `SELECT d.merchant_id, d.status, d.settled_via FROM deposit_legs l JOIN deposit_orders d USING (white_label_id, deposit_id)
        WHERE l.withdrawal_id = $1 ORDER BY d.created_at`,
      [order.id],
    );
    expect(rows.map((row) => [row.status, row.settled_via])).toEqual([['settled', 'auto'], ['settled', 'auto']]);
    expect(rows[0]!.merchant_id).not.toBe(owner.merchant_id);
  });

});

describe('a refund stopped midway', () => {
  it('canceled midway (118.00 THB: one chunk filled, then left) returns its remainder and unused fee, and gives the unpaid part back to refund again', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const order = await created(owner, deposit.id, 11_800);
    await untilFilled(owner, order.id, 1);
    // The scenario leaves the rest: no second chunk comes.
    await passTime(20_000);
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'partially_filled', filled_minor: 5_900, remaining_minor: 5_900, reserved_minor: 0, settled_splits: 1 });
    const before = await balanceOf(app, owner);
    const cancel = await app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${order.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: owner });
    expect(cancel.statusCode, cancel.body).toBe(200);
    const canceled = cancel.json<WithdrawalView>();
    expect(canceled).toMatchObject({ status: 'canceled', filled_minor: 5_900, remaining_minor: 0, canceled_by: 'merchant' });
    expect(canceled.refunded_minor).toBe(5_900 + order.fee_total_minor - canceled.fee_recognized_minor);
    expect((await balanceOf(app, owner)).available_minor - before.available_minor).toBe(canceled.refunded_minor);
    expect((await movementsOf(owner, order.id)).map((movement) => movement.type).sort()).toEqual(['fee', 'withdrawal_released', 'withdrawal_reserved', 'withdrawal_settled']);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 94_100, amount_refunded_minor: 5_900, refund_ids: [order.id] });
    const again = await created(owner, deposit.id, 94_100);
    expect(again.refund_of_deposit_id).toBe(deposit.id);
  });

});

describe('refunds of a reversed deposit', () => {
  it('a reversal of the deposit after a partial refund cancels what is not paid yet; the paid part stays paid', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const order = await created(owner, deposit.id, 11_800);
    await untilFilled(owner, order.id, 1);
    const reversed = await app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${deposit.id}/reverse`, token: operator, body: { reason_code: 'BANK_RECALL', note: 'ธนาคารเรียกคืนเงินรายการนี้ ตรวจสอบแล้ว' } });
    expect(reversed.statusCode, reversed.body).toBe(200);
    const stopped = await withdrawalOf(app, owner, order.id);
    expect(stopped).toMatchObject({ status: 'canceled', cancel_reason_code: 'deposit_reversed', canceled_by: 'system', filled_minor: 5_900 });
    expect((await getDeposit(app, deposit.id, owner))).toMatchObject({ status: 'reversed', refunds: { amount_refundable_minor: 0, amount_refunded_minor: 5_900, refund_ids: [order.id] } });
    const refused = await refund(owner, deposit.id, { amount_minor: 10_000, reason_code: 'customer_request' });
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused)).toMatchObject({ code: 'deposit_not_refundable', details: { status: 'reversed' } });
  });

  it('a refund with a chunk in transfer when its deposit is reversed takes no new chunk, finishes that one, and expires', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    await runJobs(app);
    const order = await created(owner, deposit.id, 50_000);
    // The sandbox's first chunk falls due; its step alone runs: the counterparty's deposit of 25,000 is matched to the
    // refund and its slip uploaded, not yet verified: 25,000 in transfer.
    app.clock.advance(5_000);
    for (let runs = 0; runs < 20 && (await withdrawalOf(app, owner, order.id)).reserved_minor === 0; runs += 1) await app.instance.worker.runDueJobs({ limit: 1 });
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'open', reserved_minor: 25_000 });
    const reversed = await app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${deposit.id}/reverse`, token: operator, body: { reason_code: 'BANK_RECALL', note: 'ธนาคารเรียกคืนเงินรายการนี้ ตรวจสอบแล้ว' } });
    expect(reversed.statusCode, reversed.body).toBe(200);
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'open', reserved_minor: 25_000 });
    // The chunk in transfer is verified, paid and counts; the sandbox makes no second chunk for it.
    await passTime(30_000);
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'partially_filled', filled_minor: 25_000, reserved_minor: 0, settled_splits: 1 });
    // At its own deadline it expires and returns the rest with its unused fee.
    app.clock.set(new Date(Date.parse(order.expires_at) + 1));
    await runJobs(app);
    const expired = await withdrawalOf(app, owner, order.id);
    expect(expired).toMatchObject({ status: 'expired', filled_minor: 25_000 });
    expect(expired.refunded_minor).toBe(25_000 + order.fee_total_minor - expired.fee_recognized_minor);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 0, amount_refunded_minor: 25_000, refund_ids: [order.id] });
  });
});

describe('the sandbox’s steps', () => {
  it('none failed or is being retried: every fill step of the refunds above did what it set out to do', async () => {
    const { rows } = await app.testDatabase.database.query<{ task: string; last_error: string | null; status: string }>(
      "SELECT task, last_error, status FROM jobs WHERE status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL)",
    );
    expect(rows).toEqual([]);
  });
});
