import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, eventsOfMerchant, getDeposit, runJobs } from '../support/slips.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import type { BackofficeClaimView, MerchantClaimView } from '../../src/review/claims.ts';
import { balanceOf, clearCredits, refundsOf, settledDeposit } from '../support/refunds.ts';

/**
 * Refunds from the back office (issue 32, item 2) through the doors staff and merchants use: sandbox deposits settle
 * from a verified sender (some with an excess, whose claim opens at settlement) over signed HTTP and the job worker,
 * their credit clears on the test clock; an operator resolves a claim `refunded_in_service` (a new refund, or one the
 * merchant made) or opens a refund for the merchant with a reason, over the back-office API with its own credential;
 * the claim, the refund, the wallet, the merchant's events and the audit log are checked after each step.
 */

let app: TestApp;
let operator: string;
let secondOperator: string;
let reviewer: string;
let otherBrandOperator: string;

const system = { actor_type: 'system' as const, actor_id: 'backoffice-refunds-test', request_id: null };
const NOTE = 'ผู้โอนโทรแจ้งว่าโอนเกิน ตรวจสอบกับธนาคารแล้ว คืนเงินผ่านระบบ';

beforeAll(async () => {
  app = await createTestApp();
  const tenancy = app.instance.services.tenancy;
  const brand = app.sandbox.white_label_id;
  operator = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Refund operator' })).token;
  secondOperator = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Second operator' })).token;
  reviewer = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer' })).token;
  const other = await app.createMerchant();
  otherBrandOperator = (await tenancy.createBackofficeCredential(system, { white_label_id: other.white_label_id, role: 'operator', name: 'Other brand' })).token;
});
afterAll(async () => {
  await app.close();
});

function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

/** A settled deposit of 1,000.00 THB paid 1,100.00 THB: its excess claim (100.00 THB) is open. */
async function overpaidDeposit(owner: MerchantCredentials): Promise<{ deposit: DepositView; claim_id: string }> {
  const deposit = await settledDeposit(app, owner, 100_000, 110_000);
  const claim_id = deposit.overpayment?.claim_id;
  expect(claim_id).toMatch(/^clm_/);
  return { deposit, claim_id: claim_id! };
}

function resolve(claim_id: string, body: Record<string, unknown>, token = operator) {
  return app.backoffice({ method: 'POST', url: `/v1/bo/claims/${claim_id}/resolve`, body, token });
}

async function claimOf(claim_id: string): Promise<BackofficeClaimView> {
  const response = await app.backoffice({ url: `/v1/bo/claims/${claim_id}`, token: reviewer });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<BackofficeClaimView>();
}

function operatorRefund(deposit_id: string, body: Record<string, unknown>, options: { token?: string; idempotency_key?: string } = {}) {
  return app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${deposit_id}/refunds`, body, token: options.token ?? operator, ...(options.idempotency_key ? { idempotency_key: options.idempotency_key } : {}) });
}

async function auditRows(target_type: string, target_id: string): Promise<{ action: string; actor_id: string; details: Record<string, unknown> }[]> {
  const { rows } = await app.testDatabase.database.query<{ action: string; actor_id: string; details: Record<string, unknown> }>(
    'SELECT action, actor_id, details FROM audit_log WHERE target_type = $1 AND target_id = $2 ORDER BY created_at, audit_id',
    [target_type, target_id],
  );
  return rows;
}

async function auditCount(action: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM audit_log WHERE action = $1', [action]);
  return rows[0]!.count;
}

async function beneficiaryCount(owner: MerchantCredentials): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM beneficiaries WHERE merchant_id = $1', [owner.merchant_id]);
  return rows[0]!.count;
}

describe('a claim resolved refunded_in_service', () => {
  it('with a new refund: the refund of the deposit, the claim naming it, the events, the audit row and the wallet in one decision', async () => {
    const owner = await merchant();
    const { deposit, claim_id } = await overpaidDeposit(owner);
    await clearCredits(app, owner);
    const before = await balanceOf(app, owner);

    const resolved = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 10_000, note: 'คืนยอดที่โอนเกิน' } });
    expect(resolved.statusCode, resolved.body).toBe(200);
    const claim = resolved.json<BackofficeClaimView>();
    expect(claim).toMatchObject({ status: 'resolved', version: 2, resolution_code: 'refunded_in_service', refund_id: expect.stringMatching(/^wdr_/) });

    const refunds = await refundsOf(app, owner, deposit.id);
    expect(refunds.map((refund) => refund.id)).toEqual([claim.refund_id]);
    expect(refunds[0]).toMatchObject({ status: 'open', amount_total_minor: 10_000, refund_of_deposit_id: deposit.id, refund_reason_code: 'claim_resolution', refund_note: 'คืนยอดที่โอนเกิน' });
    const after = await balanceOf(app, owner);
    expect(before.available_minor - after.available_minor).toBe(refunds[0]!.total_locked_minor);
    expect(after.reserved_minor - before.reserved_minor).toBe(refunds[0]!.total_locked_minor);
    expect((await getDeposit(app, deposit.id, owner)).refunds).toMatchObject({ amount_refundable_minor: 90_000, refund_ids: [claim.refund_id] });

    // The merchant reads the claim with its refund, never the note; its feed has the refund and the claim's change.
    const read = await app.signed({ url: `/v1/pay/claims/${claim_id}`, credentials: owner });
    expect(read.json<MerchantClaimView>()).toMatchObject({ status: 'resolved', resolution_code: 'refunded_in_service', refund_id: claim.refund_id });
    const events = await eventsOfMerchant(app, owner.merchant_id);
    const mine = events.filter((event) => event.data.object.id === claim_id || event.data.object.id === claim.refund_id).map((event) => event.type);
    expect(mine).toEqual(['claim.created', 'withdrawal.created', 'claim.updated']);
    const updated = events.find((event) => event.type === 'claim.updated' && event.data.object.id === claim_id)!;
    expect(updated.data.object).toMatchObject({ refund_id: claim.refund_id });
    expect((updated.data as { previous_attributes?: unknown }).previous_attributes).toMatchObject({ refund_id: null, resolution_code: null });
    expect(JSON.stringify(events)).not.toContain(NOTE);
    const audit = await auditRows('claim', claim_id);
    expect(audit.map((row) => [row.action, row.details])).toEqual([
      ['claim.resolved', { deposit_id: deposit.id, from_status: 'open', to_status: 'resolved', resolution_code: 'refunded_in_service', refund_id: claim.refund_id, refund: 'created' }],
    ]);

    // The same operator sending it again gets the claim back; no second refund.
    const again = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 10_000 } });
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replay']).toBe('true');
    expect(again.json<BackofficeClaimView>().refund_id).toBe(claim.refund_id);
    expect(await refundsOf(app, owner, deposit.id)).toHaveLength(1);
    // Another operator: the claim is decided.
    expect(errorOf(await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 10_000 } }, secondOperator)).code).toBe('claim_state_conflict');
    expect(await refundsOf(app, owner, deposit.id)).toHaveLength(1);
  });
});

describe('a claim resolved refunded_in_service by two operators at once', () => {
  it('exactly one resolves it and makes one refund; the other gets claim_state_conflict and makes none', async () => {
    const owner = await merchant();
    const { deposit, claim_id } = await overpaidDeposit(owner);
    await clearCredits(app, owner);
    const body = { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 10_000 } };
    const answers = await Promise.all([resolve(claim_id, body, operator), resolve(claim_id, body, secondOperator)]);
    expect(answers.map((answer) => answer.statusCode).sort()).toEqual([200, 409]);
    const winner = answers.find((answer) => answer.statusCode === 200)!.json<BackofficeClaimView>();
    expect(errorOf(answers.find((answer) => answer.statusCode === 409)!).code).toBe('claim_state_conflict');
    expect((await refundsOf(app, owner, deposit.id)).map((refund) => refund.id)).toEqual([winner.refund_id]);
    expect((await auditRows('claim', claim_id)).map((row) => row.action)).toEqual(['claim.resolved']);
  });
});

describe('a claim resolved refunded_in_service by an existing refund', () => {
  it('linking a refund the merchant made: the claim names it; one refund resolves one claim; another deposit’s refund is refused', async () => {
    const owner = await merchant();
    const { deposit, claim_id } = await overpaidDeposit(owner);
    const other = await settledDeposit(app, owner, 50_000);
    await clearCredits(app, owner);
    const byMerchant = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${deposit.id}/refunds`, idempotency_key: crypto.randomUUID(), credentials: owner, body: { amount_minor: 10_000, reason_code: 'overpayment' } });
    expect(byMerchant.statusCode, byMerchant.body).toBe(201);
    const refund = byMerchant.json<WithdrawalView>();
    const ofOther = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${other.id}/refunds`, idempotency_key: crypto.randomUUID(), credentials: owner, body: { amount_minor: 10_000, reason_code: 'overpayment' } });
    expect(ofOther.statusCode, ofOther.body).toBe(201);

    const wrong = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund_id: ofOther.json<WithdrawalView>().id });
    expect(wrong.statusCode).toBe(409);
    expect(errorOf(wrong)).toMatchObject({ code: 'claim_refund_unusable', details: { reason: 'not_a_refund_of_the_deposit' } });
    expect(errorOf(await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund_id: 'wdr_unknown' })).code).toBe('claim_refund_unusable');
    expect(await claimOf(claim_id)).toMatchObject({ status: 'open', version: 1, refund_id: null });

    const linked = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund_id: refund.id });
    expect(linked.statusCode, linked.body).toBe(200);
    expect(linked.json<BackofficeClaimView>()).toMatchObject({ status: 'resolved', resolution_code: 'refunded_in_service', refund_id: refund.id });
    expect((await refundsOf(app, owner, deposit.id)).map((item) => item.id)).toEqual([refund.id]);
    expect((await auditRows('claim', claim_id)).map((row) => row.details)).toEqual([expect.objectContaining({ refund_id: refund.id, refund: 'linked' })]);

    // A second claim on the same deposit (a transfer the payer reports) cannot take the same refund.
    const reported = await app.backoffice({
      method: 'POST',
      url: '/v1/bo/claims',
      token: operator,
      body: { deposit_id: deposit.id, cause: 'additional_transfer', amount_minor: 5_000, evidence: { trans_ref: 'REPORTED0001', note: 'ผู้โอนโอนซ้ำอีกครั้ง' } },
    });
    expect(reported.statusCode, reported.body).toBe(201);
    const second = await resolve(reported.json<BackofficeClaimView>().id, { resolution_code: 'refunded_in_service', note: NOTE, refund_id: refund.id });
    expect(errorOf(second)).toMatchObject({ code: 'claim_refund_unusable', details: { reason: 'resolves_another_claim' } });
  });
});

describe('two claims linking one refund at once', () => {
  it('one links it; the other is refused as the check would refuse it, not with a 500', async () => {
    const owner = await merchant();
    const { deposit, claim_id } = await overpaidDeposit(owner);
    await clearCredits(app, owner);
    const made = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${deposit.id}/refunds`, idempotency_key: crypto.randomUUID(), credentials: owner, body: { amount_minor: 10_000, reason_code: 'overpayment' } });
    expect(made.statusCode, made.body).toBe(201);
    const refund_id = made.json<WithdrawalView>().id;
    const reported = await app.backoffice({
      method: 'POST',
      url: '/v1/bo/claims',
      token: operator,
      body: { deposit_id: deposit.id, cause: 'additional_transfer', amount_minor: 5_000, evidence: { trans_ref: 'RACELINK0001', note: 'ผู้โอนโอนซ้ำอีกครั้ง' } },
    });
    expect(reported.statusCode, reported.body).toBe(201);
    const answers = await Promise.all([
      resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund_id }),
      resolve(reported.json<BackofficeClaimView>().id, { resolution_code: 'refunded_in_service', note: NOTE, refund_id }, secondOperator),
    ]);
    expect(answers.map((answer) => answer.statusCode).sort()).toEqual([200, 409]);
    const refused = answers.find((answer) => answer.statusCode === 409)!;
    expect(errorOf(refused)).toMatchObject({ code: 'claim_refund_unusable', details: { reason: 'resolves_another_claim' } });
    const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM claims WHERE refund_id = $1', [refund_id]);
    expect(rows[0]!.count).toBe(1);
  });
});

describe('a claim resolved refunded_in_service, refused', () => {
  it('a refusal of the refund leaves the claim open and nothing created: over the deposit, not cleared (402), not settled', async () => {
    const owner = await merchant();
    const { deposit, claim_id } = await overpaidDeposit(owner);
    const beneficiaries = await beneficiaryCount(owner);
    const events = (await eventsOfMerchant(app, owner.merchant_id)).length;

    // The credit is still pending clearing: the wallet cannot fund it.
    const unfunded = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 10_000 } });
    expect(unfunded.statusCode, unfunded.body).toBe(402);
    expect(errorOf(unfunded)).toMatchObject({ code: 'insufficient_balance', details: { pending_clearing_minor: expect.any(Number) } });
    expect(await eventsOfMerchant(app, owner.merchant_id)).toHaveLength(events);

    await clearCredits(app, owner);
    const cleared = (await eventsOfMerchant(app, owner.merchant_id)).length;
    const over = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 120_000 } });
    expect(over.statusCode).toBe(422);
    expect(errorOf(over)).toMatchObject({ code: 'refund_exceeds_refundable', details: { refundable_minor: 100_000 } });

    expect(await claimOf(claim_id)).toMatchObject({ status: 'open', version: 1, resolution_code: null, refund_id: null });
    expect(await refundsOf(app, owner, deposit.id)).toEqual([]);
    expect(await beneficiaryCount(owner)).toBe(beneficiaries);
    expect(await auditRows('claim', claim_id)).toEqual([]);
    expect(await eventsOfMerchant(app, owner.merchant_id)).toHaveLength(cleared);

    // A late-slip claim on an expired order: there is nothing settled to refund.
    const expired = await createDeposit(app, { amount_minor: 20_000, credentials: owner });
    app.clock.advance(15 * 60_000 + 1);
    await runJobs(app);
    app.clock.advance(24 * HOUR_MS);
    const late = await app.backoffice({ method: 'POST', url: '/v1/bo/claims', token: operator, body: { deposit_id: expired.id, cause: 'late_slip', evidence: { trans_ref: 'LATE000001' } } });
    expect(late.statusCode, late.body).toBe(201);
    const notSettled = await resolve(late.json<BackofficeClaimView>().id, { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 20_000 } });
    expect(errorOf(notSettled)).toMatchObject({ code: 'deposit_not_refundable', details: { status: 'expired' } });
  });
});

describe('who resolves a claim refunded_in_service', () => {
  it('is the operators’: a reviewer gets 403, another brand’s operator 404; refund and refund_id only with refunded_in_service', async () => {
    const owner = await merchant();
    const { claim_id } = await overpaidDeposit(owner);
    const body = { resolution_code: 'refunded_in_service', note: NOTE, refund: { amount_minor: 10_000 } };
    const byReviewer = await resolve(claim_id, body, reviewer);
    expect(byReviewer.statusCode).toBe(403);
    expect(errorOf(byReviewer).code).toBe('scope_denied');
    const otherBrand = await resolve(claim_id, body, otherBrandOperator);
    expect(otherBrand.statusCode).toBe(404);
    expect(errorOf(otherBrand).code).toBe('resource_not_found');
    const missing = await resolve(claim_id, { resolution_code: 'refunded_in_service', note: NOTE });
    expect(errorOf(missing)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'refund', reason: 'required' }] } });
    const both = await resolve(claim_id, { ...body, refund_id: 'wdr_x' });
    expect(errorOf(both)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'refund_id', reason: 'not_allowed' }] } });
    const outside = await resolve(claim_id, { resolution_code: 'refunded_to_payer', note: NOTE, refund: { amount_minor: 10_000 } });
    expect(errorOf(outside)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'refund', reason: 'not_allowed' }] } });
    expect(await claimOf(claim_id)).toMatchObject({ status: 'open', version: 1 });
    expect(await refundsOf(app, owner, (await claimOf(claim_id)).deposit_id)).toEqual([]);
  });
});

describe("an operator's refund for a merchant", () => {
  it("opens the merchant's refund with a reason, writes its audit row, and is read by operators and reviewers", async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const before = await balanceOf(app, owner);

    const response = await operatorRefund(deposit.id, { amount_minor: 40_000, reason_code: 'canceled_purchase', note: NOTE, refund_note: 'ร้านค้ายกเลิกคำสั่งซื้อ' });
    expect(response.statusCode, response.body).toBe(201);
    const refund = response.json<WithdrawalView>();
    expect(refund).toMatchObject({ object: 'withdrawal_order', status: 'open', amount_total_minor: 40_000, refund_of_deposit_id: deposit.id, refund_reason_code: 'canceled_purchase', refund_note: 'ร้านค้ายกเลิกคำสั่งซื้อ' });
    const after = await balanceOf(app, owner);
    expect(before.available_minor - after.available_minor).toBe(refund.total_locked_minor);

    // The merchant sees it as its own refund, in its list and its feed; the operator's note is internal.
    expect((await refundsOf(app, owner, deposit.id)).map((item) => item.id)).toEqual([refund.id]);
    const events = (await eventsOfMerchant(app, owner.merchant_id)).filter((event) => event.data.object.id === refund.id);
    expect(events.map((event) => event.type)).toEqual(['withdrawal.created']);
    expect(JSON.stringify(await eventsOfMerchant(app, owner.merchant_id))).not.toContain(NOTE);
    const audit = await auditRows('withdrawal_order', refund.id);
    expect(audit).toEqual([
      {
        action: 'refund.created',
        actor_id: expect.stringMatching(/^boc_/),
        details: { deposit_id: deposit.id, merchant_id: owner.merchant_id, livemode: false, amount_minor: 40_000, reason_code: 'canceled_purchase', note: NOTE },
      },
    ]);

    for (const token of [operator, reviewer]) {
      const listed = await app.backoffice({ url: `/v1/bo/deposits/${deposit.id}/refunds`, token });
      expect(listed.statusCode, listed.body).toBe(200);
      expect(listed.json<{ data: WithdrawalView[] }>().data.map((item) => item.id)).toEqual([refund.id]);
    }
    // The platform administrator (the test app's default credential) names the brand.
    const asAdmin = await app.backoffice({ url: `/v1/bo/deposits/${deposit.id}/refunds?white_label_id=${owner.white_label_id}` });
    expect(asAdmin.json<{ data: WithdrawalView[] }>().data).toHaveLength(1);
  });
});

describe("an operator's refund for a merchant, retried or refused", () => {
  it('a retry with the same Idempotency-Key gets the first refund; refusals write nothing; a reviewer, another brand, a short note are refused', async () => {
    const owner = await merchant();
    const deposit = await settledDeposit(app, owner, 100_000);
    await clearCredits(app, owner);
    const body = { amount_minor: 30_000, reason_code: 'customer_request', note: NOTE };
    const key = crypto.randomUUID();
    const first = await operatorRefund(deposit.id, body, { idempotency_key: key });
    expect(first.statusCode, first.body).toBe(201);
    const retried = await operatorRefund(deposit.id, body, { idempotency_key: key });
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.headers['idempotent-replay']).toBe('true');
    expect(retried.json<WithdrawalView>().id).toBe(first.json<WithdrawalView>().id);
    expect(await refundsOf(app, owner, deposit.id)).toHaveLength(1);
    // The same key from another operator is that operator's own request.
    const byOther = await operatorRefund(deposit.id, body, { token: secondOperator, idempotency_key: key });
    expect(byOther.statusCode, byOther.body).toBe(201);

    const audits = await auditCount('refund.created');
    const over = await operatorRefund(deposit.id, { ...body, amount_minor: 50_000 });
    expect(over.statusCode).toBe(422);
    expect(errorOf(over)).toMatchObject({ code: 'refund_exceeds_refundable', details: { refundable_minor: 40_000 } });
    const byReviewer = await operatorRefund(deposit.id, body, { token: reviewer });
    expect(byReviewer.statusCode).toBe(403);
    expect(errorOf(byReviewer).code).toBe('scope_denied');
    const otherBrand = await operatorRefund(deposit.id, body, { token: otherBrandOperator });
    expect(otherBrand.statusCode).toBe(404);
    expect((await app.backoffice({ url: `/v1/bo/deposits/${deposit.id}/refunds`, token: otherBrandOperator })).statusCode).toBe(404);
    const short = await operatorRefund(deposit.id, { ...body, note: 'too short' });
    expect(errorOf(short).code).toBe('review_note_required');
    expect(await auditCount('refund.created')).toBe(audits);
    expect(await refundsOf(app, owner, deposit.id)).toHaveLength(2);

    // An unsettled deposit: the refund rules answer.
    const open = await createDeposit(app, { amount_minor: 30_000, credentials: owner });
    expect(errorOf(await operatorRefund(open.id, body))).toMatchObject({ code: 'deposit_not_refundable', details: { status: expect.any(String) } });
    expect(errorOf(await operatorRefund('dep_unknown', body)).code).toBe('resource_not_found');
  });
});
