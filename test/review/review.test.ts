import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, depositPolicyBody, eventTypesOf, eventsOfMerchant, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadJson, uploadMultipart, type CreatedDeposit, withdrawalOf } from '../support/slips.ts';
import { forgetBankList } from '../../src/banks/service.ts';
import { REJECTION_CODES, REVERSAL_REASON_CODES } from '../../src/review/catalogue.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { ReviewDetail } from '../../src/review/service.ts';
import { ReviewPace } from '../../src/review/pace.ts';

/**
 * The review desk through the doors its users use (issue 11): a merchant's real sandbox order reaches
 * review through a slip upload and the job worker; reviewers work the queue over the back-office API
 * (their own credentials, roles and brand); the merchant attaches evidence and asks for force-complete
 * over signed HTTP; an operator reverses a settled order. Money is checked on the wallet and on the
 * withdrawal the order pays.
 */

let app: TestApp;
let counter = 0;
let reviewerA: string;
let reviewerB: string;
let operator: string;
let otherBrandReviewer: string;

const system = { actor_type: 'system' as const, actor_id: 'review-test', request_id: null };

beforeAll(async () => {
  app = await createTestApp();
  const tenancy = app.instance.services.tenancy;
  const brand = app.sandbox.white_label_id;
  reviewerA = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer A' })).token;
  reviewerB = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer B' })).token;
  operator = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Operator' })).token;
  const other = await app.createMerchant();
  otherBrandReviewer = (await tenancy.createBackofficeCredential(system, { white_label_id: other.white_label_id, role: 'reviewer', name: 'Other brand' })).token;
});
afterAll(async () => {
  await app.close();
});

function declaredSender() {
  counter += 1;
  return { bank_code: '004', account_number: `81${String(counter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
}

async function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

type Order = CreatedDeposit & { owner: MerchantCredentials; declared: ReturnType<typeof declaredSender>; image: Buffer };

/** A real order in review: its slip shows another sender name (SENDER_NAME_MISMATCH), optionally short. */
async function orderInReview(options: { amount_minor?: number; paid_minor?: number; owner?: MerchantCredentials } = {}): Promise<Order> {
  const owner = options.owner ?? (await merchant());
  const declared = declaredSender();
  const order = await createDeposit(app, { amount_minor: options.amount_minor ?? 10_000, credentials: owner, sender: declared });
  const sender = { ...declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' };
  const transfer = await sandboxTransfer(app, order, { sender, ...(options.paid_minor === undefined ? {} : { amount_minor: options.paid_minor }) }, owner);
  const image = slipBytes(transfer);
  const response = await uploadMultipart(app, order.slip_upload, image);
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  const reviewed = await getDeposit(app, order.id, owner);
  expect(reviewed.status).toBe('under_review');
  return { ...order, owner, declared, image };
}

function decide(token: string, deposit_id: string, action: 'approve' | 'reject' | 'escalate', body: Record<string, unknown> = {}, idempotency_key?: string) {
  return app.instance.app.inject({
    method: 'POST',
    url: `/v1/bo/reviews/${deposit_id}/${action}`,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(idempotency_key ? { 'idempotency-key': idempotency_key } : {}) },
    payload: JSON.stringify(body),
  });
}

async function detailOf(deposit_id: string, token = reviewerA): Promise<ReviewDetail> {
  const response = await app.backoffice({ url: `/v1/bo/reviews/${deposit_id}`, token });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<ReviewDetail>();
}

async function balanceOf(credentials: MerchantCredentials) {
  return (await app.signed({ url: '/v1/pay/balance', credentials })).json<{ available_minor: number; pending_clearing_minor: number; reserved_minor: number }>();
}

async function auditActions(deposit_id: string): Promise<string[]> {
  const { rows } = await app.testDatabase.database.query<{ action: string }>('SELECT action FROM audit_log WHERE target_id = $1 ORDER BY created_at, audit_id', [deposit_id]);
  return rows.map((row) => row.action);
}

async function decisionCount(deposit_id: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*) AS count FROM review_decisions WHERE deposit_id = $1', [deposit_id]);
  return Number(rows[0]?.count);
}

const NOTE = 'ตรวจสอบสลิปกับธนาคารแล้ว ชื่อผู้โอนเป็นคู่สมรสของผู้ใช้';

describe('the queue and one order', () => {
  it('lists the brand’s orders in review oldest first, filtered by reason and escalation, paged by cursor', async () => {
    const first = await orderInReview();
    app.clock.advance(1000);
    const second = await orderInReview();
    app.clock.advance(1000);
    // A reference-only slip: NO_SLIP_IMAGE.
    const owner = await merchant();
    const third = await createDeposit(app, { amount_minor: 10_000, credentials: owner, sender: declaredSender() });
    const transfer = await sandboxTransfer(app, third, {}, owner);
    expect((await uploadJson(app, third.slip_upload, { trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, occurred_at: transfer.occurred_at })).statusCode).toBe(202);
    await runJobs(app);

    const all = await app.backoffice({ url: '/v1/bo/reviews?limit=100', token: reviewerA });
    expect(all.statusCode, all.body).toBe(200);
    const ids = all.json<{ data: { deposit_id: string; opened_at: string }[] }>().data.map((item) => item.deposit_id);
    expect(ids.indexOf(first.id)).toBeLessThan(ids.indexOf(second.id));
    expect(ids.indexOf(second.id)).toBeLessThan(ids.indexOf(third.id));
    const openedAt = all.json<{ data: { opened_at: string }[] }>().data.map((item) => item.opened_at);
    expect([...openedAt].sort()).toEqual(openedAt);

    const byReason = await app.backoffice({ url: '/v1/bo/reviews?reason=NO_SLIP_IMAGE&limit=100', token: reviewerA });
    const reasonIds = byReason.json<{ data: { deposit_id: string; reasons: string[] }[] }>().data;
    expect(reasonIds.map((item) => item.deposit_id)).toContain(third.id);
    expect(reasonIds.map((item) => item.deposit_id)).not.toContain(first.id);
    expect(reasonIds.every((item) => item.reasons.includes('NO_SLIP_IMAGE'))).toBe(true);

    expect((await decide(reviewerA, second.id, 'escalate', { note: NOTE })).statusCode).toBe(200);
    const escalated = await app.backoffice({ url: '/v1/bo/reviews?escalated=true&limit=100', token: reviewerA });
    expect(escalated.json<{ data: { deposit_id: string }[] }>().data.map((item) => item.deposit_id)).toEqual([second.id]);

    // Paging: one at a time walks the same order; a changed filter mid-cursor is refused.
    const walked: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 50; page += 1) {
      const response = await app.backoffice({ url: `/v1/bo/reviews?limit=1${cursor ? `&cursor=${cursor}` : ''}`, token: reviewerA });
      const body = response.json<{ data: { deposit_id: string }[]; next_cursor: string | null }>();
      walked.push(...body.data.map((item) => item.deposit_id));
      cursor = body.next_cursor;
      if (!cursor) break;
    }
    expect(walked).toEqual(ids);
    const first_page = (await app.backoffice({ url: '/v1/bo/reviews?limit=1', token: reviewerA })).json<{ next_cursor: string }>();
    expect(errorOf(await app.backoffice({ url: `/v1/bo/reviews?limit=1&escalated=true&cursor=${first_page.next_cursor}`, token: reviewerA })).code).toBe('cursor_filter_mismatch');

    // Another brand's reviewer sees its own (empty) queue and none of these orders.
    const foreign = await app.backoffice({ url: '/v1/bo/reviews', token: otherBrandReviewer });
    expect(foreign.json<{ data: unknown[] }>().data).toEqual([]);
    expect(errorOf(await app.backoffice({ url: `/v1/bo/reviews/${first.id}`, token: otherBrandReviewer }))).toMatchObject({ code: 'resource_not_found' });
  });

  it('one order: the slip image behind back-office credentials, the bank transfer masked, booleans, evidence, history', async () => {
    const order = await orderInReview();
    const detail = await detailOf(order.id);
    expect(detail).toMatchObject({
      deposit_id: order.id,
      merchant_id: order.owner.merchant_id,
      deposit: { status: 'under_review', verification: { sender_name_match: false, amount_exact: true } },
      bank_verified_amount_minor: 10_000,
      approvals_required: 1,
      approvals: [],
      decisions: [],
    });
    const [slip] = detail.slips;
    expect(slip).toMatchObject({ shape: 'multipart', media_type: 'image/png', outcome: 'under_review', bank_transfer: { amount_minor: 10_000 } });
    // The bank prints the sender's name as banks do (surname truncated): the reviewer compares it whole.
    expect(slip?.bank_transfer?.sender.name_th).toMatch(/^วิภาวรรณ ศ/);
    // No full account number anywhere in the reviewer's answer.
    expect(JSON.stringify(detail)).not.toContain(order.declared.account_number);
    // Masked to its last four characters (which the bank may have masked already).
    expect(slip?.bank_transfer?.sender.account_number_masked).toMatch(/^x+[0-9xX*•]{4}$/);

    // The image link is served, to back-office credentials of the brand only.
    const link = new URL(slip?.image_url ?? '');
    const image = await app.instance.app.inject({ method: 'GET', url: `${link.pathname}${link.search}`, headers: { authorization: `Bearer ${reviewerB}` } });
    expect(image.statusCode).toBe(200);
    expect(image.headers['content-type']).toBe('image/png');
    expect(image.headers['cache-control']).toBe('private, no-store');
    expect(Buffer.compare(image.rawPayload, order.image)).toBe(0);
    const foreign = await app.instance.app.inject({ method: 'GET', url: link.pathname, headers: { authorization: `Bearer ${otherBrandReviewer}` } });
    expect(foreign.statusCode).toBe(404);
    const anonymous = await app.instance.app.inject({ method: 'GET', url: link.pathname });
    expect(anonymous.statusCode).toBe(401);
  });

  it('estimated_resolution_bucket follows the queue ahead of the order', async () => {
    const ahead = async () => (await app.backoffice({ url: '/v1/bo/reviews?mode=test&limit=100', token: reviewerA })).json<{ data: unknown[] }>().data.length;
    const before = await ahead();
    const order = await orderInReview();
    // The desk has ended no review yet in this file's first run of this test, so its pace is the assumed 4 an hour.
    const { rows } = await app.testDatabase.database.query<{ count: string }>(
      "SELECT count(*) AS count FROM review_decisions WHERE effect IN ('settled', 'rejected') AND created_at >= $1",
      [new Date(app.clock.now().getTime() - 4 * 3600_000)],
    );
    const perHour = Math.max(Number(rows[0]?.count) / 4, 4);
    const minutes = ((before + 1) * 60) / perHour;
    const expected = minutes <= 15 ? 'under_15m' : minutes <= 60 ? 'under_1h' : minutes <= 240 ? 'under_4h' : 'extended';
    const reviewed = await getDeposit(app, order.id, order.owner);
    expect(reviewed.review?.estimated_resolution_bucket).toBe(expected);
    expect(before).toBeGreaterThan(0);
    expect(expected).not.toBe('under_15m');
  });

  it('counts the queue ahead only as far as the longest bucket reaches', async () => {
    const pace = new ReviewPace(app.clock);
    const asked: number[] = [];
    const estimate = (backlog: number, four_eyes_required = false) =>
      pace.estimate(app.testDatabase.database, {
        // A brand with no ended review: the assumed pace of 4 an hour, 15 minutes a review (30 with four eyes).
        white_label_id: 'wl_without_reviews',
        livemode: false,
        four_eyes_required,
        escalated: false,
        count_in_review_up_to: async (up_to) => {
          asked.push(up_to);
          return Math.min(backlog, up_to);
        },
      });
    expect(await estimate(0)).toBe('under_15m');
    expect(await estimate(3)).toBe('under_1h');
    expect(await estimate(15)).toBe('under_4h');
    expect(await estimate(16)).toBe('extended');
    expect(await estimate(100_000)).toBe('extended');
    expect(await estimate(7, true)).toBe('under_4h');
    expect(await estimate(8, true)).toBe('extended');
    // 16 reviews ahead already make `extended`: no count goes past 17, however long the queue.
    expect(Math.max(...asked)).toBe(17);
  });
});

describe('decisions', () => {
  it('approve: settled via review, exactly the money path of automatic settlement; audited; a repeat replays', async () => {
    const order = await orderInReview();
    const withdrawalBefore = await withdrawalOf(app, order);
    const approved = await decide(reviewerA, order.id, 'approve', { note: NOTE });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json()).toMatchObject({ object: 'review_decision', effect: 'settled', replayed: false, review: { deposit: { status: 'settled' } } });
    const settled = await getDeposit(app, order.id, order.owner);
    expect(settled).toMatchObject({ status: 'settled', settled_via: 'review', partial: false, transferred_amount_minor: 10_000, amount_received_minor: 10_000 });
    expect(await balanceOf(order.owner)).toMatchObject({ pending_clearing_minor: settled.credited_amount_minor });
    expect(await withdrawalOf(app, order)).toMatchObject({ leg_status: 'filled', filled_minor: withdrawalBefore.filled_minor + 10_000 });
    expect((await eventTypesOf(app, order.id)).slice(-1)).toEqual(['deposit.settled']);
    expect(await auditActions(order.id)).toEqual(['review.approved']);
    // The reviewer's note never reaches the merchant.
    const events = JSON.stringify(await eventsOfMerchant(app, order.owner.merchant_id));
    expect(events).not.toContain(NOTE);

    const again = await decide(reviewerA, order.id, 'approve', { note: NOTE });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ effect: 'settled', replayed: true });
    expect(errorOf(await decide(reviewerB, order.id, 'approve'))).toMatchObject({ code: 'review_already_decided', details: { status: 'settled' } });
    expect(errorOf(await decide(reviewerA, order.id, 'reject', { rejection_code: 'SLIP_NOT_GENUINE', note: NOTE }))).toMatchObject({ code: 'review_already_decided' });
    expect(await decisionCount(order.id)).toBe(1);
  });

  it('four eyes: the first approval changes nothing, the same reviewer twice is refused, a second reviewer settles', async () => {
    const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', token: operator, body: depositPolicyBody({ four_eyes_min_amount_minor: 20_000 }) });
    expect(policy.statusCode, policy.body).toBe(200);
    try {
      const order = await orderInReview({ amount_minor: 20_000 });
      const before = await getDeposit(app, order.id, order.owner);
      expect(before.review).toMatchObject({ four_eyes_required: true });
      const first = await decide(reviewerA, order.id, 'approve');
      expect(first.statusCode, first.body).toBe(200);
      expect(first.json()).toMatchObject({ effect: 'approval_recorded', review: { approvals_required: 2, approvals: [{ amount_source: 'bank', verified_amount_minor: 20_000 }] } });
      const unchanged = await getDeposit(app, order.id, order.owner);
      expect(unchanged).toMatchObject({ status: 'under_review', version: before.version });
      expect(await balanceOf(order.owner)).toMatchObject({ pending_clearing_minor: 0 });

      expect(errorOf(await decide(reviewerA, order.id, 'approve'))).toMatchObject({ code: 'four_eyes_same_reviewer' });
      const second = await decide(reviewerB, order.id, 'approve');
      expect(second.statusCode, second.body).toBe(200);
      expect(second.json()).toMatchObject({ effect: 'settled' });
      expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'settled', settled_via: 'review' });
      expect(await auditActions(order.id)).toEqual(['review.approval_recorded', 'review.approved']);
    } finally {
      await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', token: operator, body: depositPolicyBody({}) });
    }
  });

  it('reject: a note of 20 characters or more, the catalogue texts to the merchant, legs released; the note stays internal', async () => {
    const order = await orderInReview();
    const before = await getDeposit(app, order.id, order.owner);
    expect(errorOf(await decide(reviewerA, order.id, 'reject', { rejection_code: 'SLIP_NOT_GENUINE', note: 'too short' }))).toMatchObject({ code: 'review_note_required' });
    expect(errorOf(await decide(reviewerA, order.id, 'reject', { rejection_code: 'NOT_A_CODE', note: NOTE }))).toMatchObject({ code: 'validation_error' });
    expect(errorOf(await decide(reviewerA, order.id, 'reject', { note: NOTE }))).toMatchObject({ code: 'validation_error' });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'under_review', version: before.version });
    expect(await decisionCount(order.id)).toBe(0);

    const rejected = await decide(reviewerA, order.id, 'reject', { rejection_code: 'SENDER_NOT_ACCOUNT_HOLDER', note: NOTE });
    expect(rejected.statusCode, rejected.body).toBe(200);
    const view = await getDeposit(app, order.id, order.owner);
    expect(view).toMatchObject({ status: 'rejected', is_terminal: true, rejection: { code: 'SENDER_NOT_ACCOUNT_HOLDER', display_th: expect.any(String), display_en: expect.any(String) } });
    expect(JSON.stringify(view)).not.toContain(NOTE);
    expect(JSON.stringify(await eventsOfMerchant(app, order.owner.merchant_id))).not.toContain(NOTE);
    expect((await eventTypesOf(app, order.id)).slice(-1)).toEqual(['deposit.rejected']);
    expect(await withdrawalOf(app, order)).toMatchObject({ leg_status: 'released' });
    expect(await balanceOf(order.owner)).toMatchObject({ pending_clearing_minor: 0, available_minor: 0 });
    expect(REJECTION_CODES).toContain('SENDER_NOT_ACCOUNT_HOLDER');
    // The same rejection repeated by the same reviewer replays; anything else is refused.
    expect((await decide(reviewerA, order.id, 'reject', { rejection_code: 'SENDER_NOT_ACCOUNT_HOLDER', note: NOTE })).json()).toMatchObject({ replayed: true });
    expect(errorOf(await decide(reviewerB, order.id, 'approve'))).toMatchObject({ code: 'review_already_decided', details: { status: 'rejected' } });
  });

  it('escalate: version moves, status and money do not; escalating again changes nothing', async () => {
    const order = await orderInReview();
    const before = await getDeposit(app, order.id, order.owner);
    expect(errorOf(await decide(reviewerA, order.id, 'escalate', {}))).toMatchObject({ code: 'validation_error' });
    const escalated = await decide(reviewerA, order.id, 'escalate', { note: NOTE });
    expect(escalated.statusCode, escalated.body).toBe(200);
    const after = await getDeposit(app, order.id, order.owner);
    expect(after).toMatchObject({ status: 'under_review', version: before.version + 1, review: { escalated: true, estimated_resolution_bucket: 'extended', opened_at: before.review?.opened_at } });
    expect((await eventTypesOf(app, order.id)).slice(-1)).toEqual(['deposit.review_updated']);
    expect(await balanceOf(order.owner)).toMatchObject({ pending_clearing_minor: 0 });
    const again = await decide(reviewerB, order.id, 'escalate', { note: NOTE });
    expect(again.json()).toMatchObject({ replayed: true, decision_id: escalated.json<{ decision_id: string }>().decision_id });
    expect((await getDeposit(app, order.id, order.owner)).version).toBe(after.version);
  });

  it('two reviewers deciding at once: one wins, the other gets review_already_decided; one settlement', async () => {
    const order = await orderInReview();
    const answers = await Promise.all([decide(reviewerA, order.id, 'approve'), decide(reviewerB, order.id, 'reject', { rejection_code: 'SLIP_NOT_GENUINE', note: NOTE })]);
    const statuses = answers.map((answer) => answer.statusCode).sort();
    expect(statuses).toEqual([200, 409]);
    const loser = answers.find((answer) => answer.statusCode === 409);
    expect(loser && errorOf(loser).code).toBe('review_already_decided');
    const types = await eventTypesOf(app, order.id);
    expect(types.filter((type) => type === 'deposit.settled' || type === 'deposit.rejected')).toHaveLength(1);
    expect(await decisionCount(order.id)).toBe(1);
  });

  it('Idempotency-Key: a retried decision replays; the key on another order is idempotency_key_reused', async () => {
    const order = await orderInReview();
    const other = await orderInReview();
    const key = crypto.randomUUID();
    const first = await decide(reviewerA, order.id, 'escalate', { note: NOTE }, key);
    const retried = await decide(reviewerA, order.id, 'escalate', { note: NOTE }, key);
    expect(first.statusCode).toBe(200);
    expect(retried.json()).toMatchObject({ replayed: true, decision_id: first.json<{ decision_id: string }>().decision_id });
    expect(errorOf(await decide(reviewerA, other.id, 'escalate', { note: NOTE }, key))).toMatchObject({ code: 'idempotency_key_reused' });
    expect((await getDeposit(app, other.id, other.owner)).review?.escalated).toBe(false);
  });

  it('roles and tenancy: an operator may read but not decide, another brand gets 404, an order not in review 409', async () => {
    const order = await orderInReview();
    expect(errorOf(await decide(operator, order.id, 'approve'))).toMatchObject({ code: 'scope_denied' });
    expect((await app.backoffice({ url: `/v1/bo/reviews/${order.id}`, token: operator })).statusCode).toBe(200);
    expect(errorOf(await decide(otherBrandReviewer, order.id, 'approve'))).toMatchObject({ code: 'resource_not_found' });
    expect(errorOf(await decide(reviewerA, 'dep_01K0NOSUCHORDER0000000000', 'approve'))).toMatchObject({ code: 'resource_not_found' });
    const awaiting = await createDeposit(app, { amount_minor: 10_000, credentials: order.owner, sender: declaredSender() });
    expect(errorOf(await decide(reviewerA, awaiting.id, 'approve', { verified_amount_minor: 10_000 }))).toMatchObject({ code: 'review_already_decided', details: { status: 'awaiting_payment' } });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'under_review' });
  });

  it('no bank-verified transfer (BANK_DISABLED): the reviewer enters V, and two reviewers must agree on it', async () => {
    const owner = await merchant();
    const order = await createDeposit(app, { amount_minor: 10_000, credentials: owner, sender: { bank_code: '011', account_number: '7700000009', account_name_th: 'ธนพล วงศ์สวัสดิ์', account_name_en: 'Thanaphon Wongsawat' } });
    const transfer = await sandboxTransfer(app, order, { amount_minor: 9_500 }, owner);
    await app.testDatabase.database.query("UPDATE banks SET available = false, message_th = 'ปิดปรับปรุง' WHERE bank_code = '011'");
    forgetBankList();
    try {
      expect((await uploadMultipart(app, order.slip_upload, slipBytes(transfer))).statusCode).toBe(202);
      await runJobs(app);
    } finally {
      await app.testDatabase.database.query("UPDATE banks SET available = true, message_th = NULL WHERE bank_code = '011'");
      forgetBankList();
    }
    expect((await getDeposit(app, order.id, owner)).review?.reasons[0]?.code).toBe('BANK_DISABLED');
    expect((await detailOf(order.id)).bank_verified_amount_minor).toBe(0);
    expect(errorOf(await decide(reviewerA, order.id, 'approve'))).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'verified_amount_minor', reason: 'required' }] } });
    expect((await decide(reviewerA, order.id, 'approve', { verified_amount_minor: 9_500 })).json()).toMatchObject({ effect: 'approval_recorded' });
    expect(errorOf(await decide(reviewerB, order.id, 'approve', { verified_amount_minor: 9_000 }))).toMatchObject({
      code: 'validation_error',
      details: { fields: [{ path: 'verified_amount_minor', reason: 'differs_from_first_approval' }] },
    });
    expect((await decide(reviewerB, order.id, 'approve', { verified_amount_minor: 9_500 })).json()).toMatchObject({ effect: 'settled' });
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'settled', settled_via: 'review', partial: true, transferred_amount_minor: 9_500, amount_received_minor: 9_500 });
  });

  it('a slip for a canceled order (CANCELED_ORDER_SLIP) approved: the released leg is reserved again and filled', async () => {
    const owner = await merchant();
    const order = await createDeposit(app, { amount_minor: 10_000, credentials: owner, sender: declaredSender() });
    const transfer = await sandboxTransfer(app, order, {}, owner);
    const canceled = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${order.id}/cancel`, credentials: owner, idempotency_key: crypto.randomUUID() });
    expect(canceled.statusCode, canceled.body).toBe(200);
    expect(await withdrawalOf(app, order)).toMatchObject({ leg_status: 'released' });
    expect((await uploadMultipart(app, order.slip_upload, slipBytes(transfer))).statusCode).toBe(202);
    await runJobs(app);
    expect((await getDeposit(app, order.id, owner)).review?.reasons[0]?.code).toBe('CANCELED_ORDER_SLIP');
    const approved = await decide(reviewerB, order.id, 'approve');
    expect(approved.statusCode, approved.body).toBe(200);
    expect(await getDeposit(app, order.id, owner)).toMatchObject({ status: 'settled', settled_via: 'review', amount_received_minor: 10_000 });
    const { rows } = await app.testDatabase.database.query<{ status: string }>(
      `SELECT l.status FROM deposit_legs d JOIN withdrawal_legs l ON l.white_label_id = d.white_label_id AND l.leg_ref = d.withdrawal_leg_ref WHERE d.deposit_id = $1`,
      [order.id],
    );
    expect(rows.map((row) => row.status)).toEqual(['filled']);
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: (await getDeposit(app, order.id, owner)).credited_amount_minor });
  });

  it('a bank-verified V cannot be overridden by the reviewer', async () => {
    const order = await orderInReview();
    expect(errorOf(await decide(reviewerA, order.id, 'approve', { verified_amount_minor: 12_000 }))).toMatchObject({
      code: 'validation_error',
      details: { fields: [{ path: 'verified_amount_minor', reason: 'differs_from_verified_transfers' }] },
    });
    expect((await getDeposit(app, order.id, order.owner)).status).toBe('under_review');
  });
});

function merchantPost(credentials: MerchantCredentials, url: string, body: unknown, idempotency_key = crypto.randomUUID()) {
  return app.signed({ method: 'POST', url, body, credentials, idempotency_key });
}

describe('merchant evidence', () => {
  it('attached while in review: 202 with the order, status, version and review clock unchanged; the reviewer reads it', async () => {
    const order = await orderInReview();
    const before = await getDeposit(app, order.id, order.owner);
    const body = { kind: 'bank_statement_line', reference: 'stmt-2026-11-23-0042', note: 'ลูกค้าโอนจากบัญชีคู่สมรส' };
    const key = crypto.randomUUID();
    const attached = await merchantPost(order.owner, `/v1/pay/deposits/${order.id}/evidence`, body, key);
    expect(attached.statusCode, attached.body).toBe(202);
    expect(attached.json<DepositView>()).toMatchObject({ id: order.id, status: 'under_review', version: before.version, review: before.review });
    const replay = await merchantPost(order.owner, `/v1/pay/deposits/${order.id}/evidence`, body, key);
    expect(replay.statusCode).toBe(202);
    expect((await detailOf(order.id)).evidence).toEqual([expect.objectContaining({ kind: 'bank_statement_line', reference: 'stmt-2026-11-23-0042' })]);
    expect(await eventTypesOf(app, order.id)).not.toContain('deposit.review_updated');
  });

  it('bad input changes nothing: URL references, unknown kinds, another merchant’s order, an order not in review', async () => {
    const order = await orderInReview();
    const url = `/v1/pay/deposits/${order.id}/evidence`;
    const cases: [unknown, string][] = [
      [{ kind: 'other', reference: 'https://files.example/evidence.pdf', note: 'x' }, 'reference'],
      [{ kind: 'photo', reference: 'ref-1', note: 'x' }, 'kind'],
      [{ kind: 'other', reference: 'ref-1' }, 'note'],
      [{ kind: 'other', reference: 'ref-1', note: 'x', file: 'aGVsbG8=' }, ''],
    ];
    for (const [body, path] of cases) {
      const error = errorOf(await merchantPost(order.owner, url, body));
      expect(error.code).toBe('validation_error');
      if (path) expect(JSON.stringify(error.details)).toContain(path);
    }
    expect((await detailOf(order.id)).evidence).toEqual([]);
    const stranger = await merchant();
    expect(errorOf(await merchantPost(stranger, url, { kind: 'other', reference: 'ref-1', note: 'x' }))).toMatchObject({ code: 'resource_not_found' });
    const awaiting = await createDeposit(app, { amount_minor: 10_000, credentials: order.owner, sender: declaredSender() });
    expect(errorOf(await merchantPost(order.owner, `/v1/pay/deposits/${awaiting.id}/evidence`, { kind: 'other', reference: 'ref-1', note: 'x' }))).toMatchObject({
      code: 'deposit_not_reviewable',
    });
    const multipart = await app.signed({ method: 'POST', url, body: '--x\r\n', credentials: order.owner, idempotency_key: crypto.randomUUID(), headers: { 'content-type': 'multipart/form-data; boundary=x' } });
    expect(errorOf(multipart).code).toBe('unsupported_media_type');
  });

  it('at most 20 evidence items per order (evidence_limit_reached)', async () => {
    const order = await orderInReview();
    for (let index = 0; index < 20; index += 1) {
      expect((await merchantPost(order.owner, `/v1/pay/deposits/${order.id}/evidence`, { kind: 'other', reference: `ref-${index}`, note: 'n' })).statusCode).toBe(202);
    }
    expect(errorOf(await merchantPost(order.owner, `/v1/pay/deposits/${order.id}/evidence`, { kind: 'other', reference: 'ref-21', note: 'n' }))).toMatchObject({ code: 'evidence_limit_reached' });
  });
});

describe('force-complete', () => {
  const NOTE_TH = 'ลูกค้ายืนยันว่าโอนขาดไปห้าร้อยบาท ขอรับยอดตามจริง';

  it('a short-pay in review for another reason: 202 under_review, and the approval fills by V and returns X − V', async () => {
    const order = await orderInReview({ amount_minor: 10_000, paid_minor: 9_500 });
    const reviewed = await getDeposit(app, order.id, order.owner);
    expect(reviewed.review?.reasons.map((reason) => reason.code)).toEqual(expect.arrayContaining(['SENDER_NAME_MISMATCH', 'AMOUNT_MISMATCH']));
    const url = `/v1/pay/deposits/${order.id}/force-complete`;
    expect(errorOf(await merchantPost(order.owner, url, { verified_amount_minor: 10_000, note: NOTE_TH }))).toMatchObject({
      code: 'validation_error',
      details: { fields: [{ path: 'verified_amount_minor', reason: 'must_be_less_than_amount' }] },
    });
    expect(errorOf(await merchantPost(order.owner, url, { verified_amount_minor: 9_500, note: 'สั้นไป' }))).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'note' }] } });
    expect(errorOf(await merchantPost(order.owner, url, { verified_amount_minor: 95.5, note: NOTE_TH }))).toMatchObject({ code: 'validation_error' });

    const requested = await merchantPost(order.owner, url, { verified_amount_minor: 9_400, note: NOTE_TH });
    expect(requested.statusCode, requested.body).toBe(202);
    expect(requested.json<DepositView>()).toMatchObject({ status: 'under_review', review: reviewed.review, version: reviewed.version });
    expect((await detailOf(order.id)).force_complete_requests).toEqual([expect.objectContaining({ claimed_verified_amount_minor: 9_400, derived_verified_amount_minor: 9_500 })]);

    const withdrawalBefore = await withdrawalOf(app, order);
    expect((await decide(reviewerA, order.id, 'approve')).json()).toMatchObject({ effect: 'settled' });
    const settled = await getDeposit(app, order.id, order.owner);
    expect(settled).toMatchObject({ status: 'settled', settled_via: 'review', partial: true, ordered_amount_minor: 10_000, transferred_amount_minor: 9_500, amount_received_minor: 9_500 });
    const withdrawalAfter = await withdrawalOf(app, order);
    expect(withdrawalAfter.filled_minor - withdrawalBefore.filled_minor).toBe(9_500);
    expect(withdrawalAfter.remaining_minor - withdrawalBefore.remaining_minor).toBe(500);
    expect(withdrawalAfter.reserved_minor - withdrawalBefore.reserved_minor).toBe(-10_000);
  });

  it('409 deposit_not_reviewable: a clean short-pay that settled automatically, a full payment in review, another merchant 404', async () => {
    const owner = await merchant();
    const clean = await createDeposit(app, { amount_minor: 10_000, credentials: owner, sender: declaredSender() });
    expect((await uploadMultipart(app, clean.slip_upload, slipBytes(await sandboxTransfer(app, clean, { amount_minor: 9_000 }, owner)))).statusCode).toBe(202);
    await runJobs(app);
    expect(await getDeposit(app, clean.id, owner)).toMatchObject({ status: 'settled', partial: true, settled_via: 'auto' });
    expect(errorOf(await merchantPost(owner, `/v1/pay/deposits/${clean.id}/force-complete`, { verified_amount_minor: 9_000, note: NOTE_TH }))).toMatchObject({
      code: 'deposit_not_reviewable',
      details: { status: 'settled' },
    });
    const full = await orderInReview({ owner });
    expect(errorOf(await merchantPost(owner, `/v1/pay/deposits/${full.id}/force-complete`, { verified_amount_minor: 9_000, note: NOTE_TH }))).toMatchObject({
      code: 'deposit_not_reviewable',
      details: { reason: 'not_a_short_payment' },
    });
    expect((await detailOf(full.id)).force_complete_requests).toEqual([]);
    const stranger = await merchant();
    expect(errorOf(await merchantPost(stranger, `/v1/pay/deposits/${full.id}/force-complete`, { verified_amount_minor: 9_000, note: NOTE_TH }))).toMatchObject({ code: 'resource_not_found' });
  });
});

describe('reversal by an operator', () => {
  function reverse(token: string, deposit_id: string, body: Record<string, unknown>) {
    return app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${deposit_id}/reverse`, token, body });
  }

  async function settledOrder() {
    const owner = await merchant();
    const order = await createDeposit(app, { amount_minor: 10_000, credentials: owner, sender: declaredSender() });
    expect((await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, owner)))).statusCode).toBe(202);
    await runJobs(app);
    const settled = await getDeposit(app, order.id, owner);
    expect(settled.status).toBe('settled');
    return { order, owner, settled };
  }

  it('inside 72 h: from pending clearing, the fill reversed on the withdrawal, audited; a repeat replays', async () => {
    const { order, owner, settled } = await settledOrder();
    const withdrawalBefore = await withdrawalOf(app, order);
    expect(errorOf(await reverse(reviewerA, order.id, { reason_code: 'BANK_RECALL', note: NOTE }))).toMatchObject({ code: 'scope_denied' });
    expect(errorOf(await reverse(operator, order.id, { reason_code: 'BANK_ERROR', note: NOTE }))).toMatchObject({ code: 'validation_error' });
    expect(errorOf(await reverse(operator, order.id, { reason_code: 'BANK_RECALL', note: 'short' }))).toMatchObject({ code: 'review_note_required' });
    expect(errorOf(await reverse(otherBrandReviewer, order.id, { reason_code: 'BANK_RECALL', note: NOTE }))).toMatchObject({ code: 'scope_denied' });
    expect((await getDeposit(app, order.id, owner)).status).toBe('settled');

    const reversed = await reverse(operator, order.id, { reason_code: 'BANK_RECALL', note: NOTE });
    expect(reversed.statusCode, reversed.body).toBe(200);
    const view = await getDeposit(app, order.id, owner);
    expect(view).toMatchObject({ status: 'reversed', reversal: { reason_code: 'BANK_RECALL', reverses_balance_transaction_id: settled.balance_transaction_id } });
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: 0, available_minor: 0 });
    const { rows } = await app.testDatabase.database.query<{ bucket_from: string; reason_code: string; reason_display_th: string }>(
      "SELECT bucket_from, reason_code, reason_display_th FROM balance_transactions WHERE merchant_id = $1 AND type = 'reversal'",
      [owner.merchant_id],
    );
    expect(rows).toEqual([{ bucket_from: 'pending_clearing', reason_code: 'BANK_RECALL', reason_display_th: 'ธนาคารเรียกคืนเงินโอน' }]);
    expect(await withdrawalOf(app, order)).toMatchObject({ leg_status: 'reversed' });
    expect((await withdrawalOf(app, order)).filled_minor).toBe(withdrawalBefore.filled_minor - 10_000);
    const { rows: withdrawalEvents } = await app.testDatabase.database.query<{ type: string }>('SELECT type FROM events WHERE object_id = $1 ORDER BY sequence', [withdrawalBefore.withdrawal_id]);
    expect(withdrawalEvents.map((row) => row.type)).toContain('withdrawal.fill_reversed');
    // The chunk (and any fee it no longer earns) coming back to the withdrawing wallet is a `reversal` credit,
    // sent as the spec's event for reversals, `balance.debited`, which no endpoint can turn off (spec, Events).
    const { rows: reversalCredits } = await app.testDatabase.database.query<{ type: string; direction: string; movement_type: string }>(
      `SELECT e.type, e.envelope -> 'data' -> 'object' ->> 'direction' AS direction, e.envelope -> 'data' -> 'object' ->> 'type' AS movement_type
         FROM events e JOIN balance_transactions bt ON bt.balance_transaction_id = e.object_id
        WHERE bt.type = 'reversal' AND bt.direction = 'credit' AND bt.source_id = $1`,
      [withdrawalBefore.withdrawal_id],
    );
    expect(reversalCredits.length).toBeGreaterThan(0);
    expect(reversalCredits).toEqual(reversalCredits.map(() => ({ type: 'balance.debited', direction: 'credit', movement_type: 'reversal' })));
    expect(await auditActions(order.id)).toEqual(['deposit.reversed']);

    expect((await reverse(operator, order.id, { reason_code: 'BANK_RECALL', note: NOTE })).statusCode).toBe(200);
    expect(errorOf(await reverse(operator, order.id, { reason_code: 'OPS_ERROR', note: NOTE }))).toMatchObject({ code: 'deposit_state_conflict' });
    expect((await eventTypesOf(app, order.id)).filter((type) => type === 'deposit.reversed')).toHaveLength(1);
  });

  it('after 72 h: from available, which may go below zero; every spec reason code is accepted', async () => {
    const { order, owner, settled } = await settledOrder();
    app.clock.advance(72 * 3600_000 + 1000);
    await runJobs(app);
    expect(await balanceOf(owner)).toMatchObject({ pending_clearing_minor: 0, available_minor: settled.credited_amount_minor });
    const reversed = await reverse(operator, order.id, { reason_code: 'SLIP_INVALIDATED_AFTER_SETTLEMENT', note: NOTE });
    expect(reversed.statusCode, reversed.body).toBe(200);
    expect(await balanceOf(owner)).toMatchObject({ available_minor: 0 });
    expect(REVERSAL_REASON_CODES).toHaveLength(6);
    const awaiting = await createDeposit(app, { amount_minor: 10_000, credentials: owner, sender: declaredSender() });
    expect(errorOf(await reverse(operator, awaiting.id, { reason_code: 'OPS_ERROR', note: NOTE }))).toMatchObject({ code: 'deposit_state_conflict', details: { status: 'awaiting_payment' } });
  });
});

// Runs last: by now this file's orders have entered review, been escalated, approved by one and by two
// reviewers, rejected, settled and reversed, so the projection has followed every kind of change.
describe('the queue’s reasons (migration 0042)', () => {
  it('deposit_review_reasons holds exactly the reasons of the orders in review, with their opened_at and escalation', async () => {
    const { rows } = await app.testDatabase.database.query<{ in_projection_only: number; in_orders_only: number; projected: number }>(
      `WITH expected AS (
         SELECT DISTINCT o.white_label_id, o.deposit_id, reason ->> 'code' AS reason_code, o.livemode, o.review ->> 'opened_at' AS opened_at,
                coalesce((o.review ->> 'escalated')::boolean, false) AS escalated
           FROM deposit_orders o, jsonb_array_elements(o.review::jsonb -> 'reasons') AS reason
          WHERE o.status = 'under_review'),
       projected AS (SELECT white_label_id, deposit_id, reason_code, livemode, opened_at, escalated FROM deposit_review_reasons)
       SELECT (SELECT count(*)::int FROM (SELECT * FROM projected EXCEPT SELECT * FROM expected) AS extra) AS in_projection_only,
              (SELECT count(*)::int FROM (SELECT * FROM expected EXCEPT SELECT * FROM projected) AS missing) AS in_orders_only,
              (SELECT count(*)::int FROM projected) AS projected`,
    );
    expect(rows[0]).toMatchObject({ in_projection_only: 0, in_orders_only: 0 });
    expect(rows[0]!.projected).toBeGreaterThan(0);
    const escalated = await app.testDatabase.database.query<{ count: number }>(`SELECT count(*)::int AS count FROM deposit_review_reasons WHERE escalated`);
    expect(escalated.rows[0]!.count).toBeGreaterThan(0);
  });

  it('the queue’s counts are exact up to their bound and stop there', async () => {
    const { deposits } = app.instance.services;
    const db = app.testDatabase.database;
    const brand = app.sandbox.white_label_id;
    const { rows } = await db.query<{ reason_code: string; count: number }>(
      `SELECT reason_code, count(*)::int AS count FROM deposit_review_reasons WHERE white_label_id = $1 GROUP BY reason_code ORDER BY reason_code`,
      [brand],
    );
    const { rows: orders } = await db.query<{ count: number }>(`SELECT count(*)::int AS count FROM deposit_orders WHERE white_label_id = $1 AND status = 'under_review'`, [brand]);
    const total = orders[0]!.count;
    expect(total).toBeGreaterThan(1);
    expect(await deposits.countInReviewByReason(db, brand, null, 1_000)).toEqual(rows);
    expect(await deposits.countInReviewByReason(db, brand, null, 1)).toEqual(rows.map((row) => ({ ...row, count: 1 })));
    expect(await deposits.countInReviewUpTo(db, brand, null, 1_000)).toBe(total);
    expect(await deposits.countInReviewUpTo(db, brand, null, total - 1)).toBe(total - 1);
    expect(await deposits.countInReviewUpTo(db, brand, true, 1_000)).toBe(0);
    // What the desk shows: the count, and whether it stopped at the bound.
    expect(await app.instance.services.review.queueTotal(db, brand, null)).toEqual({ count: total, more: false });
  });
});
