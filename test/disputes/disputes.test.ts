import crypto from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, eventsOfMerchant, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { DisputeDetail, MerchantDisputeView } from '../../src/disputes/service.ts';

/**
 * Withdrawal disputes (issue 11, item 6) through the doors their users use: the withdrawing merchant
 * over signed HTTP (open, evidence), operators through the back office (list, read, resolve), the real
 * job worker (the deadline at respond_by, clearing, auto-confirm) and the test clock. Every dispute is
 * about a real fill: a deposit created over HTTP, paid at the sandbox bank, its slip uploaded and
 * processed by the worker. Each scenario runs in a brand of its own, so that matching pairs exactly the
 * orders the scenario made. After each one the money is checked: every wallet of the brand equals the
 * fold of its movements, every withdrawal keeps total = filled + reserved + remaining, and every order
 * has exactly one event per version.
 */

let app: TestApp;
const system = { actor_type: 'system' as const, actor_id: 'disputes-test', request_id: null };
const NOTE = 'ตรวจสอบรายการเดินบัญชีของผู้รับเงินแล้ว ไม่พบยอดเงินเข้า';
const HOUR_MS = 3_600_000;
const AMOUNT = 12_000;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

interface World {
  brand: string;
  withdrawer: MerchantCredentials;
  depositor: MerchantCredentials;
  operator: string;
  second_operator: string;
  reviewer: string;
  beneficiary_id: string;
}

/** A brand of its own: a funded withdrawing merchant with a verified payee, a depositor, and staff. */
async function world(): Promise<World> {
  const withdrawer = await app.createMerchant();
  const brand = withdrawer.white_label_id;
  const depositor = await app.createMerchant({ white_label_id: brand });
  const tenancy = app.instance.services.tenancy;
  const staff = async (role: 'operator' | 'reviewer', name: string) => (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role, name })).token;
  await fundAvailable(app, accountOf(withdrawer), 1_000_000);
  return {
    brand,
    withdrawer,
    depositor,
    operator: await staff('operator', 'Operator A'),
    second_operator: await staff('operator', 'Operator B'),
    reviewer: await staff('reviewer', 'Reviewer'),
    beneficiary_id: await verifiedBeneficiary(app, accountOf(withdrawer)),
  };
}

async function withdraw(w: World, amount_minor = AMOUNT): Promise<WithdrawalView> {
  const reference = `wd-${crypto.randomBytes(6).toString('hex')}`;
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    credentials: w.withdrawer,
    body: { amount_minor, currency: 'THB', merchant_reference: reference, end_user_ref: `payee-${reference}`, beneficiary_id: w.beneficiary_id },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<WithdrawalView>();
}

async function getWithdrawal(w: World, id: string): Promise<WithdrawalView> {
  const response = await app.signed({ url: `/v1/pay/withdrawals/${id}`, credentials: w.withdrawer });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<WithdrawalView>();
}

/** A deposit of the depositor, paid at the sandbox bank and processed by the worker: it fills the withdrawal. */
async function payDeposit(w: World, credentials = w.depositor): Promise<DepositView> {
  const order = await createDeposit(app, { amount_minor: AMOUNT, credentials });
  const upload = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, credentials)));
  expect(upload.statusCode, upload.body).toBe(202);
  await runJobs(app);
  const settled = await getDeposit(app, order.id, credentials);
  expect(settled.status).toBe('settled');
  return settled;
}

/** A withdrawal filled once by a settled deposit: what a dispute is about. */
async function filledWithdrawal(w: World): Promise<{ withdrawal: WithdrawalView; deposit: DepositView; leg_ref: string }> {
  const created = await withdraw(w);
  const deposit = await payDeposit(w);
  const withdrawal = await getWithdrawal(w, created.id);
  expect(withdrawal).toMatchObject({ status: 'settled', filled_minor: AMOUNT, funds_on_hold: false });
  const fill = withdrawal.fills?.[0];
  expect(fill?.receipt_state).toBe('awaiting_confirmation');
  return { withdrawal, deposit, leg_ref: fill!.leg_ref };
}

function openDispute(w: World, withdrawal_id: string, body: Record<string, unknown>, idempotency_key = crypto.randomUUID(), credentials = w.withdrawer) {
  return app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${withdrawal_id}/disputes`, idempotency_key, credentials, body });
}

function sendEvidence(w: World, dispute_id: string, body: Record<string, unknown> = { kind: 'bank_statement_line', reference: 'STMT-2026-08-01-0042', note: 'No credit of this amount on the statement' }, credentials = w.withdrawer) {
  return app.signed({ method: 'POST', url: `/v1/pay/disputes/${dispute_id}/evidence`, idempotency_key: crypto.randomUUID(), credentials, body });
}

function resolve(token: string, dispute_id: string, body: Record<string, unknown>) {
  return app.backoffice({ method: 'POST', url: `/v1/bo/disputes/${dispute_id}/resolve`, token, body });
}

async function disputeDetail(w: World, dispute_id: string): Promise<DisputeDetail> {
  const response = await app.backoffice({ url: `/v1/bo/disputes/${dispute_id}`, token: w.operator });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<DisputeDetail>();
}

async function balanceOf(credentials: MerchantCredentials) {
  return (await app.signed({ url: '/v1/pay/balance', credentials })).json<{ available_minor: number; pending_clearing_minor: number; reserved_minor: number }>();
}

function expectRefused(response: LightMyRequestResponse, status: number, code: string): void {
  expect(response.statusCode, response.body).toBe(status);
  expect(errorOf(response).code).toBe(code);
}

/** The brand's money and events, from the database: ledger folds, the withdrawal identity, one event per version. */
async function checkBrand(brand: string): Promise<void> {
  const db = app.testDatabase.database;
  const wallets = await db.query<{ merchant_id: string; livemode: boolean }>('SELECT merchant_id, livemode FROM wallets WHERE white_label_id = $1', [brand]);
  expect(wallets.rows.length).toBeGreaterThan(0);
  for (const wallet of wallets.rows) {
    const verified = await app.instance.services.ledger.verify(db, { white_label_id: brand, merchant_id: wallet.merchant_id, livemode: wallet.livemode });
    expect(verified.consistent, `wallet of ${wallet.merchant_id}`).toBe(true);
  }
  const orders = await db.query<{ withdrawal_id: string; amount_total_minor: number; fee_total_minor: number; fee_recognized_minor: number; filled_minor: number; reserved_minor: number; remaining_minor: number; refunded_minor: number | null; version: number }>(
    `SELECT withdrawal_id, amount_total_minor, fee_total_minor, fee_recognized_minor, filled_minor, reserved_minor, remaining_minor, refunded_minor, version
       FROM withdrawal_orders WHERE white_label_id = $1`,
    [brand],
  );
  for (const order of orders.rows) {
    // A live order: total = filled + reserved + remaining. A closed one: what it locked was paid, earned as fee, or refunded.
    const accounted = order.refunded_minor === null
      ? Number(order.filled_minor) + Number(order.reserved_minor) + Number(order.remaining_minor)
      : Number(order.filled_minor) + Number(order.fee_recognized_minor) + Number(order.refunded_minor) - Number(order.fee_total_minor);
    expect(Number(order.amount_total_minor), order.withdrawal_id).toBe(accounted);
  }
  const versions = await db.query<{ id: string; version: number }>(
    `SELECT withdrawal_id AS id, version FROM withdrawal_orders WHERE white_label_id = $1
     UNION ALL SELECT deposit_id AS id, version FROM deposit_orders WHERE white_label_id = $1`,
    [brand],
  );
  for (const order of versions.rows) {
    const events = await db.query<{ text: string }>('SELECT envelope::text AS text FROM events WHERE white_label_id = $1 AND object_id = $2', [brand, order.id]);
    const seen = events.rows.map((row) => (JSON.parse(row.text) as { data: { object: { version: number } } }).data.object.version).sort((a, b) => a - b);
    expect(seen, `events of ${order.id}`).toEqual(Array.from({ length: order.version }, (_, index) => index + 1));
  }
}

async function disputeRows(brand: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*) AS count FROM withdrawal_disputes WHERE white_label_id = $1', [brand]);
  return Number(rows[0]?.count);
}

describe('opening a dispute', () => {
  it('holds the chunk: withdrawal.disputed to the withdrawer only, dispute{} and funds_on_hold, clearing_available_at null', async () => {
    const w = await world();
    const { withdrawal, deposit, leg_ref } = await filledWithdrawal(w);
    const key = crypto.randomUUID();
    const body = { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED', note: 'The payee says nothing arrived' };
    const opened = await openDispute(w, withdrawal.id, body, key);
    expect(opened.statusCode, opened.body).toBe(201);
    const view = opened.json<WithdrawalView>();
    expect(view).toMatchObject({ id: withdrawal.id, status: 'settled', version: withdrawal.version + 1, funds_on_hold: true, filled_minor: AMOUNT });
    const dispute = view.dispute!;
    expect(dispute).toEqual({
      id: expect.stringMatching(/^dsp_/),
      reason_code: 'FUNDS_NOT_RECEIVED',
      amount_minor: AMOUNT,
      opened_at: app.clock.now().toISOString(),
      respond_by: new Date(app.clock.now().getTime() + 48 * HOUR_MS).toISOString(),
      evidence_url: expect.stringMatching(new RegExp(`/v1/pay/disputes/${dispute.id}/evidence$`)),
      leg_ref,
      status: 'open',
    });
    expect(view.fills?.[0]?.receipt_state).toBe('disputed');

    // The same key replays the answer; another key finds the fill disputed already.
    const replay = await openDispute(w, withdrawal.id, body, key);
    expect(replay.statusCode).toBe(201);
    expect(replay.headers['idempotent-replay']).toBe('true');
    expect(replay.json()).toEqual(opened.json());
    expectRefused(await openDispute(w, withdrawal.id, body), 409, 'fill_already_disputed');
    expect(await disputeRows(w.brand)).toBe(1);

    // The event reaches the withdrawer's feed only; the depositor learns only that its funds are held.
    const withdrawerEvents = await eventsOfMerchant(app, w.withdrawer.merchant_id);
    const disputed = withdrawerEvents.filter((event) => event.type === 'withdrawal.disputed');
    expect(disputed).toHaveLength(1);
    expect(disputed[0]!.data.object).toMatchObject({ id: withdrawal.id, status: 'settled', funds_on_hold: true, dispute: { id: dispute.id } });
    const depositorEvents = await eventsOfMerchant(app, w.depositor.merchant_id);
    expect(depositorEvents.map((event) => event.type)).not.toContain('withdrawal.disputed');
    expect(JSON.stringify(depositorEvents)).not.toContain(dispute.id);
    expect(depositorEvents.at(-1)).toMatchObject({ type: 'deposit.funds_held', data: { object: { id: deposit.id, status: 'settled', clearing_available_at: null } } });
    const held = await getDeposit(app, deposit.id, w.depositor);
    expect(held).toMatchObject({ status: 'settled', clearing_available_at: null, version: deposit.version + 1 });
    expect(held).not.toHaveProperty('dispute');

    // Past the fill's auto-confirm time nothing confirms it: the dispute stopped that job.
    app.clock.advance(4 * HOUR_MS);
    await runJobs(app);
    expect((await getWithdrawal(w, withdrawal.id)).fills?.[0]?.receipt_state).toBe('disputed');
    const detail = await disputeDetail(w, dispute.id);
    expect(detail).toMatchObject({ kind: 'non_receipt', status: 'open', deposit_id: deposit.id, funds_on_hold: true, note: body.note, evidence: [], resolution: null });
    await checkBrand(w.brand);
  });

  it('bad input is 422 with fields[]; nothing changes', async () => {
    const w = await world();
    const { withdrawal, leg_ref } = await filledWithdrawal(w);
    for (const [body, path, reason] of [
      [{ leg_ref: 'wleg_01K0NOSUCHLEG00000000000000', reason_code: 'FUNDS_NOT_RECEIVED' }, 'leg_ref', 'not_a_fill_of_this_order'],
      [{ leg_ref, reason_code: 'CHANGED_MY_MIND' }, 'reason_code', 'not_allowed_value'],
      [{ leg_ref, reason_code: 'FUNDS_NOT_RECEIVED', amount_minor: 5 }, 'amount_minor', 'unknown_field'],
      [{ reason_code: 'FUNDS_NOT_RECEIVED' }, 'leg_ref', 'required'],
      [{ leg_ref, reason_code: 'AMOUNT_DIFFERS', note: 'x'.repeat(2001) }, 'note', 'too_long'],
    ] as const) {
      const refused = await openDispute(w, withdrawal.id, body);
      expectRefused(refused, 422, 'validation_error');
      expect(errorOf(refused).details.fields).toContainEqual(expect.objectContaining({ path, reason }));
    }
    expect(await disputeRows(w.brand)).toBe(0);
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ version: withdrawal.version, funds_on_hold: false });
    expect((await getWithdrawal(w, withdrawal.id)).fills?.[0]?.receipt_state).toBe('awaiting_confirmation');
  });

  it('another merchant cannot dispute the order (404); after auto_confirm_at the window is closed (409)', async () => {
    const w = await world();
    const { withdrawal, deposit, leg_ref } = await filledWithdrawal(w);
    const body = { leg_ref, reason_code: 'AMOUNT_DIFFERS' };
    expectRefused(await openDispute(w, withdrawal.id, body, crypto.randomUUID(), w.depositor), 404, 'resource_not_found');
    // Three hours on, receipt is assumed even before the job has run.
    app.clock.advance(3 * HOUR_MS);
    const closed = await openDispute(w, withdrawal.id, body);
    expectRefused(closed, 409, 'dispute_window_closed');
    expect(errorOf(closed).details).toMatchObject({ leg_ref, receipt_state: 'awaiting_confirmation' });
    await runJobs(app);
    expect(errorOf(await openDispute(w, withdrawal.id, body)).details).toMatchObject({ receipt_state: 'confirmed' });
    expect(await disputeRows(w.brand)).toBe(0);
    expect((await getDeposit(app, deposit.id, w.depositor)).clearing_available_at).toBe(deposit.clearing_available_at);
  });
});

describe('evidence and the deadline', () => {
  it('evidence before respond_by (202, at most 10), refused after; with evidence the dispute waits for an operator and clearing stays held', async () => {
    const w = await world();
    const { withdrawal, deposit, leg_ref } = await filledWithdrawal(w);
    const opened = (await openDispute(w, withdrawal.id, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' })).json<WithdrawalView>();
    const dispute_id = opened.dispute!.id;

    const first = await sendEvidence(w, dispute_id);
    expect(first.statusCode, first.body).toBe(202);
    expect(first.json<MerchantDisputeView>()).toMatchObject({ object: 'dispute', id: dispute_id, withdrawal_id: withdrawal.id, leg_ref, status: 'open', evidence_count: 1, livemode: false });
    // Evidence changes nothing in the order.
    expect((await getWithdrawal(w, withdrawal.id)).version).toBe(opened.version);

    for (const [body, path, reason] of [
      [{ kind: 'photo', reference: 'A-1', note: 'n' }, 'kind', 'not_allowed_value'],
      [{ kind: 'other', reference: 'https://files.example/statement.pdf', note: 'n' }, 'reference', 'must_not_be_url'],
      [{ kind: 'other', reference: 'A-1' }, 'note', 'required'],
    ] as const) {
      const refused = await sendEvidence(w, dispute_id, body);
      expectRefused(refused, 422, 'validation_error');
      expect(errorOf(refused).details.fields).toContainEqual(expect.objectContaining({ path, reason }));
    }
    // Only the withdrawing merchant reaches its dispute.
    expectRefused(await sendEvidence(w, dispute_id, undefined, w.depositor), 404, 'resource_not_found');
    for (let count = 2; count <= 10; count += 1) expect((await sendEvidence(w, dispute_id)).json<MerchantDisputeView>().evidence_count).toBe(count);
    expectRefused(await sendEvidence(w, dispute_id), 409, 'evidence_limit_reached');

    // At respond_by evidence is refused, even before the deadline job has run.
    app.clock.advance(48 * HOUR_MS);
    const late = await sendEvidence(w, dispute_id);
    expectRefused(late, 409, 'dispute_evidence_closed');
    expect(errorOf(late).details).toMatchObject({ respond_by: opened.dispute!.respond_by });
    await runJobs(app);
    const waiting = await disputeDetail(w, dispute_id);
    expect(waiting).toMatchObject({ status: 'awaiting_decision', evidence_count: 10, resolution: null });
    expect(waiting.evidence).toHaveLength(10);
    expect((await getWithdrawal(w, withdrawal.id)).version).toBe(opened.version);

    // Past the 72 hours of clearing the credit stays held: no release time, no job releases it.
    app.clock.advance(25 * HOUR_MS);
    await runJobs(app);
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: deposit.credited_amount_minor, available_minor: 0 });
    expect((await getDeposit(app, deposit.id, w.depositor)).clearing_available_at).toBeNull();

    // An operator decides for the depositor: the hold lifts and, its time past, the credit clears at once.
    const resolved = await resolve(w.operator, dispute_id, { outcome: 'depositor', note: NOTE });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json()).toMatchObject({ status: 'resolved', replayed: false, funds_on_hold: false, resolution: { outcome: 'depositor', resolved_by: 'operator', note: NOTE } });
    expect((await getDeposit(app, deposit.id, w.depositor)).clearing_available_at).toBe(app.clock.now().toISOString());
    await runJobs(app);
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: 0, available_minor: deposit.credited_amount_minor });
    const after = await getWithdrawal(w, withdrawal.id);
    expect(after).toMatchObject({ version: opened.version + 1, funds_on_hold: false, dispute: { id: dispute_id, status: 'resolved', resolution: { outcome: 'depositor' } } });
    expect(after.dispute).not.toHaveProperty('evidence_url');
    expect(after.fills?.[0]?.receipt_state).toBe('confirmed');
    expect((await eventsOfMerchant(app, w.withdrawer.merchant_id)).at(-1)?.type).toBe('withdrawal.dispute_resolved');
    expect((await eventsOfMerchant(app, w.depositor.merchant_id)).map((event) => event.type)).toContain('deposit.funds_released');
    await checkBrand(w.brand);
  });

  it('no evidence by respond_by: the deadline job closes the dispute for the depositor', async () => {
    const w = await world();
    const { withdrawal, deposit, leg_ref } = await filledWithdrawal(w);
    const opened = (await openDispute(w, withdrawal.id, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' })).json<WithdrawalView>();
    const dispute_id = opened.dispute!.id;
    app.clock.advance(47 * HOUR_MS);
    await runJobs(app);
    expect((await disputeDetail(w, dispute_id)).status).toBe('open');
    app.clock.advance(HOUR_MS);
    await runJobs(app);
    expect(await disputeDetail(w, dispute_id)).toMatchObject({ status: 'resolved', funds_on_hold: false, resolution: { outcome: 'depositor', resolved_by: 'system', resolver_id: null } });
    // The credit clears at its original time, 72 hours after settlement.
    const released = await getDeposit(app, deposit.id, w.depositor);
    expect(released.clearing_available_at).toBe(deposit.clearing_available_at);
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ funds_on_hold: false, dispute: { status: 'resolved', resolution: { outcome: 'depositor' } } });
    expect((await getWithdrawal(w, withdrawal.id)).fills?.[0]?.receipt_state).toBe('confirmed');
    // The evidence endpoint is closed once resolved.
    expectRefused(await sendEvidence(w, dispute_id), 409, 'dispute_evidence_closed');
    const audit = await app.testDatabase.database.query<{ actor_type: string; action: string }>('SELECT actor_type, action FROM audit_log WHERE target_id = $1', [dispute_id]);
    expect(audit.rows).toEqual([{ actor_type: 'system', action: 'dispute.resolved' }]);
    app.clock.advance(25 * HOUR_MS);
    await runJobs(app);
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: 0, available_minor: deposit.credited_amount_minor });
    await checkBrand(w.brand);
  });
});

describe('resolution by an operator', () => {
  it('for the withdrawer: the deposit is reversed (MERCHANT_DISPUTE_LOST), the fill reversed and paid again', async () => {
    const w = await world();
    const { withdrawal, deposit, leg_ref } = await filledWithdrawal(w);
    const withdrawerBefore = await balanceOf(w.withdrawer);
    const opened = (await openDispute(w, withdrawal.id, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' })).json<WithdrawalView>();
    const dispute_id = opened.dispute!.id;
    const resolved = await resolve(w.operator, dispute_id, { outcome: 'withdrawer', note: NOTE });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json()).toMatchObject({ status: 'resolved', resolution: { outcome: 'withdrawer', resolved_by: 'operator' } });

    const reversed = await getDeposit(app, deposit.id, w.depositor);
    expect(reversed).toMatchObject({ status: 'reversed', clearing_available_at: null, reversal: { reason_code: 'MERCHANT_DISPUTE_LOST', reverses_balance_transaction_id: deposit.balance_transaction_id } });
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: 0, available_minor: 0 });

    const after = await getWithdrawal(w, withdrawal.id);
    expect(after).toMatchObject({ status: 'settled', filled_minor: 0, remaining_minor: 0, refunded_minor: AMOUNT + after.fee_total_minor, funds_on_hold: false, dispute: { id: dispute_id, status: 'resolved', resolution: { outcome: 'withdrawer' } } });
    expect(after.fills).toEqual([]);
    const withdrawerEvents = await eventsOfMerchant(app, w.withdrawer.merchant_id);
    const reversal = withdrawerEvents.find((event) => event.type === 'withdrawal.fill_reversed');
    const replacement_id = (reversal?.data.object as { replacement_withdrawal_id?: string }).replacement_withdrawal_id;
    expect(replacement_id).toMatch(/^wdr_/);
    expect(await getWithdrawal(w, replacement_id!)).toMatchObject({ status: 'open', amount_total_minor: AMOUNT, fee_total_minor: 0, replacement_of_withdrawal_id: withdrawal.id });
    // The chunk and its fee came back; the replacement locked the chunk again (no second fee).
    const withdrawerAfter = await balanceOf(w.withdrawer);
    expect(withdrawerAfter.available_minor).toBe(withdrawerBefore.available_minor + withdrawal.fee_total_minor);
    expect(withdrawerAfter.reserved_minor).toBe(AMOUNT);
    expect(withdrawerEvents.at(-1)?.type).toBe('withdrawal.dispute_resolved');
    await checkBrand(w.brand);
  });

  it('roles, brands and states: reviewer 403, another brand 404, note 422, bad outcome 422, resolved 409', async () => {
    const w = await world();
    const { withdrawal, leg_ref } = await filledWithdrawal(w);
    const dispute_id = (await openDispute(w, withdrawal.id, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' })).json<WithdrawalView>().dispute!.id;
    const stranger = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'Other brand' })).token;

    expectRefused(await resolve(w.reviewer, dispute_id, { outcome: 'depositor', note: NOTE }), 403, 'scope_denied');
    expectRefused(await app.backoffice({ url: `/v1/bo/disputes/${dispute_id}`, token: w.reviewer }), 403, 'scope_denied');
    expectRefused(await resolve(stranger, dispute_id, { outcome: 'depositor', note: NOTE }), 404, 'resource_not_found');
    expectRefused(await app.backoffice({ url: `/v1/bo/disputes/${dispute_id}`, token: stranger }), 404, 'resource_not_found');
    expect((await app.backoffice({ url: '/v1/bo/disputes', token: stranger })).json<{ data: unknown[] }>().data).toEqual([]);
    expectRefused(await resolve(w.operator, dispute_id, { outcome: 'depositor', note: 'too short' }), 422, 'review_note_required');
    const badOutcome = await resolve(w.operator, dispute_id, { outcome: 'both', note: NOTE });
    expectRefused(badOutcome, 422, 'validation_error');
    expect(errorOf(badOutcome).details.fields).toEqual([expect.objectContaining({ path: 'outcome', reason: 'not_allowed_value' })]);
    expectRefused(await resolve(w.operator, dispute_id, { outcome: 'depositor', note: NOTE, extra: 1 }), 422, 'validation_error');
    // The platform administrator names the brand; without it, 422.
    expectRefused(await resolve(app.operator_token, dispute_id, { outcome: 'depositor', note: NOTE }), 422, 'validation_error');
    expect((await disputeDetail(w, dispute_id)).status).toBe('open');

    const listed = await app.backoffice({ url: `/v1/bo/disputes?white_label_id=${w.brand}&status=open`, token: app.operator_token });
    expect(listed.json<{ data: { id: string }[] }>().data.map((item) => item.id)).toEqual([dispute_id]);
    const byAdmin = await resolve(app.operator_token, dispute_id, { white_label_id: w.brand, outcome: 'depositor', note: NOTE });
    expect(byAdmin.statusCode, byAdmin.body).toBe(200);
    expectRefused(await resolve(w.operator, dispute_id, { outcome: 'depositor', note: NOTE }), 409, 'dispute_already_resolved');
    expectRefused(await resolve(w.operator, dispute_id, { outcome: 'withdrawer', note: NOTE }), 409, 'dispute_already_resolved');
    const audit = await app.testDatabase.database.query<{ action: string }>('SELECT action FROM audit_log WHERE target_id = $1', [dispute_id]);
    expect(audit.rows).toEqual([{ action: 'dispute.resolved' }]);
    await checkBrand(w.brand);
  });

  it('the deposit reversed by an operator meanwhile: the depositor can no longer win (409), the withdrawer already has its money', async () => {
    const w = await world();
    const { withdrawal, deposit, leg_ref } = await filledWithdrawal(w);
    const dispute_id = (await openDispute(w, withdrawal.id, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' })).json<WithdrawalView>().dispute!.id;
    const reversed = await app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${deposit.id}/reverse`, token: w.operator, body: { reason_code: 'BANK_RECALL', note: NOTE } });
    expect(reversed.statusCode, reversed.body).toBe(200);
    // The reversal took the held credit back from pending clearing and reversed the disputed fill.
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: 0, available_minor: 0 });
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ filled_minor: 0, funds_on_hold: true, dispute: { id: dispute_id, status: 'open' } });
    const refused = await resolve(w.operator, dispute_id, { outcome: 'depositor', note: NOTE });
    expectRefused(refused, 409, 'dispute_not_resolvable');
    expect(errorOf(refused).details).toMatchObject({ reason: 'fill_reversed' });
    const resolved = await resolve(w.operator, dispute_id, { outcome: 'withdrawer', note: NOTE });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(await getDeposit(app, deposit.id, w.depositor)).toMatchObject({ status: 'reversed', reversal: { reason_code: 'BANK_RECALL' } });
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ funds_on_hold: false, dispute: { status: 'resolved', resolution: { outcome: 'withdrawer' } } });
    await checkBrand(w.brand);
  });

  it('two operators at once: exactly one wins; the same resolution repeated by its operator answers the resolved dispute', async () => {
    const w = await world();
    const { withdrawal, leg_ref } = await filledWithdrawal(w);
    const dispute_id = (await openDispute(w, withdrawal.id, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' })).json<WithdrawalView>().dispute!.id;
    const answers = await Promise.all([
      resolve(w.operator, dispute_id, { outcome: 'depositor', note: NOTE }),
      resolve(w.second_operator, dispute_id, { outcome: 'withdrawer', note: NOTE }),
    ]);
    const statuses = answers.map((answer) => answer.statusCode).sort();
    expect(statuses).toEqual([200, 409]);
    const loser = answers.find((answer) => answer.statusCode === 409)!;
    expect(errorOf(loser).code).toBe('dispute_already_resolved');
    const winner = answers.find((answer) => answer.statusCode === 200)!.json<DisputeDetail>();
    const winnerToken = winner.resolution?.outcome === 'depositor' ? w.operator : w.second_operator;

    const before = await getWithdrawal(w, withdrawal.id);
    const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*) AS count FROM events WHERE white_label_id = $1', [w.brand]);
    const repeated = await resolve(winnerToken, dispute_id, { outcome: winner.resolution!.outcome, note: NOTE });
    expect(repeated.statusCode).toBe(200);
    expect(repeated.json()).toMatchObject({ id: dispute_id, status: 'resolved', replayed: true, resolution: winner.resolution });
    expect((await getWithdrawal(w, withdrawal.id)).version).toBe(before.version);
    const after = await app.testDatabase.database.query<{ count: number }>('SELECT count(*) AS count FROM events WHERE white_label_id = $1', [w.brand]);
    expect(Number(after.rows[0]?.count)).toBe(Number(rows[0]?.count));
    await checkBrand(w.brand);
  });
});

describe('ALLOCATION_CONFLICT', () => {
  /**
   * A late slip paid to a leg whose reservation had been given to another deposit: A is matched to W
   * and its payer transfers in time, A expires before the slip is uploaded (W's leg is released), B takes
   * all of W and pays it, then A's slip arrives. Settling A cannot reserve W again.
   */
  async function conflict() {
    const w = await world();
    const withdrawal = await withdraw(w);
    const late: CreatedDeposit = await createDeposit(app, { amount_minor: AMOUNT, credentials: w.depositor });
    const transfer = await sandboxTransfer(app, late, {}, w.depositor);
    app.clock.advance(20 * 60_000);
    await runJobs(app);
    expect(await getDeposit(app, late.id, w.depositor)).toMatchObject({ status: 'expired' });
    const other = await app.createMerchant({ white_label_id: w.brand });
    await payDeposit(w, other);
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ status: 'settled', filled_minor: AMOUNT });
    const upload = await uploadMultipart(app, late.slip_upload, slipBytes(transfer));
    expect(upload.statusCode, upload.body).toBe(202);
    await runJobs(app);
    const reviewed = await getDeposit(app, late.id, w.depositor);
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons[0]?.code).toBe('ALLOCATION_CONFLICT');
    const disputed = await getWithdrawal(w, withdrawal.id);
    return { w, withdrawal, late, disputed, other };
  }

  function approve(w: World, deposit_id: string) {
    return app.backoffice({ method: 'POST', url: `/v1/bo/reviews/${deposit_id}/approve`, token: w.reviewer, body: {} });
  }

  it('opens a dispute on the counterparty; resolved for the depositor, the withdrawer pays by adjustment and the review settles', async () => {
    const { w, withdrawal, late, disputed } = await conflict();
    expect(disputed).toMatchObject({ status: 'settled', version: expect.any(Number), funds_on_hold: true, dispute: { reason_code: 'ALLOCATION_CONFLICT', amount_minor: AMOUNT, status: 'open' } });
    const dispute_id = disputed.dispute!.id;
    const withdrawerEvents = await eventsOfMerchant(app, w.withdrawer.merchant_id);
    expect(withdrawerEvents.at(-1)).toMatchObject({ type: 'withdrawal.disputed', data: { object: { id: withdrawal.id, dispute: { id: dispute_id } } } });
    expect(JSON.stringify(await eventsOfMerchant(app, w.depositor.merchant_id))).not.toContain(dispute_id);
    expect(await disputeDetail(w, dispute_id)).toMatchObject({ kind: 'allocation_conflict', deposit_id: late.id, deposit_leg_ref: late.legs[0]!.leg_ref, funds_on_hold: true });

    // While the dispute is open the review cannot settle the late leg.
    expectRefused(await approve(w, late.id), 409, 'alloc_state_conflict');
    expect((await getDeposit(app, late.id, w.depositor)).status).toBe('under_review');

    const before = await balanceOf(w.withdrawer);
    const resolved = await resolve(w.operator, dispute_id, { outcome: 'depositor', note: NOTE });
    expect(resolved.statusCode, resolved.body).toBe(200);
    const adjustment = resolved.json<DisputeDetail>().resolution?.adjustment_balance_transaction_id;
    expect(adjustment).toMatch(/^btxn_/);
    expect((await balanceOf(w.withdrawer)).available_minor).toBe(before.available_minor - AMOUNT);
    const afterDispute = await getWithdrawal(w, withdrawal.id);
    expect(afterDispute).toMatchObject({ status: 'settled', filled_minor: AMOUNT, funds_on_hold: false, dispute: { status: 'resolved', resolution: { outcome: 'depositor' } } });

    const approved = await approve(w, late.id);
    expect(approved.statusCode, approved.body).toBe(200);
    const settled = await getDeposit(app, late.id, w.depositor);
    expect(settled).toMatchObject({ status: 'settled', settled_via: 'review', amount_received_minor: AMOUNT, legs: [{ leg_status: 'complete' }] });
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: settled.credited_amount_minor });
    // The withdrawal was paid once by B; the late leg was paid by the adjustment, not by a second fill.
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ version: afterDispute.version, filled_minor: AMOUNT, settled_splits: 1 });
    await checkBrand(w.brand);

    // Reversing the late deposit gives the withdrawer its adjustment back.
    const reversed = await app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${late.id}/reverse`, token: w.operator, body: { reason_code: 'OPS_ERROR', note: NOTE } });
    expect(reversed.statusCode, reversed.body).toBe(200);
    expect((await balanceOf(w.withdrawer)).available_minor).toBe(before.available_minor);
    expect((await disputeDetail(w, dispute_id)).resolution?.adjustment_reversal_balance_transaction_id).toMatch(/^btxn_/);
    expect((await getWithdrawal(w, withdrawal.id)).filled_minor).toBe(AMOUNT);
    await checkBrand(w.brand);
  });

  it('resolved for the withdrawer: nothing moves, approval keeps failing and the reviewer rejects', async () => {
    const { w, withdrawal, late, disputed } = await conflict();
    const dispute_id = disputed.dispute!.id;
    const before = await balanceOf(w.withdrawer);
    const resolved = await resolve(w.operator, dispute_id, { outcome: 'withdrawer', note: NOTE });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json<DisputeDetail>().resolution).toMatchObject({ outcome: 'withdrawer', adjustment_balance_transaction_id: null });
    expect(await balanceOf(w.withdrawer)).toEqual({ ...before, as_of: expect.any(String) });
    expectRefused(await approve(w, late.id), 409, 'alloc_state_conflict');
    const rejected = await app.backoffice({ method: 'POST', url: `/v1/bo/reviews/${late.id}/reject`, token: w.reviewer, body: { rejection_code: 'PAYMENT_OUTSIDE_WINDOW', note: NOTE } });
    expect(rejected.statusCode, rejected.body).toBe(200);
    expect(await getDeposit(app, late.id, w.depositor)).toMatchObject({ status: 'rejected' });
    expect(await getWithdrawal(w, withdrawal.id)).toMatchObject({ funds_on_hold: false, filled_minor: AMOUNT, dispute: { status: 'resolved', resolution: { outcome: 'withdrawer' } } });
    expect(await balanceOf(w.depositor)).toMatchObject({ pending_clearing_minor: 0, available_minor: 0 });
    await checkBrand(w.brand);
  });
});
