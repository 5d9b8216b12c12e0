import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { accountOf, fundAvailable, inTransaction, SOMYING, verifiedBeneficiary } from '../support/withdrawals.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { WalletAccount } from '../../src/ledger/types.ts';
import { heldInWallet, WITHDRAWAL_TRANSITIONS, type WithdrawalService, type WithdrawalView } from '../../src/withdrawals/service.ts';
import { WITHDRAWAL_STATUSES } from '../../src/withdrawals/types.ts';
import { Rollback } from '../../src/platform/db.ts';
import { readMigrations } from '../../src/platform/migrate.ts';

/**
 * Withdrawal orders (issue 3, item 7) and the functions the deposit side calls (item 8), through the
 * HTTP routes and the service. Each describe block works on merchants of its own, so the blocks do
 * not share balances.
 */

let app: TestApp;
let withdrawals: WithdrawalService;
let referenceCounter = 0;

const HOUR_MS = 3600_000;
/** Platform default withdrawal fee: 10 baht fixed + 7 % VAT. */
const FEE_MINOR = 1_070;

beforeAll(async () => {
  app = await createTestApp();
  withdrawals = app.instance.services.withdrawals;
});
afterAll(async () => {
  await app.close();
});

interface Payer {
  credentials: MerchantCredentials;
  account: WalletAccount;
  beneficiary_id: string;
}

/** A merchant of the sandbox brand with a verified beneficiary and `funds_minor` available. */
async function newPayer(funds_minor: number): Promise<Payer> {
  const credentials = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  const account = accountOf(credentials);
  if (funds_minor > 0) await fundAvailable(app, account, funds_minor);
  return { credentials, account, beneficiary_id: await verifiedBeneficiary(app, account) };
}

function nextReference(): string {
  referenceCounter += 1;
  return `wd-${referenceCounter}`;
}

function createBody(payer: Payer, amount_minor: number, extra: Record<string, unknown> = {}) {
  return { amount_minor, currency: 'THB', merchant_reference: nextReference(), end_user_ref: 'user-1', beneficiary_id: payer.beneficiary_id, ...extra };
}

async function postWithdrawal(payer: Payer, body: unknown, idempotency_key = `idem-${nextReference()}`) {
  return app.signed({ method: 'POST', url: '/v1/pay/withdrawals', body, idempotency_key, credentials: payer.credentials });
}

async function createOrder(payer: Payer, amount_minor: number): Promise<WithdrawalView> {
  const response = await postWithdrawal(payer, createBody(payer, amount_minor));
  expect(response.statusCode, response.body).toBe(201);
  return response.json<WithdrawalView>();
}

async function balanceOf(payer: Payer) {
  const response = await app.signed({ url: '/v1/pay/balance', credentials: payer.credentials });
  return response.json<{ available_minor: number; pending_clearing_minor: number; reserved_minor: number }>();
}

async function getOrder(payer: Payer, id: string): Promise<WithdrawalView> {
  const response = await app.signed({ url: `/v1/pay/withdrawals/${id}`, credentials: payer.credentials });
  expect(response.statusCode).toBe(200);
  return response.json<WithdrawalView>();
}

async function eventsOf(id: string): Promise<{ type: string; data: { object: Record<string, unknown>; previous_attributes?: Record<string, unknown> | null } }[]> {
  const { rows } = await app.testDatabase.database.query<{ type: string; text: string }>(
    'SELECT type, envelope::text AS text FROM events WHERE object_id = $1 ORDER BY sequence',
    [id],
  );
  return rows.map((row) => ({ type: row.type, data: (JSON.parse(row.text) as { data: never }).data }));
}

async function movementsOf(payer: Payer) {
  const { rows } = await app.testDatabase.database.query<{ type: string; amount_minor: number; bucket_from: string | null; bucket_to: string | null; available_after: number }>(
    'SELECT type, amount_minor, bucket_from, bucket_to, available_after FROM balance_transactions WHERE merchant_id = $1 ORDER BY sequence',
    [payer.account.merchant_id],
  );
  return rows;
}

async function countOrders(payer: Payer): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM withdrawal_orders WHERE merchant_id = $1', [
    payer.account.merchant_id,
  ]);
  return Number(rows[0]?.count);
}

async function expectConsistent(payer: Payer): Promise<void> {
  const check = await app.instance.services.ledger.verify(app.testDatabase.database, payer.account);
  expect(check.consistent).toBe(true);
  // The wallet's reserved bucket is exactly what the merchant's live orders still hold.
  const { rows } = await app.testDatabase.database.query<Parameters<typeof heldInWallet>[0]>(
    'SELECT status, remaining_minor, reserved_minor, fee_total_minor, fee_recognized_minor FROM withdrawal_orders WHERE merchant_id = $1',
    [payer.account.merchant_id],
  );
  expect(rows.reduce((sum, row) => sum + heldInWallet(row), 0)).toBe(check.wallet.reserved_minor);
}

const cause = SYSTEM_CAUSE;

function reserve(order: WithdrawalView, amount_minor: number, key = `dleg-${nextReference()}`) {
  return inTransaction(app, (tx) =>
    withdrawals.reserveLeg(tx, {
      white_label_id: app.sandbox.white_label_id,
      livemode: false,
      withdrawal_id: order.id,
      deposit_id: 'dep_01K0TESTDEPOSIT00000000000',
      deposit_leg_key: key,
      amount_minor,
      cause,
    }),
  );
}

async function reserveOk(order: WithdrawalView, amount_minor: number): Promise<string> {
  const result = await reserve(order, amount_minor);
  if (!result.ok) throw result.error;
  return result.value.leg_ref;
}

function fill(leg_ref: string, amount_minor?: number) {
  return inTransaction(app, (tx) =>
    withdrawals.recordFill(tx, { white_label_id: app.sandbox.white_label_id, leg_ref, cause, ...(amount_minor !== undefined ? { amount_minor } : {}) }),
  );
}

function release(leg_ref: string) {
  return inTransaction(app, (tx) => withdrawals.releaseLeg(tx, { white_label_id: app.sandbox.white_label_id, leg_ref, reason_code: 'deposit_expired', cause }));
}

function reverse(leg_ref: string) {
  return inTransaction(app, (tx) => withdrawals.reverseFill(tx, { white_label_id: app.sandbox.white_label_id, leg_ref, reason_code: 'deposit_reversed', cause }));
}

// ---------------------------------------------------------------------------------------------------

describe('POST /v1/pay/withdrawals: happy', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(1_000_000);
  });

  it('creates an open order (201), locks amount plus fee, and writes withdrawal.created and balance.debited', async () => {
    const body = createBody(payer, 500_000, { metadata: { order: 'A-1', note: 'ถอนเงิน 🙏' }, client: { device_fingerprint: 'fp', ip: '10.0.0.1', user_agent: 'ua' } });
    const response = await postWithdrawal(payer, body);
    expect(response.statusCode).toBe(201);
    const order = response.json<WithdrawalView>();
    expect(order).toEqual({
      id: expect.stringMatching(/^wdr_[0-9A-Z]{26}$/) as string,
      object: 'withdrawal_order',
      version: 1,
      status: 'open',
      merchant_reference: body.merchant_reference,
      end_user_ref: 'user-1',
      beneficiary_id: payer.beneficiary_id,
      currency: 'THB',
      amount_total_minor: 500_000,
      fee_total_minor: FEE_MINOR,
      total_locked_minor: 501_070,
      fee_breakdown: [
        { component: 'processing_fee', amount_minor: 0, rate_bps: 0 },
        { component: 'fixed_fee', amount_minor: 1_000 },
        { component: 'vat', amount_minor: 70, rate_bps: 700 },
      ],
      fee_recognized_minor: 0,
      filled_minor: 0,
      reserved_minor: 0,
      remaining_minor: 500_000,
      settled_splits: 0,
      max_splits: 10,
      expires_at: new Date(app.clock.now().getTime() + 24 * HOUR_MS).toISOString(),
      funds_on_hold: false,
      metadata: { order: 'A-1', note: 'ถอนเงิน 🙏' },
      livemode: false,
      created_at: app.clock.now().toISOString(),
    });
    expect(await balanceOf(payer)).toMatchObject({ available_minor: 1_000_000 - 501_070, reserved_minor: 501_070 });
    const events = await eventsOf(order.id);
    expect(events.map((event) => event.type)).toEqual(['withdrawal.created']);
    expect(events[0]!.data.previous_attributes).toBeNull();
    expect(events[0]!.data.object).toEqual(order);
    const movements = await movementsOf(payer);
    expect(movements.at(-1)).toMatchObject({ type: 'withdrawal_reserved', amount_minor: 501_070, bucket_from: 'available', bucket_to: 'reserved' });
    await expectConsistent(payer);
  });

  it('GET answers the order with fills[]; another merchant and the live environment get 404', async () => {
    const order = await createOrder(payer, 10_000);
    expect(await getOrder(payer, order.id)).toEqual({ ...order, fills: [] });
    const stranger = await newPayer(0);
    const foreign = await app.signed({ url: `/v1/pay/withdrawals/${order.id}`, credentials: stranger.credentials });
    expect(foreign.statusCode).toBe(404);
    expect(errorOf(foreign).code).toBe('resource_not_found');
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const liveCredentials = { ...live, merchant_id: payer.account.merchant_id };
    expect((await app.signed({ url: `/v1/pay/withdrawals/${order.id}`, credentials: liveCredentials })).statusCode).toBe(404);
    expect((await app.signed({ url: '/v1/pay/withdrawals/wdr_01K0NOTEXISTING000000000000', credentials: payer.credentials })).statusCode).toBe(404);
  });

  it('replays the same request byte for byte, and refuses the key with another body', async () => {
    const body = createBody(payer, 20_000);
    const first = await postWithdrawal(payer, body, 'replay-key-1');
    const again = await postWithdrawal(payer, body, 'replay-key-1');
    expect(again.statusCode).toBe(201);
    expect(again.body).toBe(first.body);
    expect(again.headers['idempotent-replay']).toBe('true');
    const other = await postWithdrawal(payer, { ...body, amount_minor: 20_001 }, 'replay-key-1');
    expect(other.statusCode).toBe(409);
    expect(errorOf(other).code).toBe('idempotency_key_reused');
  });
});

describe('POST /v1/pay/withdrawals: errors', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(101_070);
  });

  it('402 insufficient_balance with the spec details, creating and locking nothing', async () => {
    await inTransaction(app, (tx) => app.instance.services.ledger.creditSettledDeposit(tx, { account: payer.account, deposit_id: 'dep_01K0PENDINGCREDIT0000000000', amount_minor: 50_000, cause }));
    const ordersBefore = await countOrders(payer);
    const movementsBefore = (await movementsOf(payer)).length;
    // One baht more than the balance covers (amounts are whole baht): 1,001.00 THB and its fee of 10.70 THB.
    const response = await postWithdrawal(payer, createBody(payer, 100_100));
    expect(response.statusCode).toBe(402);
    const error = errorOf(response);
    expect(error).toMatchObject({ code: 'insufficient_balance', retryable: true });
    expect(error.details).toEqual({
      available_minor: 101_070,
      required_minor: 101_170,
      pending_clearing_minor: 50_000,
      pending_clearing_available_at: new Date(app.clock.now().getTime() + 72 * HOUR_MS).toISOString(),
    });
    expect(await countOrders(payer)).toBe(ordersBefore);
    expect((await movementsOf(payer)).length).toBe(movementsBefore);
    expect(await balanceOf(payer)).toMatchObject({ available_minor: 101_070, reserved_minor: 0 });
    // Exactly enough is enough.
    expect((await postWithdrawal(payer, createBody(payer, 100_000))).statusCode).toBe(201);
    expect((await balanceOf(payer)).available_minor).toBe(0);
  });

  it('sandbox 113.00 THB always answers 402 insufficient_balance', async () => {
    const rich = await newPayer(10_000_000);
    const response = await postWithdrawal(rich, createBody(rich, 11_300));
    expect(response.statusCode).toBe(402);
    expect(errorOf(response).details).toMatchObject({ available_minor: 10_000_000, required_minor: 11_300 + FEE_MINOR });
    expect(await countOrders(rich)).toBe(0);
  });

  it('sandbox 113.00 THB answers 402 before the beneficiary is looked at: a pending one, or an inline one (nothing created)', async () => {
    const rich = await newPayer(10_000_000);
    const { beneficiary } = await inTransaction(app, (tx) => app.instance.services.beneficiaries.create(tx, rich.account, { ...SOMYING }, cause));
    const pending = await postWithdrawal(rich, { ...createBody(rich, 11_300), beneficiary_id: beneficiary.id });
    expect(pending.statusCode, pending.body).toBe(402);
    expect(errorOf(pending)).toMatchObject({ code: 'insufficient_balance', details: { required_minor: 11_300 + FEE_MINOR } });
    const inline = { bank_code: '004', account_number: '0987654399', account_name_th: 'ประเสริฐ มั่นคง' };
    const before = await app.testDatabase.database.query<{ count: string }>('SELECT count(*) AS count FROM beneficiaries WHERE merchant_id = $1', [rich.account.merchant_id]);
    const inlineAnswer = await postWithdrawal(rich, { amount_minor: 11_300, currency: 'THB', merchant_reference: nextReference(), end_user_ref: 'user-113', beneficiary: inline });
    expect(inlineAnswer.statusCode, inlineAnswer.body).toBe(402);
    const after = await app.testDatabase.database.query<{ count: string }>('SELECT count(*) AS count FROM beneficiaries WHERE merchant_id = $1', [rich.account.merchant_id]);
    expect(Number(after.rows[0]?.count)).toBe(Number(before.rows[0]?.count));
    expect(await countOrders(rich)).toBe(0);
  });

  it('409 merchant_reference_in_use for a second order with the same reference, locking nothing', async () => {
    const rich = await newPayer(1_000_000);
    const body = createBody(rich, 10_000);
    expect((await postWithdrawal(rich, body)).statusCode).toBe(201);
    const available = (await balanceOf(rich)).available_minor;
    const again = await postWithdrawal(rich, { ...body, amount_minor: 10_100 });
    expect(again.statusCode).toBe(409);
    expect(errorOf(again).code).toBe('merchant_reference_in_use');
    expect((await balanceOf(rich)).available_minor).toBe(available);
  });

  it('422 validation_error names every bad field; nothing is created', async () => {
    const cases: [Record<string, unknown>, { path: string; reason: string }][] = [
      [{ amount_minor: 0 }, { path: 'amount_minor', reason: 'too_small' }],
      [{ amount_minor: -5 }, { path: 'amount_minor', reason: 'too_small' }],
      [{ amount_minor: 100.5 }, { path: 'amount_minor', reason: 'must_be_integer' }],
      [{ amount_minor: '10000' }, { path: 'amount_minor', reason: 'must_be_number' }],
      [{ amount_minor: 1e13 }, { path: 'amount_minor', reason: 'too_large' }],
      [{ amount_minor: Number.MAX_SAFE_INTEGER + 2 }, { path: 'amount_minor', reason: 'too_large' }],
      [{ currency: 'USD' }, { path: 'currency', reason: 'not_allowed_value' }],
      [{ merchant_reference: 'x'.repeat(65) }, { path: 'merchant_reference', reason: 'too_long' }],
      [{ merchant_reference: '' }, { path: 'merchant_reference', reason: 'too_short' }],
      [{ end_user_ref: 'x'.repeat(65) }, { path: 'end_user_ref', reason: 'too_long' }],
      [{ beneficiary_id: undefined }, { path: 'beneficiary_id', reason: 'required' }],
      [{ beneficiary: { ...SOMYING } }, { path: 'beneficiary', reason: 'not_allowed_with' }],
      [{ metadata: Object.fromEntries(Array.from({ length: 21 }, (_, index) => [`k${index}`, 'v'])) }, { path: 'metadata', reason: 'too_many_keys' }],
      [{ metadata: { note: 'ก'.repeat(167) } }, { path: 'metadata.note', reason: 'too_long' }],
      [{ metadata: { note: 5 } }, { path: 'metadata.note', reason: 'must_be_string' }],
      [{ client: { ip: '1.1.1.1', os: 'x' } }, { path: 'client.os', reason: 'unknown_field' }],
      [{ surprise: true }, { path: 'surprise', reason: 'unknown_field' }],
    ];
    for (const [change, problem] of cases) {
      const body: Record<string, unknown> = { ...createBody(payer, 1_000), ...change };
      for (const [key, value] of Object.entries(change)) if (value === undefined) delete body[key];
      const response = await postWithdrawal(payer, body);
      expect(response.statusCode, JSON.stringify(change)).toBe(422);
      expect(errorOf(response).code).toBe('validation_error');
      expect((errorOf(response).details as { fields: unknown[] }).fields, JSON.stringify(change)).toContainEqual(expect.objectContaining(problem));
    }
    // 500 bytes of Thai (3 bytes a character) is within the limit.
    expect((await postWithdrawal(payer, createBody(payer, 1_000, { metadata: { note: 'ก'.repeat(166) } }))).statusCode).not.toBe(422);
  });

  it('422 amount_not_supported below the policy minimum, with min_minor and max_minor', async () => {
    const response = await postWithdrawal(payer, createBody(payer, 99));
    expect(response.statusCode).toBe(422);
    expect(errorOf(response)).toMatchObject({ code: 'amount_not_supported', details: { min_minor: 100, max_minor: 1_000_000_000_000 } });
  });

  it('422 amount_not_supported for an amount with satang (spec, Limits: whole baht), and nothing is reserved', async () => {
    const before = await balanceOf(payer);
    const response = await postWithdrawal(payer, createBody(payer, 100_050));
    expect(response.statusCode).toBe(422);
    expect(errorOf(response)).toMatchObject({ code: 'amount_not_supported', details: { min_minor: 100, max_minor: 1_000_000_000_000 } });
    expect(await balanceOf(payer)).toEqual(before);
  });

  it('404 for a beneficiary_id of another merchant; 409 beneficiary_not_verified for a pending one', async () => {
    const stranger = await newPayer(0);
    const foreign = await postWithdrawal(payer, { ...createBody(payer, 1_000), beneficiary_id: stranger.beneficiary_id });
    expect(foreign.statusCode).toBe(404);
    expect(errorOf(foreign).code).toBe('resource_not_found');
    const { beneficiary } = await inTransaction(app, (tx) => app.instance.services.beneficiaries.create(tx, payer.account, { ...SOMYING }, cause));
    const pending = await postWithdrawal(payer, { ...createBody(payer, 1_000), beneficiary_id: beneficiary.id });
    expect(pending.statusCode).toBe(409);
    expect(errorOf(pending)).toMatchObject({ code: 'beneficiary_not_verified', retryable: true, details: { beneficiary_id: beneficiary.id, status: 'pending_verification' } });
  });

  it('an inline beneficiary is created and verified although the answer is 409; the retry with the same key succeeds', async () => {
    const fresh = await newPayer(100_000);
    const inline = { bank_code: '004', account_number: '0987654321', account_name_th: 'ประเสริฐ มั่นคง' };
    const body = { amount_minor: 5_000, currency: 'THB', merchant_reference: nextReference(), end_user_ref: 'user-9', beneficiary: inline };
    const first = await postWithdrawal(fresh, body, 'inline-key');
    expect(first.statusCode).toBe(409);
    const error = errorOf(first);
    expect(error).toMatchObject({ code: 'beneficiary_not_verified', retryable: true, details: { status: 'pending_verification' } });
    expect(first.body).not.toContain('0987654321');
    expect(await countOrders(fresh)).toBe(0);
    expect((await balanceOf(fresh)).reserved_minor).toBe(0);
    const beneficiaryId = (error.details as { beneficiary_id: string }).beneficiary_id;
    expect((await eventsOf(beneficiaryId)).map((event) => event.type)).toEqual(['beneficiary.created']);

    app.clock.advance(2_000);
    await app.instance.worker.runDueJobs();
    const retry = await postWithdrawal(fresh, body, 'inline-key');
    expect(retry.statusCode).toBe(201);
    expect(retry.json<WithdrawalView>()).toMatchObject({ status: 'open', beneficiary_id: beneficiaryId, amount_total_minor: 5_000 });
  });
});

describe('POST /v1/pay/withdrawals/:id/cancel', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(1_000_000);
  });

  function cancel(id: string, credentials = payer.credentials) {
    return app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${id}/cancel`, idempotency_key: `cancel-${nextReference()}`, credentials });
  }

  it('cancels an open order: amount and fee return to available; a second cancel is 409 withdrawal_not_cancelable', async () => {
    const order = await createOrder(payer, 200_000);
    const before = await balanceOf(payer);
    const response = await cancel(order.id);
    expect(response.statusCode).toBe(200);
    const canceled = response.json<WithdrawalView>();
    // refunded_minor is what came back to the balance (amount plus fee); nothing stays open (spec).
    expect(canceled).toMatchObject({ status: 'canceled', version: 2, refunded_minor: 200_000 + FEE_MINOR, remaining_minor: 0, cancel_reason_code: 'merchant_request', canceled_by: 'merchant' });
    expect(canceled.closed_at).toBe(app.clock.now().toISOString());
    const after = await balanceOf(payer);
    expect(after.available_minor - before.available_minor).toBe(200_000 + FEE_MINOR);
    expect(before.reserved_minor - after.reserved_minor).toBe(200_000 + FEE_MINOR);
    const events = await eventsOf(order.id);
    expect(events.map((event) => event.type)).toEqual(['withdrawal.created', 'withdrawal.canceled']);
    // Keys that appear at close were absent before: previous_attributes reports them as null.
    expect(events[1]!.data.previous_attributes).toEqual({ status: 'open', remaining_minor: 200_000, refunded_minor: null, cancel_reason_code: null, canceled_by: null, closed_at: null, version: 1 });
    // The expiry deadline is gone with the order.
    const { rows } = await app.testDatabase.database.query<{ status: string }>("SELECT status FROM jobs WHERE job_key = $1", [`withdrawals.expire:${order.id}`]);
    expect(rows.map((row) => row.status)).not.toContain('pending');

    const again = await cancel(order.id);
    expect(again.statusCode).toBe(409);
    expect(errorOf(again)).toMatchObject({ code: 'withdrawal_not_cancelable', retryable: false, details: { status: 'canceled' } });
    await expectConsistent(payer);
  });

  it('409 withdrawal_has_pending_fill while a leg is in transfer, with retry_after_seconds; cancel works after release', async () => {
    const order = await createOrder(payer, 100_000);
    const leg = await reserveOk(order, 40_000);
    const refused = await cancel(order.id);
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused)).toMatchObject({ code: 'withdrawal_has_pending_fill', retryable: true, retry_after_seconds: 60 });
    expect((await getOrder(payer, order.id)).status).toBe('open');
    expect((await release(leg)).ok).toBe(true);
    const done = await cancel(order.id);
    expect(done.statusCode).toBe(200);
    expect(done.json<WithdrawalView>()).toMatchObject({ status: 'canceled', refunded_minor: 100_000 + FEE_MINOR, remaining_minor: 0, reserved_minor: 0 });
  });

  it('cancels a partially filled order: only the unpaid part and the unrecognised fee return', async () => {
    const order = await createOrder(payer, 100_000);
    const leg = await reserveOk(order, 30_000);
    const filled = await fill(leg);
    expect(filled.ok).toBe(true);
    const before = await balanceOf(payer);
    const response = await cancel(order.id);
    expect(response.statusCode).toBe(200);
    const canceled = response.json<WithdrawalView>();
    expect(canceled).toMatchObject({ status: 'canceled', filled_minor: 30_000, remaining_minor: 0, refunded_minor: 70_000 + FEE_MINOR - 321, fee_recognized_minor: 321 });
    expect((await balanceOf(payer)).available_minor - before.available_minor).toBe(canceled.refunded_minor);
    await expectConsistent(payer);
  });

  it('404 for another merchant’s order or an unknown id, changing nothing', async () => {
    const order = await createOrder(payer, 1_000);
    const stranger = await newPayer(0);
    const foreign = await cancel(order.id, stranger.credentials);
    expect(foreign.statusCode).toBe(404);
    expect((await getOrder(payer, order.id)).status).toBe('open');
    expect((await cancel('wdr_01K0NOTEXISTING000000000000')).statusCode).toBe(404);
  });
});

describe('legs and fills: the functions the deposit side calls', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(5_000_000);
  });

  it('reserves a leg (withdrawal.leg_reserved), fills it (withdrawal.filled with fill and auto_confirm_at +3 h)', async () => {
    const order = await createOrder(payer, 300_000);
    const reserved = await reserve(order, 100_000, 'deposit-leg-A');
    expect(reserved.ok).toBe(true);
    if (!reserved.ok) return;
    expect(reserved.value).toEqual({
      leg_ref: expect.stringMatching(/^wleg_/) as string,
      withdrawal_id: order.id,
      merchant_id: payer.account.merchant_id,
      beneficiary_id: payer.beneficiary_id,
      amount_minor: 100_000,
      status: 'reserved',
    });
    expect(await getOrder(payer, order.id)).toMatchObject({ version: 2, reserved_minor: 100_000, remaining_minor: 200_000, status: 'open' });
    // The same deposit leg reserves once.
    const again = await reserve(order, 100_000, 'deposit-leg-A');
    expect(again.ok && again.value.leg_ref).toBe(reserved.value.leg_ref);
    expect((await getOrder(payer, order.id)).version).toBe(2);

    // The payee the deposit side shows its payer.
    const destination = await inTransaction(app, (tx) => withdrawals.destinationOf(tx, app.sandbox.white_label_id, reserved.value.leg_ref));
    expect(destination).toEqual({ bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' });

    app.clock.advance(60_000);
    const filled = await fill(reserved.value.leg_ref);
    expect(filled.ok).toBe(true);
    if (!filled.ok) return;
    const settledAt = app.clock.now().toISOString();
    const expectedFill = {
      leg_ref: reserved.value.leg_ref,
      sequence: 1,
      amount_minor: 100_000,
      fee_recognized_minor: 356, // floor(1070 × 100000 / 300000)
      settled_at: settledAt,
      balance_transaction_id: expect.stringMatching(/^btxn_/) as string,
      auto_confirm_at: new Date(app.clock.now().getTime() + 3 * HOUR_MS).toISOString(),
    };
    expect(filled.value.fill).toEqual(expectedFill);
    expect(filled.value.withdrawal).toMatchObject({ status: 'partially_filled', version: 3, filled_minor: 100_000, reserved_minor: 0, remaining_minor: 200_000, fee_recognized_minor: 356, settled_splits: 1 });
    // Recording the same fill again returns it and changes nothing.
    const repeat = await fill(reserved.value.leg_ref);
    expect(repeat.ok && repeat.value.fill).toEqual(filled.value.fill);

    const events = await eventsOf(order.id);
    expect(events.map((event) => event.type)).toEqual(['withdrawal.created', 'withdrawal.leg_reserved', 'withdrawal.filled']);
    const filledEvent = events[2]!.data;
    expect(filledEvent.object.fill).toEqual(expectedFill);
    expect(filledEvent.previous_attributes).toEqual({ status: 'open', filled_minor: 0, fee_recognized_minor: 0, reserved_minor: 100_000, settled_splits: 0, version: 2 });
    expect((await getOrder(payer, order.id)).fills).toEqual([{ ...expectedFill, receipt_state: 'awaiting_confirmation' }]);

    // Money: the chunk and its fee share left the reserved bucket, each with its own event.
    const movements = await movementsOf(payer);
    expect(movements.slice(-2)).toEqual([
      expect.objectContaining({ type: 'withdrawal_settled', amount_minor: 100_000, bucket_from: 'reserved', bucket_to: null }),
      expect.objectContaining({ type: 'fee', amount_minor: 356, bucket_from: 'reserved', bucket_to: null }),
    ]);
    await expectConsistent(payer);

    // Three hours later the fill is confirmed by the durable job; the order's version does not move.
    app.clock.advance(3 * HOUR_MS);
    await app.instance.worker.runDueJobs();
    const confirmed = await getOrder(payer, order.id);
    expect(confirmed.version).toBe(3);
    expect(confirmed.fills?.[0]?.receipt_state).toBe('confirmed');
  });

  it('three chunks settle the order (sandbox 107 shape): the whole fee recognised, nothing refunded or released', async () => {
    const order = await createOrder(payer, 10_700);
    const results = [];
    for (const chunk of [3_000, 3_700, 4_000]) results.push(await fill(await reserveOk(order, chunk)));
    expect(results.map((result) => result.ok && result.value.fill.fee_recognized_minor)).toEqual([300, 370, 400]);
    const settled = await getOrder(payer, order.id);
    expect(settled).toMatchObject({ status: 'settled', filled_minor: 10_700, remaining_minor: 0, reserved_minor: 0, refunded_minor: 0, fee_recognized_minor: FEE_MINOR, settled_splits: 3 });
    expect(settled.fills?.map((item) => item.sequence)).toEqual([1, 2, 3]);
    const released = (await movementsOf(payer)).filter((movement) => movement.type === 'withdrawal_released');
    expect(released).toHaveLength(0);
    // Nothing can be reserved from a settled order.
    const refused = await reserve(order, 1);
    expect(!refused.ok && refused.error.code).toBe('withdrawal_state_conflict');
    await expectConsistent(payer);
  });

  it('refuses a leg larger than remaining, and one past max_splits', async () => {
    const order = await createOrder(payer, 1_000);
    const tooLarge = await reserve(order, 1_001);
    expect(!tooLarge.ok && tooLarge.error.details).toMatchObject({ reason: 'insufficient_remaining' });
    for (let index = 0; index < 9; index += 1) await reserveOk(order, 10);
    const tenth = await reserveOk(order, 10);
    expect(tenth).toMatch(/^wleg_/);
    const eleventh = await reserve(order, 10);
    expect(!eleventh.ok && eleventh.error.details).toMatchObject({ reason: 'max_splits_reached' });
    // Releasing one frees a split.
    expect((await release(tenth)).ok).toBe(true);
    expect((await reserve(order, 10)).ok).toBe(true);
  });

  it('a short fill returns the unpaid part of its leg to remaining', async () => {
    const order = await createOrder(payer, 50_000);
    const leg = await reserveOk(order, 20_000);
    const result = await fill(leg, 15_000);
    expect(result.ok && result.value.withdrawal).toMatchObject({ filled_minor: 15_000, reserved_minor: 0, remaining_minor: 35_000 });
    expect(result.ok && result.value.fill.amount_minor).toBe(15_000);
    await expectConsistent(payer);
  });

  it('a released leg cannot be filled, a filled leg cannot be released (alloc_state_conflict); release is idempotent', async () => {
    const order = await createOrder(payer, 5_000);
    const first = await reserveOk(order, 1_000);
    expect((await release(first)).ok).toBe(true);
    const twice = await release(first);
    expect(twice.ok && twice.value.status).toBe('released');
    const fillReleased = await fill(first);
    expect(!fillReleased.ok && fillReleased.error.code).toBe('alloc_state_conflict');
    const second = await reserveOk(order, 1_000);
    expect((await fill(second)).ok).toBe(true);
    const releaseFilled = await release(second);
    expect(!releaseFilled.ok && releaseFilled.error.code).toBe('alloc_state_conflict');
    const unknown = await release('wleg_01K0NOTEXISTING000000000000');
    expect(!unknown.ok && unknown.error.code).toBe('alloc_state_conflict');
    expect((await getOrder(payer, order.id))).toMatchObject({ filled_minor: 1_000, reserved_minor: 0, remaining_minor: 4_000 });
  });

  it('another brand cannot reserve or fill this brand’s order', async () => {
    const order = await createOrder(payer, 5_000);
    const other = await inTransaction(app, (tx) =>
      withdrawals.reserveLeg(tx, { white_label_id: 'wl_01K0OTHERBRAND0000000000000', livemode: false, withdrawal_id: order.id, deposit_id: 'dep_x', deposit_leg_key: 'foreign', amount_minor: 100, cause }),
    );
    expect(!other.ok && other.error.code).toBe('withdrawal_state_conflict');
    const leg = await reserveOk(order, 100);
    const foreignFill = await inTransaction(app, (tx) => withdrawals.recordFill(tx, { white_label_id: 'wl_01K0OTHERBRAND0000000000000', leg_ref: leg, cause }));
    expect(!foreignFill.ok && foreignFill.error.code).toBe('alloc_state_conflict');
  });
});

describe('expiry', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(5_000_000);
  });

  it('an order past expires_at expires by its durable job and returns the remainder plus unused fee', async () => {
    const order = await createOrder(payer, 100_000);
    expect((await fill(await reserveOk(order, 25_000))).ok).toBe(true);
    const before = await balanceOf(payer);
    app.clock.advance(24 * HOUR_MS);
    await app.instance.worker.runDueJobs();
    const expired = await getOrder(payer, order.id);
    expect(expired).toMatchObject({ status: 'expired', filled_minor: 25_000, remaining_minor: 0, refunded_minor: 75_000 + FEE_MINOR - 267, fee_recognized_minor: 267 });
    expect((await balanceOf(payer)).available_minor - before.available_minor).toBe(75_000 + FEE_MINOR - 267);
    expect((await eventsOf(order.id)).at(-1)?.type).toBe('withdrawal.expired');
    // An expired order takes no new leg.
    const late = await reserve(order, 100);
    expect(!late.ok && late.error.code).toBe('withdrawal_state_conflict');
    await expectConsistent(payer);
  });

  it('a leg in transfer holds the order open past expires_at; its release then closes the order', async () => {
    const order = await createOrder(payer, 100_000);
    const leg = await reserveOk(order, 40_000);
    app.clock.advance(24 * HOUR_MS + 1_000);
    await app.instance.worker.runDueJobs();
    expect((await getOrder(payer, order.id)).status).toBe('open');
    expect((await findMatchable(100)).map((view) => view.id)).not.toContain(order.id);
    expect((await release(leg)).ok).toBe(true);
    const closed = await getOrder(payer, order.id);
    expect(closed).toMatchObject({ status: 'expired', refunded_minor: 100_000 + FEE_MINOR, remaining_minor: 0, reserved_minor: 0 });
    expect((await eventsOf(order.id)).map((event) => event.type).slice(-2)).toEqual(['withdrawal.leg_reserved', 'withdrawal.expired']);
    await expectConsistent(payer);
  });

  it('the last leg in transfer filled after expiry closes the order as expired with its fill', async () => {
    const order = await createOrder(payer, 100_000);
    const leg = await reserveOk(order, 40_000);
    app.clock.advance(24 * HOUR_MS + 1_000);
    await app.instance.worker.runDueJobs();
    const result = await fill(leg);
    expect(result.ok && result.value.withdrawal).toMatchObject({ status: 'expired', filled_minor: 40_000, remaining_minor: 0, refunded_minor: 60_000 + FEE_MINOR - 428 });
    const last = (await eventsOf(order.id)).at(-1);
    expect(last?.type).toBe('withdrawal.filled');
    expect(last?.data.object.status).toBe('expired');
    await expectConsistent(payer);
  });

  function findMatchable(amount_minor: number) {
    return inTransaction(app, (tx) => withdrawals.findMatchable(tx, { white_label_id: app.sandbox.white_label_id, livemode: false, amount_minor, exclude_merchant_id: null, limit: 50 }));
  }
});

describe('refunds at close (spec: refunded_minor is the amount returned to the balance)', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(5_000_000);
  });

  it('refunded_minor is the withdrawal_released credit to the satang (remainder plus unused fee), remaining_minor 0, in GET and the event', async () => {
    const order = await createOrder(payer, 90_000);
    expect((await fill(await reserveOk(order, 20_000))).ok).toBe(true);
    expect((await fill(await reserveOk(order, 13_000))).ok).toBe(true);
    const before = await balanceOf(payer);
    app.clock.advance(24 * HOUR_MS);
    await app.instance.worker.runDueJobs();
    const expired = await getOrder(payer, order.id);
    const { rows } = await app.testDatabase.database.query<{ balance_transaction_id: string; amount_minor: string; direction: string }>(
      "SELECT balance_transaction_id, amount_minor, direction FROM balance_transactions WHERE source_id = $1 AND type = 'withdrawal_released'",
      [order.id],
    );
    expect(rows).toHaveLength(1);
    const credit = Number(rows[0]!.amount_minor);
    expect(rows[0]!.direction).toBe('credit');
    expect(credit).toBe(57_000 + FEE_MINOR - expired.fee_recognized_minor);
    expect(expired).toMatchObject({ status: 'expired', filled_minor: 33_000, reserved_minor: 0, remaining_minor: 0, refunded_minor: credit });
    expect(expired.total_locked_minor).toBe(expired.filled_minor + expired.fee_recognized_minor + credit);
    expect((await balanceOf(payer)).available_minor - before.available_minor).toBe(credit);
    const closing = (await eventsOf(order.id)).at(-1)!;
    expect(closing.type).toBe('withdrawal.expired');
    expect(closing.data.object).toMatchObject({ remaining_minor: 0, refunded_minor: credit });
    expect(closing.data.previous_attributes).toMatchObject({ remaining_minor: 57_000, refunded_minor: null });
    // The database keeps the same rule (migration 0032): a closed order with something open, or a refund that is
    // not what it returned, is refused.
    for (const change of ['remaining_minor = 1', 'refunded_minor = refunded_minor + 1']) {
      await expect(app.testDatabase.database.query(`UPDATE withdrawal_orders SET ${change} WHERE withdrawal_id = $1`, [order.id])).rejects.toThrow(/withdrawal_orders_check5/);
    }
    await expectConsistent(payer);
  });

  it('migration 0032 rewrites a closed order stored the old way (principal only, remaining kept) to the refund it made', async () => {
    const order = await createOrder(payer, 50_000);
    expect((await fill(await reserveOk(order, 12_000))).ok).toBe(true);
    expect((await app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${order.id}/cancel`, idempotency_key: `cancel-${order.id}`, credentials: payer.credentials })).statusCode).toBe(200);
    const closed = await getOrder(payer, order.id);
    const migration = readMigrations().find((file) => file.version === 32)!;
    const rewrite = /UPDATE withdrawal_orders[\s\S]*?;/.exec(migration.sql)![0];
    // The old rules and the old row, in a transaction that is rolled back: the migration's rewrite must give the new row.
    const rewritten = await app.testDatabase.database
      .transaction(async (tx) => {
        await tx.query('ALTER TABLE withdrawal_orders DROP CONSTRAINT withdrawal_orders_rules');
        await tx.query('UPDATE withdrawal_orders SET remaining_minor = 38000, refunded_minor = 38000 WHERE withdrawal_id = $1', [order.id]);
        await tx.query(rewrite);
        const { rows } = await tx.query<{ remaining_minor: number; refunded_minor: number; version: number }>('SELECT remaining_minor, refunded_minor, version FROM withdrawal_orders WHERE withdrawal_id = $1', [order.id]);
        throw new Rollback(rows[0]);
      })
      .catch((error: unknown) => {
        if (error instanceof Rollback) return error.value as { remaining_minor: number; refunded_minor: number; version: number };
        throw error;
      });
    expect(rewritten).toEqual({ remaining_minor: 0, refunded_minor: closed.refunded_minor, version: closed.version });
    expect(closed.refunded_minor).toBe(38_000 + FEE_MINOR - closed.fee_recognized_minor);
  });
});

describe('fill reversal', () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await newPayer(5_000_000);
  });

  it('on a live order the chunk returns to remaining and the reserved bucket (withdrawal.fill_reversed)', async () => {
    const order = await createOrder(payer, 100_000);
    const first = await reserveOk(order, 30_000);
    expect((await fill(first)).ok).toBe(true);
    const second = await reserveOk(order, 20_000);
    expect((await fill(second)).ok).toBe(true);
    const before = await balanceOf(payer);
    const result = await reverse(first);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value).toMatchObject({ replacement_withdrawal_id: null, withdrawal: { status: 'partially_filled', filled_minor: 20_000, remaining_minor: 80_000, settled_splits: 1, fee_recognized_minor: 214 } });
    const after = await balanceOf(payer);
    expect(after.available_minor).toBe(before.available_minor);
    expect(after.reserved_minor - before.reserved_minor).toBe(30_000 + (535 - 214));
    const event = (await eventsOf(order.id)).at(-1);
    expect(event?.type).toBe('withdrawal.fill_reversed');
    expect(event?.data.object.fill).toMatchObject({ leg_ref: first, amount_minor: 30_000, receipt_state: 'reversed', reason_code: 'deposit_reversed' });
    // Reversing again changes nothing; the reversed fill is no longer among the settled fills.
    const again = await reverse(first);
    expect(again.ok && again.value.withdrawal.version).toBe(result.value.withdrawal.version);
    expect((await getOrder(payer, order.id)).fills?.map((item) => item.leg_ref)).toEqual([second]);
    // Reversing the other one makes the order open again.
    const both = await reverse(second);
    expect(both.ok && both.value.withdrawal).toMatchObject({ status: 'open', filled_minor: 0, fee_recognized_minor: 0, remaining_minor: 100_000 });
    await expectConsistent(payer);
  });

  it('on a settled order the chunk returns to available and a replacement order pays it again, without a second fee', async () => {
    const order = await createOrder(payer, 60_000);
    const first = await reserveOk(order, 40_000);
    const second = await reserveOk(order, 20_000);
    expect((await fill(first)).ok && (await fill(second)).ok).toBe(true);
    expect((await getOrder(payer, order.id)).status).toBe('settled');
    const result = await reverse(second);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.withdrawal).toMatchObject({ status: 'settled', filled_minor: 40_000, remaining_minor: 0, refunded_minor: 20_000 + 357 }); // 357 = 1 070 - 713 of fee back
    const replacementId = result.value.replacement_withdrawal_id;
    expect(replacementId).toMatch(/^wdr_/);
    const replacement = await getOrder(payer, replacementId ?? '');
    expect(replacement).toMatchObject({ status: 'open', amount_total_minor: 20_000, fee_total_minor: 0, replacement_of_withdrawal_id: order.id, beneficiary_id: payer.beneficiary_id });
    await expectConsistent(payer);
  });

  it('on a canceled order the chunk returns to available with no replacement', async () => {
    const order = await createOrder(payer, 60_000);
    const leg = await reserveOk(order, 10_000);
    expect((await fill(leg)).ok).toBe(true);
    const canceled = await inTransaction(app, (tx) => withdrawals.cancel(tx, payer.account, order.id, cause));
    expect(canceled?.ok).toBe(true);
    const before = await balanceOf(payer);
    const result = await reverse(leg);
    expect(result.ok && result.value).toMatchObject({ replacement_withdrawal_id: null, withdrawal: { status: 'canceled', filled_minor: 0, remaining_minor: 0, refunded_minor: 60_000 + FEE_MINOR } }); // all locked is back
    expect((await balanceOf(payer)).available_minor - before.available_minor).toBe(10_000 + 178);
    await expectConsistent(payer);
  });

  it('a reserved (unfilled) leg cannot be reversed', async () => {
    const order = await createOrder(payer, 5_000);
    const leg = await reserveOk(order, 1_000);
    const result = await reverse(leg);
    expect(!result.ok && result.error.code).toBe('alloc_state_conflict');
  });
});

describe('approval by brand policy (back office)', () => {
  let payer: Payer;
  let operatorToken: string;
  let reviewerToken: string;

  beforeAll(async () => {
    payer = await newPayer(50_000_000);
    const credential = async (role: string) => {
      const response = await app.backoffice({ method: 'POST', url: '/v1/bo/credentials', body: { name: `${role} one`, role, white_label_id: app.sandbox.white_label_id } });
      expect(response.statusCode).toBe(201);
      return response.json<{ token: string }>().token;
    };
    operatorToken = await credential('operator');
    reviewerToken = await credential('reviewer');
  });

  it('reads the default policy and sets the brand’s own, with an audit row', async () => {
    const read = await app.backoffice({ url: '/v1/bo/withdrawal-policy?mode=test', token: operatorToken });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ object: 'withdrawal_policy', source: 'default', approval_threshold_minor: 20_000_000, max_splits: 10 });
    const policy = { mode: 'test', approval_threshold_minor: 1_000_000, approval_ttl_seconds: 3600, expires_in_seconds: 7200, max_splits: 5, min_amount_minor: 100, max_amount_minor: 10_000_000 };
    const reviewerTry = await app.backoffice({ method: 'POST', url: '/v1/bo/withdrawal-policy', body: policy, token: reviewerToken });
    expect(reviewerTry.statusCode).toBe(403);
    const bad = await app.backoffice({ method: 'POST', url: '/v1/bo/withdrawal-policy', body: { ...policy, max_splits: 0, min_amount_minor: 20_000_000 }, token: operatorToken });
    expect(bad.statusCode).toBe(422);
    const set = await app.backoffice({ method: 'POST', url: '/v1/bo/withdrawal-policy', body: policy, token: operatorToken });
    expect(set.statusCode).toBe(200);
    expect(set.json()).toMatchObject({ source: 'brand', approval_threshold_minor: 1_000_000, max_splits: 5, white_label_id: app.sandbox.white_label_id });
    const { rows } = await app.testDatabase.database.query<{ action: string }>("SELECT action FROM audit_log WHERE action = 'withdrawal_policy.updated'");
    expect(rows).toHaveLength(1);
    const tooLarge = await postWithdrawal(payer, createBody(payer, 10_000_001));
    expect(errorOf(tooLarge)).toMatchObject({ code: 'amount_not_supported', details: { min_minor: 100, max_minor: 10_000_000 } });
  });

  it('an order at the threshold waits for approval with the money locked; approval opens it with a fresh expiry', async () => {
    const order = await createOrder(payer, 1_000_000);
    expect(order).toMatchObject({ status: 'pending_approval', max_splits: 5, approval_expires_at: new Date(app.clock.now().getTime() + HOUR_MS).toISOString() });
    expect((await balanceOf(payer)).reserved_minor).toBeGreaterThanOrEqual(1_000_000 + FEE_MINOR);
    const refused = await reserve(order, 100);
    expect(!refused.ok && refused.error.details).toMatchObject({ reason: 'not_open' });
    const queue = await app.backoffice({ url: '/v1/bo/withdrawal-approvals?mode=test', token: reviewerToken });
    expect(queue.json<{ data: WithdrawalView[] }>().data.map((item) => item.id)).toContain(order.id);

    app.clock.advance(10 * 60_000);
    const approved = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/approve`, body: { note: 'checked' }, token: reviewerToken });
    expect(approved.statusCode).toBe(200);
    const view = approved.json<WithdrawalView>();
    expect(view).toMatchObject({ status: 'open', version: 2, expires_at: new Date(app.clock.now().getTime() + 2 * HOUR_MS).toISOString() });
    expect(view).not.toHaveProperty('approval_expires_at');
    expect((await eventsOf(order.id)).map((event) => event.type)).toEqual(['withdrawal.created', 'withdrawal.approved']);
    const twice = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/approve`, body: {}, token: reviewerToken });
    expect(errorOf(twice)).toMatchObject({ code: 'withdrawal_not_pending_approval', details: { status: 'open' } });
    expect((await reserve(order, 100)).ok).toBe(true);
  });

  it('rejection needs a note of 20 characters and returns the full amount and fee', async () => {
    const order = await createOrder(payer, 2_000_000);
    const before = await balanceOf(payer);
    const short = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/reject`, body: { note: 'no' }, token: operatorToken });
    expect(short.statusCode).toBe(422);
    expect(errorOf(short).code).toBe('review_note_required');
    const note = 'Beneficiary does not match the merchant records';
    const rejected = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/reject`, body: { note }, token: operatorToken });
    expect(rejected.statusCode).toBe(200);
    expect(rejected.json()).toMatchObject({ status: 'rejected', refunded_minor: 2_000_000 + FEE_MINOR, remaining_minor: 0, rejection: { code: 'approval_rejected' }, review_note: note });
    // The reviewer's note is internal: not in the merchant's order, not in its events (spec).
    const merchantView = await getOrder(payer, order.id);
    expect(merchantView.rejection).toEqual({ code: 'approval_rejected' });
    expect(JSON.stringify(merchantView)).not.toContain(note);
    expect(JSON.stringify(await eventsOf(order.id))).not.toContain(note);
    expect((await balanceOf(payer)).available_minor - before.available_minor).toBe(2_000_000 + FEE_MINOR);
    expect((await eventsOf(order.id)).map((event) => event.type)).toEqual(['withdrawal.created', 'withdrawal.rejected']);
    const { rows } = await app.testDatabase.database.query<{ action: string }>('SELECT action FROM audit_log WHERE target_id = $1', [order.id]);
    expect(rows.map((row) => row.action)).toEqual(['withdrawal.rejected']);
    await expectConsistent(payer);
  });

  it('an order past its approval deadline cannot be approved, even before its job ran', async () => {
    const order = await createOrder(payer, 1_100_000);
    app.clock.advance(HOUR_MS);
    const late = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/approve`, body: {}, token: reviewerToken });
    expect(late.statusCode).toBe(409);
    expect(errorOf(late)).toMatchObject({ code: 'withdrawal_not_pending_approval', details: { reason: 'approval_ttl_expired' } });
    await app.instance.worker.runDueJobs();
    expect(await getOrder(payer, order.id)).toMatchObject({ status: 'canceled', cancel_reason_code: 'approval_ttl_expired' });
  });

  it('an order left unapproved is canceled with approval_ttl_expired by its durable job', async () => {
    const order = await createOrder(payer, 1_500_000);
    app.clock.advance(HOUR_MS + 1_000);
    await app.instance.worker.runDueJobs();
    const canceled = await getOrder(payer, order.id);
    expect(canceled).toMatchObject({ status: 'canceled', cancel_reason_code: 'approval_ttl_expired', canceled_by: 'system', refunded_minor: 1_500_000 + FEE_MINOR, remaining_minor: 0 });
    await expectConsistent(payer);
  });

  it('another brand’s operator gets 404 for the order; the platform administrator has no brand queue', async () => {
    const order = await createOrder(payer, 1_200_000);
    const otherBrand = await app.createMerchant();
    const foreignOperator = await app.backoffice({ method: 'POST', url: '/v1/bo/credentials', body: { name: 'other op', role: 'operator', white_label_id: otherBrand.white_label_id } });
    const token = foreignOperator.json<{ token: string }>().token;
    const response = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/approve`, body: {}, token });
    expect(response.statusCode).toBe(404);
    expect((await app.backoffice({ url: `/v1/bo/withdrawals/${order.id}`, token })).statusCode).toBe(404);
    expect((await app.backoffice({ url: `/v1/bo/withdrawals/${order.id}`, token: reviewerToken })).json()).toMatchObject({ id: order.id, status: 'pending_approval' });
    expect((await app.backoffice({ url: '/v1/bo/withdrawal-approvals?mode=test' })).statusCode).toBe(403);
    // The merchant can still cancel while waiting: everything returns.
    const canceled = await app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${order.id}/cancel`, idempotency_key: 'cancel-pending', credentials: payer.credentials });
    expect(canceled.json()).toMatchObject({ status: 'canceled', cancel_reason_code: 'merchant_request', refunded_minor: 1_200_000 + FEE_MINOR });
  });
});

describe('the transition table', () => {
  it('has seven statuses and only moves that the service makes', () => {
    expect(WITHDRAWAL_STATUSES).toEqual(['pending_approval', 'open', 'partially_filled', 'settled', 'expired', 'canceled', 'rejected']);
    const rules = WITHDRAWAL_TRANSITIONS.list();
    // Nothing leaves rejected, and only a fill reversal or a dispute touches a closed order, keeping its status.
    expect(rules.filter((rule) => rule.from === 'rejected')).toEqual([]);
    for (const rule of rules.filter((candidate) => candidate.from === 'settled' || candidate.from === 'expired' || candidate.from === 'canceled')) {
      expect(rule.to).toBe(rule.from);
      expect(['fill_reversed', 'disputed', 'dispute_resolved']).toContain(rule.trigger);
    }
    expect(rules.filter((rule) => rule.from === null).map((rule) => rule.to).sort()).toEqual(['open', 'pending_approval']);
  });
});

describe('concurrency', () => {
  it('50 concurrent creations against a balance that covers exactly 10: 10 succeed, 40 get 402, available never negative', async () => {
    const payer = await newPayer(10 * (100_000 + FEE_MINOR));
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        postWithdrawal(payer, { ...createBody(payer, 100_000), end_user_ref: `user-${index}`, client: { device_fingerprint: `fp-${index}`, ip: '10.0.0.1', user_agent: 'ua' } }),
      ),
    );
    const statuses = responses.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 201)).toHaveLength(10);
    expect(statuses.filter((status) => status === 402)).toHaveLength(40);
    for (const response of responses.filter((candidate) => candidate.statusCode === 402)) expect(errorOf(response).code).toBe('insufficient_balance');
    expect(await balanceOf(payer)).toMatchObject({ available_minor: 0, reserved_minor: 10 * (100_000 + FEE_MINOR) });
    const movements = await movementsOf(payer);
    expect(movements.every((movement) => movement.available_after >= 0)).toBe(true);
    expect(await countOrders(payer)).toBe(10);
    await expectConsistent(payer);
  });
});
