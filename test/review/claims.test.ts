import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, eventsOfMerchant, getDeposit, postToUploadUrl, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';
import { HOUR_MS, MINUTE_MS } from '../../src/platform/time.ts';
import type { BackofficeClaimView, MerchantClaimView } from '../../src/review/claims.ts';

/**
 * Claims (issue 11, item 5) through the doors their users use: real sandbox orders settle with an excess
 * or expire and pass their late-slip window on the test clock and the job worker; the end user opens a
 * claim at the 410's `claim_url` with the order's capability; back-office staff open, list, read and
 * decide claims with their own credentials and roles; the merchant reads its claim where
 * `overpayment.claim_id` points, over signed HTTP.
 */

let app: TestApp;
let operatorA: string;
let operatorB: string;
let reviewer: string;
let otherBrandOperator: string;
let otherBrandMerchant: MerchantCredentials;

const system = { actor_type: 'system' as const, actor_id: 'claims-test', request_id: null };
const NOTE = 'ผู้โอนยืนยันทางโทรศัพท์ ร้านค้าคืนเงินให้แล้วนอกระบบ ref 42';

beforeAll(async () => {
  app = await createTestApp();
  const tenancy = app.instance.services.tenancy;
  const brand = app.sandbox.white_label_id;
  operatorA = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Operator A' })).token;
  operatorB = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Operator B' })).token;
  reviewer = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer' })).token;
  otherBrandMerchant = await app.createMerchant();
  otherBrandOperator = (await tenancy.createBackofficeCredential(system, { white_label_id: otherBrandMerchant.white_label_id, role: 'operator', name: 'Other brand' })).token;
});
afterAll(async () => {
  await app.close();
});

async function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

/** A settled order with a same-slip overpayment (X = 11,600, V = 12,100: E = 500), and its merchant. */
async function overpaidOrder() {
  const owner = await merchant();
  const order = await createDeposit(app, { amount_minor: 11_600, credentials: owner });
  const response = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, { amount_minor: 12_100 }, owner)));
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  const settled = await getDeposit(app, order.id, owner);
  expect(settled).toMatchObject({ status: 'settled', overpayment: { cause: 'same_transfer_excess', amount_minor: 500, status: 'open' } });
  return { owner, order, settled, claim_id: settled.overpayment!.claim_id };
}

/** A settled order paid exactly, and its merchant. */
async function settledOrder() {
  const owner = await merchant();
  const order = await createDeposit(app, { amount_minor: 12_000, credentials: owner });
  const response = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, owner)));
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  const settled = await getDeposit(app, order.id, owner);
  expect(settled.status).toBe('settled');
  return { owner, order, settled };
}

/** An order that expired unpaid (its late-slip window open, or closed with `closeWindow`), and its merchant. */
async function expiredOrder(options: { closeWindow: boolean }): Promise<{ owner: MerchantCredentials; order: CreatedDeposit }> {
  const owner = await merchant();
  const order = await createDeposit(app, { amount_minor: 12_000, credentials: owner });
  app.clock.advance(15 * MINUTE_MS + 1);
  await runJobs(app);
  expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'expired' });
  if (options.closeWindow) app.clock.advance(24 * HOUR_MS);
  return { owner, order };
}

function openClaim(body: Record<string, unknown>, token = operatorA) {
  return app.backoffice({ method: 'POST', url: '/v1/bo/claims', body, token });
}

function decide(claim_id: string, action: 'investigate' | 'resolve' | 'reject', body: Record<string, unknown> = {}, token = operatorA) {
  return app.backoffice({ method: 'POST', url: `/v1/bo/claims/${claim_id}/${action}`, body, token });
}

async function backofficeClaim(claim_id: string, token = reviewer): Promise<BackofficeClaimView> {
  const response = await app.backoffice({ url: `/v1/bo/claims/${claim_id}`, token });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<BackofficeClaimView>();
}

async function merchantClaim(claim_id: string, credentials: MerchantCredentials) {
  return app.signed({ url: `/v1/pay/claims/${claim_id}`, credentials });
}

async function claimEvents(merchant_id: string, claim_id: string) {
  return (await eventsOfMerchant(app, merchant_id)).filter((event) => event.data.object.id === claim_id) as unknown as {
    type: string;
    data: { object: MerchantClaimView; previous_attributes: Record<string, unknown> | null };
  }[];
}

async function auditActions(claim_id: string): Promise<string[]> {
  const { rows } = await app.testDatabase.database.query<{ action: string }>("SELECT action FROM audit_log WHERE target_type = 'claim' AND target_id = $1 ORDER BY created_at, audit_id", [claim_id]);
  return rows.map((row) => row.action);
}

async function claimCount(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string | number }>('SELECT count(*) AS count FROM claims');
  return Number(rows[0]?.count);
}

describe('the claim of a same-slip overpayment', () => {
  it('is open from settlement, read by its merchant at overpayment.claim_id (no internal field), listed in the back office', async () => {
    const { owner, order, claim_id } = await overpaidOrder();
    expect(claim_id).toMatch(/^clm_/);
    const read = await merchantClaim(claim_id, owner);
    expect(read.statusCode, read.body).toBe(200);
    const view = read.json<MerchantClaimView>();
    expect(view).toEqual({
      id: claim_id,
      object: 'claim',
      version: 1,
      deposit_id: order.id,
      cause: 'same_transfer_excess',
      status: 'open',
      amount_minor: 500,
      slip_received_at: expect.any(String),
      opened_by: 'system',
      resolution_code: null,
      resolved_at: null,
      refund_id: null,
      created_at: expect.any(String),
      updated_at: view.created_at,
      livemode: false,
    });
    // Another merchant of the brand, and a merchant of another brand, do not see it.
    expect((await merchantClaim(claim_id, await merchant())).statusCode).toBe(404);
    expect(errorOf(await merchantClaim(claim_id, otherBrandMerchant)).code).toBe('resource_not_found');

    const internal = await backofficeClaim(claim_id);
    expect(internal).toMatchObject({ id: claim_id, merchant_id: owner.merchant_id, deposit_id: order.id, status: 'open', opened_by: { type: 'system', credential_id: null }, evidence: null });
    const listed = await app.backoffice({ url: `/v1/bo/claims?deposit_id=${order.id}`, token: reviewer });
    expect(listed.json()).toMatchObject({ object: 'list', data: [{ id: claim_id }], has_more: false, next_cursor: null });

    const events = await claimEvents(owner.merchant_id, claim_id);
    expect(events.map((event) => [event.type, event.data.object.version, event.data.previous_attributes])).toEqual([['claim.created', 1, null]]);
    // Another brand's operator gets 404 for the claim.
    expect(errorOf(await app.backoffice({ url: `/v1/bo/claims/${claim_id}`, token: otherBrandOperator })).code).toBe('resource_not_found');
  });
});

describe('the life cycle', () => {
  it('investigate, then resolve: one event and one audit row per decision, the order snapshot unchanged, the note internal', async () => {
    const { owner, order, settled, claim_id } = await overpaidOrder();

    const investigated = await decide(claim_id, 'investigate');
    expect(investigated.statusCode, investigated.body).toBe(200);
    expect(investigated.json()).toMatchObject({ status: 'investigating', version: 2, investigated_by: expect.stringMatching(/^boc_/), resolution_code: null });
    // The same operator again: the claim unchanged. Another operator: the claim is no longer open.
    const again = await decide(claim_id, 'investigate');
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replay']).toBe('true');
    expect(again.json()).toMatchObject({ status: 'investigating', version: 2 });
    const other = await decide(claim_id, 'investigate', {}, operatorB);
    expect(other.statusCode).toBe(409);
    expect(errorOf(other)).toMatchObject({ code: 'claim_state_conflict', details: { status: 'investigating' } });

    // Refusals change nothing: a short note, an unknown outcome, a reviewer, another brand.
    const short = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: 'too short note here' });
    expect(short.statusCode).toBe(422);
    expect(errorOf(short).code).toBe('review_note_required');
    const blank = await decide(claim_id, 'reject', { note: `   ${'x'.repeat(5)}              ` });
    expect(errorOf(blank).code).toBe('review_note_required');
    const unknownCode = await decide(claim_id, 'resolve', { resolution_code: 'refunded_automatically', note: NOTE });
    expect(unknownCode.statusCode).toBe(422);
    expect(errorOf(unknownCode)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'resolution_code', reason: 'not_allowed_value' }] } });
    const extra = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: NOTE, amount_minor: 500 });
    expect(errorOf(extra)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'amount_minor', reason: 'unknown_field' }] } });
    const byReviewer = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: NOTE }, reviewer);
    expect(byReviewer.statusCode).toBe(403);
    expect(errorOf(byReviewer).code).toBe('scope_denied');
    const byIntegrationKey = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: NOTE }, owner.api_key);
    expect(errorOf(byIntegrationKey).code).toBe('scope_denied');
    const otherBrand = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: NOTE }, otherBrandOperator);
    expect(otherBrand.statusCode).toBe(404);
    expect(errorOf(otherBrand).code).toBe('resource_not_found');
    expect(await backofficeClaim(claim_id)).toMatchObject({ status: 'investigating', version: 2, resolution_note: null });

    app.clock.advance(MINUTE_MS);
    const resolved = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: NOTE });
    expect(resolved.statusCode, resolved.body).toBe(200);
    expect(resolved.json()).toMatchObject({
      status: 'resolved',
      version: 3,
      resolution_code: 'refunded_to_payer',
      resolution_note: NOTE,
      resolved_by: expect.stringMatching(/^boc_/),
      resolved_at: app.clock.now().toISOString(),
    });
    const repeated = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: `${NOTE} (sent twice)` });
    expect(repeated.statusCode).toBe(200);
    expect(repeated.json()).toMatchObject({ version: 3, resolution_note: NOTE });
    for (const [action, body] of [
      ['resolve', { resolution_code: 'no_transfer_found', note: NOTE }],
      ['reject', { note: NOTE }],
      ['investigate', {}],
    ] as const) {
      const late = await decide(claim_id, action, body);
      expect(late.statusCode, action).toBe(409);
      expect(errorOf(late)).toMatchObject({ code: 'claim_state_conflict', details: { status: 'resolved' } });
    }
    const byOther = await decide(claim_id, 'resolve', { resolution_code: 'refunded_to_payer', note: NOTE }, operatorB);
    expect(errorOf(byOther).code).toBe('claim_state_conflict');

    // The order's overpayment is the immutable snapshot of the claim at its creation.
    const order_after = await getDeposit(app, order.id, owner);
    expect(order_after.version).toBe(settled.version);
    expect(order_after.overpayment).toEqual(settled.overpayment);

    const read = (await merchantClaim(claim_id, owner)).json<MerchantClaimView>();
    expect(read).toMatchObject({ status: 'resolved', version: 3, resolution_code: 'refunded_to_payer', resolved_at: app.clock.now().toISOString() });
    expect(JSON.stringify(read)).not.toContain(NOTE);
    expect(Object.keys(read)).not.toContain('resolution_note');
    const events = await claimEvents(owner.merchant_id, claim_id);
    expect(events.map((event) => [event.type, event.data.object.version, event.data.object.status])).toEqual([
      ['claim.created', 1, 'open'],
      ['claim.updated', 2, 'investigating'],
      ['claim.updated', 3, 'resolved'],
    ]);
    expect(events[2]?.data.previous_attributes).toEqual({ status: 'investigating', resolution_code: null, resolved_at: null, updated_at: events[1]?.data.object.updated_at, version: 2 });
    expect(JSON.stringify(await eventsOfMerchant(app, owner.merchant_id))).not.toContain(NOTE);
    expect(await auditActions(claim_id)).toEqual(['claim.investigation_started', 'claim.resolved']);
  });

  it('two operators deciding at once: exactly one wins, the other gets claim_state_conflict; one event, one audit row', async () => {
    const { owner, claim_id } = await overpaidOrder();
    const answers = await Promise.all([
      decide(claim_id, 'resolve', { resolution_code: 'credited_to_merchant_outside_service', note: NOTE }, operatorA),
      decide(claim_id, 'reject', { note: NOTE }, operatorB),
    ]);
    expect(answers.map((answer) => answer.statusCode).sort()).toEqual([200, 409]);
    const loser = answers.find((answer) => answer.statusCode === 409);
    expect(errorOf(loser!).code).toBe('claim_state_conflict');
    const winner = answers.find((answer) => answer.statusCode === 200)!.json<BackofficeClaimView>();
    expect(await backofficeClaim(claim_id)).toMatchObject({ status: winner.status, version: 2 });
    expect((await claimEvents(owner.merchant_id, claim_id)).map((event) => event.type)).toEqual(['claim.created', 'claim.updated']);
    expect(await auditActions(claim_id)).toHaveLength(1);

    // The same operator's request sent twice at once: one decision, and the other answer is the claim unchanged.
    const second = await overpaidOrder();
    const twice = await Promise.all([decide(second.claim_id, 'investigate'), decide(second.claim_id, 'investigate')]);
    expect(twice.map((answer) => answer.statusCode)).toEqual([200, 200]);
    expect(twice.map((answer) => answer.headers['idempotent-replay'] ?? null).sort()).toEqual([null, 'true']);
    expect(await auditActions(second.claim_id)).toEqual(['claim.investigation_started']);
  });

  it('reject: no outcome code, the note internal', async () => {
    const { owner, claim_id } = await overpaidOrder();
    const rejected = await decide(claim_id, 'reject', { note: NOTE });
    expect(rejected.json()).toMatchObject({ status: 'rejected', resolution_code: null, resolution_note: NOTE, version: 2 });
    expect((await decide(claim_id, 'reject', { note: NOTE })).json()).toMatchObject({ status: 'rejected', version: 2 });
    expect(errorOf(await decide(claim_id, 'reject', { note: NOTE }, operatorB)).code).toBe('claim_state_conflict');
    expect((await merchantClaim(claim_id, owner)).json()).toMatchObject({ status: 'rejected', resolution_code: null });
    expect(await auditActions(claim_id)).toEqual(['claim.rejected']);
  });
});

describe('a late slip after the window', () => {
  it("opened by the end user at claim_url: in the back-office list as the end user's; the operator naming the same transfer gets it back", async () => {
    const { owner, order } = await expiredOrder({ closeWindow: true });
    const transfer = await sandboxTransfer(app, order, {}, owner);
    const closed = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
    expect(closed.statusCode).toBe(410);
    const claim_url = String(errorOf(closed).details.claim_url);
    const body = JSON.stringify({ trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, amount_minor: 12_000, note: 'โอนแล้วแต่ส่งสลิปไม่ทัน' });
    const opened = await postToUploadUrl(app, order.slip_upload, body, 'application/json', { upload_url: claim_url });
    expect(opened.statusCode, opened.body).toBe(201);
    const claim_id = opened.json<{ id: string }>().id;
    // The same transfer claimed again with another key is the same claim.
    const again = await postToUploadUrl(app, order.slip_upload, body, 'application/json', { upload_url: claim_url });
    expect(again.json<{ id: string }>().id).toBe(claim_id);

    const listed = await app.backoffice({ url: `/v1/bo/claims?deposit_id=${order.id}&cause=late_slip`, token: reviewer });
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json<{ data: BackofficeClaimView[] }>().data).toEqual([
      expect.objectContaining({
        id: claim_id,
        cause: 'late_slip',
        status: 'open',
        amount_minor: 12_000,
        opened_by: { type: 'end_user', credential_id: null },
        evidence: { trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, amount_minor: 12_000, note: 'โอนแล้วแต่ส่งสลิปไม่ทัน' },
      }),
    ]);

    const byOperator = await openClaim({ deposit_id: order.id, cause: 'late_slip', evidence: { trans_ref: transfer.trans_ref.toLowerCase(), note: 'payer called support' } }, reviewer);
    expect(byOperator.statusCode, byOperator.body).toBe(200);
    expect(byOperator.headers['idempotent-replay']).toBe('true');
    expect(byOperator.json()).toMatchObject({ id: claim_id, opened_by: { type: 'end_user' } });
    expect(await auditActions(claim_id)).toEqual([]);

    // A claim the operator opens for the payer without a reference: new, and a replay of it is the same claim.
    const noteOnly = { deposit_id: order.id, cause: 'late_slip', amount_minor: 12_000, evidence: { note: 'payer lost the slip; statement line 2026-08-01' } };
    const created = await openClaim(noteOnly, reviewer);
    expect(created.statusCode, created.body).toBe(201);
    const staffClaim = created.json<BackofficeClaimView>();
    expect(staffClaim).toMatchObject({ cause: 'late_slip', status: 'open', version: 1, amount_minor: 12_000, opened_by: { type: 'backoffice', credential_id: expect.stringMatching(/^boc_/) } });
    const replay = await openClaim(noteOnly, reviewer);
    expect(replay.statusCode).toBe(200);
    expect(replay.json<BackofficeClaimView>().id).toBe(staffClaim.id);
    expect(await auditActions(staffClaim.id)).toEqual(['claim.opened']);
    const events = await claimEvents(owner.merchant_id, staffClaim.id);
    expect(events.map((event) => event.type)).toEqual(['claim.created']);
    expect((await app.backoffice({ url: `/v1/bo/claims?deposit_id=${order.id}`, token: operatorA })).json<{ data: unknown[] }>().data).toHaveLength(2);
  });

  it('an order that never had a destination (null window) takes a claim at once', async () => {
    const owner = await merchant();
    // 105.00 THB waits for liquidity; canceling it then closes it with no window.
    const created = await app.signed({
      method: 'POST',
      url: '/v1/pay/deposits',
      idempotency_key: crypto.randomUUID(),
      credentials: owner,
      body: { amount_minor: 10_500, currency: 'THB', merchant_reference: `null-window-${crypto.randomUUID()}`, end_user_ref: 'null-window', sender: { bank_code: '002', account_number: '5599887766', account_name_th: 'สมชาย ใจดี' } },
    });
    expect(created.statusCode, created.body).toBe(202);
    const id = created.json<{ id: string }>().id;
    const canceled = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: owner });
    expect(canceled.json()).toMatchObject({ status: 'canceled', late_slip_accepted_until: null });
    const opened = await openClaim({ deposit_id: id, cause: 'late_slip', evidence: { trans_ref: 'NULLWINDOW1' } });
    expect(opened.statusCode, opened.body).toBe(201);
  });
});

describe('POST /v1/bo/claims refusals', () => {
  it('inside the window: 409 late_slip_window_open at both doors; wrong status 409; another brand 404; bad input 422; nothing written', async () => {
    const { order } = await expiredOrder({ closeWindow: false });
    const before = await claimCount();

    const early = await openClaim({ deposit_id: order.id, cause: 'late_slip', evidence: { trans_ref: 'ABC123' } });
    expect(early.statusCode).toBe(409);
    expect(errorOf(early)).toMatchObject({
      code: 'late_slip_window_open',
      retryable: false,
      details: { deposit_id: order.id, status: 'expired', late_slip_accepted_until: new Date(Date.parse(order.expires_at) + 24 * HOUR_MS).toISOString() },
    });
    const atClaimUrl = await postToUploadUrl(app, order.slip_upload, JSON.stringify({ note: 'I paid on time' }), 'application/json', {
      upload_url: order.slip_upload.upload_url.replace(/\/slip$/, '/claims'),
    });
    expect(errorOf(atClaimUrl).code).toBe('late_slip_window_open');

    const wrongCause = await openClaim({ deposit_id: order.id, cause: 'additional_transfer', amount_minor: 5_000, evidence: { trans_ref: 'ABC123' } });
    expect(wrongCause.statusCode).toBe(409);
    expect(errorOf(wrongCause)).toMatchObject({ code: 'deposit_state_conflict', details: { status: 'expired' } });
    const open = await createDeposit(app, { amount_minor: 12_000 });
    const awaiting = await openClaim({ deposit_id: open.id, cause: 'late_slip', evidence: { trans_ref: 'ABC123' } });
    expect(errorOf(awaiting)).toMatchObject({ code: 'deposit_state_conflict', details: { status: 'awaiting_payment' } });

    const otherBrand = await openClaim({ deposit_id: order.id, cause: 'late_slip', evidence: { trans_ref: 'ABC123' } }, otherBrandOperator);
    expect(otherBrand.statusCode).toBe(404);
    expect(errorOf(await openClaim({ deposit_id: 'dep_01K0NOSUCHID0000000000000', cause: 'late_slip', evidence: { trans_ref: 'ABC123' } })).code).toBe('resource_not_found');

    for (const [body, fields] of [
      [{ deposit_id: order.id, cause: 'late_slip' }, [{ path: 'evidence', reason: 'required' }]],
      [{ deposit_id: order.id, cause: 'late_slip', evidence: {} }, [{ path: 'evidence.note', reason: 'required', hint: 'trans_ref or a note about the transfer' }]],
      [{ deposit_id: order.id, cause: 'same_transfer_excess', evidence: { note: 'x' } }, [{ path: 'cause', reason: 'not_allowed_value' }]],
      [{ deposit_id: order.id, cause: 'late_slip', amount_minor: 100.5, evidence: { note: 'x' } }, [{ path: 'amount_minor', reason: 'must_be_integer', hint: 'must_be_integer_minor_units' }]],
      [{ deposit_id: order.id, cause: 'late_slip', evidence: { note: 'x', trans_ref: 'not a ref!' } }, [{ path: 'evidence.trans_ref', reason: 'invalid_format' }]],
      [{ deposit_id: order.id, cause: 'late_slip', evidence: { note: 'x', occurred_at: '2026-08-01' } }, [{ path: 'evidence.occurred_at', reason: 'invalid_timestamp' }]],
      [{ deposit_id: order.id, cause: 'late_slip', evidence: { note: 'x', photo: 'base64' } }, [{ path: 'evidence.photo', reason: 'unknown_field' }]],
      [
        { deposit_id: order.id, cause: 'additional_transfer', evidence: { note: 'x' } },
        [
          { path: 'amount_minor', reason: 'required', hint: 'required for additional_transfer' },
          { path: 'evidence.trans_ref', reason: 'required', hint: 'required for additional_transfer' },
        ],
      ],
    ] as const) {
      const refused = await openClaim(body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(422);
      expect(errorOf(refused), JSON.stringify(body)).toMatchObject({ code: 'validation_error', details: { fields } });
    }
    // An integration key never reaches the back office; a platform administrator must name the brand.
    expect(errorOf(await openClaim({ deposit_id: order.id, cause: 'late_slip', evidence: { note: 'x' } }, app.sandbox.api_key)).code).toBe('scope_denied');
    const unnamed = await openClaim({ deposit_id: order.id, cause: 'late_slip', evidence: { note: 'x' } }, app.operator_token);
    expect(errorOf(unnamed)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'white_label_id', reason: 'required' }] } });
    expect(await claimCount()).toBe(before);
  });
});

describe('a transfer after settlement reported to staff', () => {
  it('opens a claim on the settled order without changing it; the same transfer again is the same claim', async () => {
    const { owner, order, settled } = await settledOrder();
    const body = { deposit_id: order.id, cause: 'additional_transfer', amount_minor: 5_000, evidence: { trans_ref: 'REPORTED0001', sending_bank_code: '004', note: 'second transfer, slip limit reached' } };
    const opened = await openClaim(body);
    expect(opened.statusCode, opened.body).toBe(201);
    const claim = opened.json<BackofficeClaimView>();
    expect(claim).toMatchObject({ cause: 'additional_transfer', status: 'open', amount_minor: 5_000, merchant_id: owner.merchant_id, livemode: false, opened_by: { type: 'backoffice' } });
    const replay = await openClaim({ ...body, evidence: { ...body.evidence, note: 'called again' } });
    expect(replay.statusCode).toBe(200);
    expect(replay.json<BackofficeClaimView>().id).toBe(claim.id);
    // A reported transfer is not a verified one: the order keeps its version, its overpayment and its events.
    const after = await getDeposit(app, order.id, owner);
    expect(after).toMatchObject({ version: settled.version, overpayment: null });
    expect((await eventsOfMerchant(app, owner.merchant_id)).map((event) => event.type)).not.toContain('deposit.overpaid');
    expect((await merchantClaim(claim.id, owner)).json()).toMatchObject({ id: claim.id, cause: 'additional_transfer', opened_by: 'backoffice' });
  });

  it('a transfer the bank already verified for the order answers with its claim', async () => {
    const { owner, order } = await settledOrder();
    const transfer = await sandboxTransfer(app, order, {}, owner);
    expect((await uploadMultipart(app, order.slip_upload, slipBytes(transfer))).statusCode).toBe(202);
    await runJobs(app);
    const flagged = await getDeposit(app, order.id, owner);
    expect(flagged.overpayment).toMatchObject({ cause: 'additional_transfer' });
    const reported = await openClaim({
      deposit_id: order.id,
      cause: 'additional_transfer',
      amount_minor: 12_000,
      evidence: { trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code },
    });
    expect(reported.statusCode, reported.body).toBe(200);
    expect(reported.json()).toMatchObject({ id: flagged.overpayment!.claim_id, opened_by: { type: 'system' } });
  });
});

describe('GET /v1/bo/claims', () => {
  it('filters by status, cause, deposit and mode, oldest first, pages with a cursor bound to its filters', async () => {
    const { order } = await expiredOrder({ closeWindow: true });
    const ids: string[] = [];
    for (const note of ['first account of the transfer', 'second account of the transfer', 'third account of the transfer']) {
      const opened = await openClaim({ deposit_id: order.id, cause: 'late_slip', evidence: { note } });
      expect(opened.statusCode, opened.body).toBe(201);
      ids.push(opened.json<BackofficeClaimView>().id);
      if (ids.length === 2) app.clock.advance(1_000);
    }
    expect(await decide(ids[1]!, 'reject', { note: NOTE })).toMatchObject({ statusCode: 200 });

    const page = (query: string, token = reviewer) => app.backoffice({ url: `/v1/bo/claims?${query}`, token });
    const first = await page(`deposit_id=${order.id}&limit=2`);
    expect(first.statusCode, first.body).toBe(200);
    const firstBody = first.json<{ data: BackofficeClaimView[]; has_more: boolean; next_cursor: string | null }>();
    expect(firstBody.data.map((claim) => claim.id)).toEqual(ids.slice(0, 2));
    expect(firstBody.has_more).toBe(true);
    const second = (await page(`deposit_id=${order.id}&limit=2&cursor=${firstBody.next_cursor}`)).json<{ data: BackofficeClaimView[]; has_more: boolean; next_cursor: string | null }>();
    expect(second).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.data.map((claim) => claim.id)).toEqual([ids[2]]);

    expect((await page(`deposit_id=${order.id}&status=rejected`)).json<{ data: BackofficeClaimView[] }>().data.map((claim) => claim.id)).toEqual([ids[1]]);
    expect((await page(`deposit_id=${order.id}&status=open&cause=late_slip`)).json<{ data: BackofficeClaimView[] }>().data.map((claim) => claim.id)).toEqual([ids[0], ids[2]]);
    expect((await page(`deposit_id=${order.id}&cause=additional_transfer`)).json<{ data: unknown[] }>().data).toEqual([]);
    expect((await page(`deposit_id=${order.id}&mode=live`)).json<{ data: unknown[] }>().data).toEqual([]);

    // The whole brand, oldest first, in pages that add up to the unpaged list.
    const everything = (await page('limit=100')).json<{ data: BackofficeClaimView[] }>().data;
    expect(everything.map((claim) => `${claim.created_at} ${claim.id}`)).toEqual(everything.map((claim) => `${claim.created_at} ${claim.id}`).sort());
    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const answer: { data: BackofficeClaimView[]; next_cursor: string | null } = (await page(`limit=3${cursor ? `&cursor=${cursor}` : ''}`)).json();
      paged.push(...answer.data.map((claim) => claim.id));
      cursor = answer.next_cursor;
    } while (cursor !== null);
    expect(paged).toEqual(everything.map((claim) => claim.id));
    // Another brand's list holds none of them.
    expect((await page('limit=100', otherBrandOperator)).json<{ data: unknown[] }>().data).toEqual([]);

    const mismatch = await page(`deposit_id=${order.id}&status=open&limit=2&cursor=${firstBody.next_cursor}`);
    expect(mismatch.statusCode).toBe(400);
    expect(errorOf(mismatch).code).toBe('cursor_filter_mismatch');
    const damaged = await page(`deposit_id=${order.id}&cursor=not-a-cursor`);
    expect(errorOf(damaged)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'cursor', reason: 'invalid_cursor' }] } });
    expect(errorOf(await page('status=closed'))).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'status', reason: 'not_allowed_value' }] } });
    expect(errorOf(await page('limit=0'))).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'limit', reason: 'out_of_range' }] } });
    // The platform administrator names the brand it reads.
    expect(errorOf(await page('limit=1', app.operator_token)).code).toBe('validation_error');
    expect((await page(`white_label_id=${app.sandbox.white_label_id}&deposit_id=${order.id}`, app.operator_token)).json<{ data: unknown[] }>().data).toHaveLength(3);
  });
});
