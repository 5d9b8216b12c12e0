import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, eventsOfMerchant, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { accountOf, fundAvailable } from '../support/withdrawals.ts';
import { balanceOf, clearCredits, settledDeposit, withdrawalOf } from '../support/refunds.ts';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS } from '../../src/platform/time.ts';
import { SANDBOX_REFUND_SCENARIOS, SANDBOX_SCENARIOS, sandboxFillOf } from '../../src/sandbox/scenario-table.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import type { TestClockView } from '../../src/test-clocks/service.ts';

/**
 * The sandbox fills test-mode refunds (issue 32): a refund made over POST /v1/pay/deposits/{id}/refunds with a
 * sandbox key is filled by the sandbox counterparty's deposits a few seconds later, through the sandbox bank's
 * transfers, their slips and the worker's verification, and the refund scenarios (117.00 and 118.00 THB, and the
 * spec's withdrawal rows 107.00 and 113.00) end as their rows say. Time passes on the test clock while the worker
 * runs what falls due; one test runs on a merchant's own test clock, advanced over HTTP.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
  // The brand's sandbox counterparty is opened by the first deposit that needs it: opened here in real time,
  // its standing withdrawal stays off the test clock of the clock test below (docs/decisions/test-clocks.md).
  await createDeposit(app, { amount_minor: 15_000 });
});
afterAll(async () => {
  await app.close();
});

const iso = (instant: Date | number): string => new Date(instant).toISOString();

async function newMerchant(white_label_id: string = app.sandbox.white_label_id): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id });
}

async function passTime(total_ms: number, step_ms = SECOND_MS): Promise<void> {
  for (let passed = 0; passed < total_ms; passed += step_ms) {
    app.clock.advance(Math.min(step_ms, total_ms - passed));
    await runJobs(app);
  }
}

/** A deposit that settled from its declared sender (the proven payer a refund pays), its credit cleared, and money for fees. */
async function refundableDeposit(owner: MerchantCredentials, amount_minor = 100_000): Promise<DepositView> {
  const deposit = await settledDeposit(app, owner, amount_minor);
  await clearCredits(app, owner);
  return deposit;
}

function postRefund(owner: MerchantCredentials, deposit_id: string, amount_minor: number) {
  return app.signed({ method: 'POST', url: `/v1/pay/deposits/${deposit_id}/refunds`, idempotency_key: crypto.randomUUID(), credentials: owner, body: { amount_minor, reason_code: 'customer_request' } });
}

async function refundOf(owner: MerchantCredentials, deposit_id: string, amount_minor: number): Promise<WithdrawalView> {
  const response = await postRefund(owner, deposit_id, amount_minor);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<WithdrawalView>();
}

async function typesOf(owner: MerchantCredentials, object_id: string): Promise<string[]> {
  return (await eventsOfMerchant(app, owner.merchant_id)).filter((event) => event.data.object.id === object_id).map((event) => event.type);
}

async function scenarioJobsOf(order_id: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query(`SELECT 1 FROM jobs WHERE task = 'sandbox.scenario_step' AND payload->>'order_id' = $1`, [order_id]);
  return rows.length;
}

describe('the refund scenario table', () => {
  it('uses amounts of no spec row, and says how the sandbox fills each kind of order', () => {
    const spec = new Set(SANDBOX_SCENARIOS.map((row) => row.amount_minor as number));
    expect(SANDBOX_REFUND_SCENARIOS.map((row) => row.amount_minor)).toEqual([11_700, 11_800]);
    for (const row of SANDBOX_REFUND_SCENARIOS) expect(spec.has(row.amount_minor)).toBe(false);
    const refund = (amount_total_minor: number, livemode = false) => sandboxFillOf({ livemode, amount_total_minor, refund_of_deposit_id: 'dep_x' });
    expect([refund(50_000), refund(100), refund(10_700), refund(11_700), refund(11_800), refund(50_000, true)]).toEqual([
      { chunks: 2, paid: 2 },
      { chunks: 1, paid: 1 },
      { chunks: 3, paid: 3 },
      { chunks: 2, paid: 0 },
      { chunks: 2, paid: 1 },
      null,
    ]);
    // A withdrawal that is no refund is the brand's depositors' to fill, except 107.00 THB.
    expect(sandboxFillOf({ livemode: false, amount_total_minor: 11_700, refund_of_deposit_id: null })).toBeNull();
    expect(sandboxFillOf({ livemode: false, amount_total_minor: 10_700, refund_of_deposit_id: null })).toEqual({ chunks: 3, paid: 3 });
  });
});

describe('test-mode refunds the sandbox fills', () => {
  it('a refund of 1.00 THB is filled in one chunk, 5 seconds after it opens', async () => {
    const owner = await newMerchant();
    const deposit = await refundableDeposit(owner, 20_000);
    const order = await refundOf(owner, deposit.id, 100);
    await passTime(4_000);
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'open', settled_splits: 0 });
    await passTime(2_000);
    const settled = await withdrawalOf(app, owner, order.id);
    expect(settled).toMatchObject({ status: 'settled', filled_minor: 100, settled_splits: 1 });
    expect(settled.fills?.map((fill) => fill.amount_minor)).toEqual([100]);
    expect(await typesOf(owner, order.id)).toEqual(['withdrawal.created', 'withdrawal.leg_reserved', 'withdrawal.filled']);
  });

  it('107.00 THB as a refund: the spec’s row, three chunks', async () => {
    const owner = await newMerchant();
    const deposit = await refundableDeposit(owner);
    const order = await refundOf(owner, deposit.id, 10_700);
    await passTime(30_000);
    const settled = await withdrawalOf(app, owner, order.id);
    expect(settled).toMatchObject({ status: 'settled', filled_minor: 10_700, settled_splits: 3, refund_of_deposit_id: deposit.id });
    expect(settled.fills?.map((fill) => fill.amount_minor)).toEqual([3_500, 3_600, 3_600]);
  });

  it('113.00 THB as a refund: 402 insufficient_balance whatever the balance, and nothing is claimed of the deposit', async () => {
    const owner = await newMerchant();
    const deposit = await refundableDeposit(owner);
    const response = await postRefund(owner, deposit.id, 11_300);
    expect(response.statusCode, response.body).toBe(402);
    expect(errorOf(response)).toMatchObject({ code: 'insufficient_balance' });
    expect(errorOf(response).details.available_minor).toBeGreaterThan(11_300);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toEqual({ amount_refundable_minor: 100_000, amount_refunded_minor: 0, refund_ids: [] });
  });

});

describe('the refund scenarios', () => {
  it('117.00 THB: left unfilled; the merchant’s cancel returns the amount and fee, and another expires at its deadline', async () => {
    const owner = await newMerchant();
    const deposit = await refundableDeposit(owner);
    const before = await balanceOf(app, owner);
    const canceledOne = await refundOf(owner, deposit.id, 11_700);
    const expiringOne = await refundOf(owner, deposit.id, 11_700);
    expect(await scenarioJobsOf(canceledOne.id)).toBe(0);
    // Other merchants' deposits of the brand (matched meanwhile) never take it: it is out of the matching queue.
    await createDeposit(app, { amount_minor: 11_700, credentials: await newMerchant() });
    await passTime(60_000, 5_000);
    expect(await withdrawalOf(app, owner, canceledOne.id)).toMatchObject({ status: 'open', filled_minor: 0, reserved_minor: 0, settled_splits: 0 });
    const cancel = await app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${canceledOne.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: owner });
    expect(cancel.statusCode, cancel.body).toBe(200);
    expect(cancel.json<WithdrawalView>()).toMatchObject({ status: 'canceled', filled_minor: 0, refunded_minor: 11_700 + canceledOne.fee_total_minor });
    app.clock.advance(DAY_MS);
    await runJobs(app);
    const expired = await withdrawalOf(app, owner, expiringOne.id);
    expect(expired).toMatchObject({ status: 'expired', filled_minor: 0, refunded_minor: 11_700 + expiringOne.fee_total_minor });
    expect(await typesOf(owner, expiringOne.id)).toEqual(['withdrawal.created', 'withdrawal.expired']);
    expect((await balanceOf(app, owner)).available_minor).toBe(before.available_minor);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toMatchObject({ amount_refundable_minor: 100_000, amount_refunded_minor: 0 });
  });

  it('118.00 THB: one chunk of 59.00 filled, the rest left until the deadline returns it with the unused fee', async () => {
    const owner = await newMerchant();
    const deposit = await refundableDeposit(owner);
    const order = await refundOf(owner, deposit.id, 11_800);
    await passTime(60_000, 2_000);
    const partly = await withdrawalOf(app, owner, order.id);
    expect(partly).toMatchObject({ status: 'partially_filled', filled_minor: 5_900, remaining_minor: 5_900, reserved_minor: 0, settled_splits: 1 });
    app.clock.advance(DAY_MS);
    await runJobs(app);
    const expired = await withdrawalOf(app, owner, order.id);
    expect(expired).toMatchObject({ status: 'expired', filled_minor: 5_900 });
    expect(expired.refunded_minor).toBe(5_900 + order.fee_total_minor - expired.fee_recognized_minor);
    expect(await typesOf(owner, order.id)).toEqual(['withdrawal.created', 'withdrawal.leg_reserved', 'withdrawal.filled', 'withdrawal.expired']);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toMatchObject({ amount_refundable_minor: 94_100, amount_refunded_minor: 5_900 });
  });

});

describe('what the sandbox leaves to its time', () => {
  it('a refund waiting for approval is filled within seconds of its approval, not before', async () => {
    const brand = (await app.createMerchant()).white_label_id;
    const policy = { white_label_id: brand, mode: 'test', approval_threshold_minor: 30_000, approval_ttl_seconds: 3600, expires_in_seconds: 86_400, max_splits: 10, min_amount_minor: 100, max_amount_minor: 10_000_000 };
    const set = await app.backoffice({ method: 'POST', url: '/v1/bo/withdrawal-policy', body: policy });
    expect(set.statusCode, set.body).toBe(200);
    const operator = (await app.instance.services.tenancy.createBackofficeCredential({ actor_type: 'system', actor_id: 'test', request_id: null }, { white_label_id: brand, role: 'operator', name: 'Approver' })).token;
    const owner = await newMerchant(brand);
    const deposit = await refundableDeposit(owner);
    const order = await refundOf(owner, deposit.id, 40_000);
    expect(order.status).toBe('pending_approval');
    await passTime(60_000, 5_000);
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'pending_approval', settled_splits: 0 });
    const approved = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/approve`, body: { note: 'checked' }, token: operator });
    expect(approved.statusCode, approved.body).toBe(200);
    await passTime(12_000);
    const settled = await withdrawalOf(app, owner, order.id);
    expect(settled).toMatchObject({ status: 'settled', filled_minor: 40_000, settled_splits: 2 });
    expect(settled.fills?.map((fill) => fill.amount_minor)).toEqual([20_000, 20_000]);
  });

  it('a live refund is never filled by the sandbox: it is in the matching queue and has no scenario step', async () => {
    const live = await app.createMerchant({ livemode: true });
    const account = accountOf(live, true);
    await fundAvailable(app, account, 100_000);
    // A live deposit for the refund's claim to name (its allowance refers to it); a live payer cannot be proven here,
    // so the refund is made through the withdrawal service as the refunds layer would, with the deposit's terms.
    const depositResponse = await app.signed({
      method: 'POST',
      url: '/v1/pay/deposits',
      idempotency_key: crypto.randomUUID(),
      credentials: live,
      body: { amount_minor: 50_000, currency: 'THB', merchant_reference: `live-${crypto.randomUUID()}`, end_user_ref: 'live-payer', sender: { bank_code: '014', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } },
    });
    expect([201, 202], depositResponse.body).toContain(depositResponse.statusCode);
    const deposit_id = depositResponse.json<DepositView>().id;
    const created = await app.testDatabase.database.transaction(async (tx) => {
      const { beneficiary } = await app.instance.services.beneficiaries.create(tx, account, { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }, SYSTEM_CAUSE);
      return app.instance.services.withdrawals.create(
        tx,
        account,
        { amount_minor: 20_000, merchant_reference: `live-refund-${crypto.randomUUID()}`, end_user_ref: 'live-payer', beneficiary_id: beneficiary.id, refund: { deposit_id, reason_code: 'customer_request', note: null, refundable_cap_minor: 50_000 } },
        SYSTEM_CAUSE,
      );
    });
    if (!created.ok) throw new Error(created.error.code);
    expect(created.value).toMatchObject({ livemode: true, refund_of_deposit_id: deposit_id, status: 'open' });
    await passTime(30_000, 5_000);
    expect(await withdrawalOf(app, live, created.value.id)).toMatchObject({ status: 'open', settled_splits: 0, filled_minor: 0 });
    expect(await scenarioJobsOf(created.value.id)).toBe(0);
    const { rows } = await app.testDatabase.database.query<{ in_matching_queue: boolean }>('SELECT in_matching_queue FROM withdrawal_orders WHERE withdrawal_id = $1', [created.value.id]);
    expect(rows).toEqual([{ in_matching_queue: true }]);
  });
});

describe('a refund on the merchant’s test clock', () => {
  function post(owner: MerchantCredentials, url: string, body?: unknown) {
    return app.signed({ method: 'POST', url, body, idempotency_key: crypto.randomUUID(), credentials: owner });
  }

  async function advanceTo(owner: MerchantCredentials, clock_id: string, target: number): Promise<void> {
    const response = await post(owner, `/v1/test/clocks/${clock_id}/advance`, { frozen_time: iso(target) });
    expect(response.statusCode, response.body).toBe(202);
    await runJobs(app);
    const after = await app.signed({ url: `/v1/test/clocks/${clock_id}`, credentials: owner });
    expect(after.json<TestClockView>()).toMatchObject({ status: 'ready', frozen_time: iso(target) });
  }

  it('a deposit made on the clock, its credit cleared by advancing 72 h, then refunded: a few seconds of the clock fill it', async () => {
    const owner = await newMerchant();
    // Ahead of real time: the order's slip capability is issued in the clock's time (docs/decisions/test-clocks.md).
    const frozen = Math.floor((app.clock.now().getTime() + 2 * DAY_MS) / SECOND_MS) * SECOND_MS;
    const clock = await post(owner, '/v1/test/clocks', { frozen_time: iso(frozen) });
    expect(clock.statusCode, clock.body).toBe(201);
    const clock_id = clock.json<TestClockView>().id;
    expect((await post(owner, `/v1/test/clocks/${clock_id}/attach`)).statusCode).toBe(200);

    const deposit = await createDeposit(app, { amount_minor: 20_000, credentials: owner });
    const upload = await uploadMultipart(app, deposit.slip_upload, slipBytes(await sandboxTransfer(app, deposit, {}, owner)));
    expect(upload.statusCode, upload.body).toBe(202);
    await advanceTo(owner, clock_id, frozen + MINUTE_MS);
    expect((await getDeposit(app, deposit.id, owner)).status).toBe('settled');
    // Pending clearing cannot fund a refund yet.
    expect((await postRefund(owner, deposit.id, 10_000)).statusCode).toBe(402);
    await advanceTo(owner, clock_id, frozen + 72 * HOUR_MS + SECOND_MS);
    expect((await balanceOf(app, owner)).pending_clearing_minor).toBe(0);

    const order = await refundOf(owner, deposit.id, 10_000);
    expect(order.created_at).toBe(iso(frozen + 72 * HOUR_MS + SECOND_MS));
    // Real time alone does nothing for it: its steps are the clock's jobs.
    await passTime(30_000, 5_000);
    expect(await withdrawalOf(app, owner, order.id)).toMatchObject({ status: 'open', settled_splits: 0 });
    await advanceTo(owner, clock_id, frozen + 72 * HOUR_MS + 16 * SECOND_MS);
    const settled = await withdrawalOf(app, owner, order.id);
    expect(settled).toMatchObject({ status: 'settled', filled_minor: 10_000, settled_splits: 2 });
    expect(settled.fills?.map((fill) => fill.amount_minor)).toEqual([5_000, 5_000]);
    const { rows } = await app.testDatabase.database.query<{ type: string; created_at: Date; test_clock_id: string | null }>(
      'SELECT type, created_at, test_clock_id FROM events WHERE object_id = $1 ORDER BY sequence',
      [order.id],
    );
    expect(rows.map((row) => row.type)).toEqual(['withdrawal.created', 'withdrawal.leg_reserved', 'withdrawal.filled', 'withdrawal.leg_reserved', 'withdrawal.filled']);
    expect(rows.every((row) => row.test_clock_id === clock_id)).toBe(true);
    // Every event is in the clock's time, within the 15 s advanced.
    for (const row of rows) expect(row.created_at.getTime() - (frozen + 72 * HOUR_MS + SECOND_MS)).toBeLessThanOrEqual(15 * SECOND_MS);
  });
});

describe('the sandbox’s steps', () => {
  it('none failed or is being retried: every fill step of the refunds above did what it set out to do', async () => {
    // The live payee of the live refund above waits for a live bank directory, which tests have not: its verification
    // is retried by design, so beneficiaries' jobs are not counted here.
    const { rows } = await app.testDatabase.database.query<{ task: string; last_error: string | null; status: string }>(
      "SELECT task, last_error, status FROM jobs WHERE task <> 'beneficiaries.verify' AND (status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL))",
    );
    expect(rows).toEqual([]);
  });
});
