import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, eventsOfMerchant, getDeposit, nextReference, postToUploadUrl, runJobs, sandboxTransfer, slipBytes, uploadMultipart, somchaiDepositBody, type CreatedDeposit } from '../support/slips.ts';
import { SANDBOX_SCENARIOS } from '../../src/sandbox/scenario-table.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import { accountOf, fundAvailable, inTransaction, verifiedBeneficiary } from '../support/withdrawals.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';

/**
 * The spec's sandbox scenarios (Sandbox scenarios, by created amount), each through the doors a
 * merchant uses: the order is created over HTTP with the sandbox key, time passes on the test clock
 * while the job worker runs what falls due (the scenario steps, slip verification, expiry, clearing),
 * and the outcome is read back over HTTP and from the merchant's event feed. The payments the scenarios
 * make are sandbox-bank transfers whose slips go through the ordinary intake and verification.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

/** Lets `total_ms` pass on the test clock a second at a time, running every job as it falls due. */
async function passTime(total_ms: number, step_ms = 1_000): Promise<void> {
  for (let passed = 0; passed < total_ms; passed += step_ms) {
    app.clock.advance(Math.min(step_ms, total_ms - passed));
    await runJobs(app);
  }
}

/** Passes time a second at a time until the order reaches `status` (at most `limit_ms`); returns the order and the time it took. */
async function until(order: { id: string }, status: string, limit_ms: number, credentials?: MerchantCredentials): Promise<{ order: DepositView; waited_ms: number }> {
  const started = app.clock.now().getTime();
  for (;;) {
    const current = await getDeposit(app, order.id, credentials);
    if (current.status === status) return { order: current, waited_ms: app.clock.now().getTime() - started };
    if (app.clock.now().getTime() - started >= limit_ms) throw new Error(`order ${order.id} is ${current.status}, not ${status}, after ${limit_ms} ms`);
    await passTime(1_000);
  }
}

async function newMerchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

async function eventTypes(credentials: MerchantCredentials, object_id: string): Promise<string[]> {
  return (await eventsOfMerchant(app, credentials.merchant_id)).filter((event) => event.data.object.id === object_id).map((event) => event.type);
}

async function receiptCount(deposit_id: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*)::text AS count FROM slip_receipts WHERE deposit_id = $1', [deposit_id]);
  return Number(rows[0]?.count);
}

const seconds = (from: string, to: string) => (Date.parse(to) - Date.parse(from)) / 1000;

describe('the scenario table', () => {
  it('has the spec’s 17 rows, one per amount from 100.00 to 116.00 THB', () => {
    expect(SANDBOX_SCENARIOS.map((row) => row.amount_minor)).toEqual(Array.from({ length: 17 }, (_, index) => 10_000 + index * 100));
  });
});

describe('deposit scenarios', () => {
  it('100.00: matched, the slip checked automatically, settled in about 5 seconds', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_000, credentials: merchant });
    expect(created.status).toBe('awaiting_payment');
    const { order } = await until(created, 'settled', 10_000, merchant);
    expect(order).toMatchObject({ settled_via: 'auto', partial: false, amount_received_minor: 10_000, livemode: false });
    expect(seconds(created.created_at, order.settled_at!)).toBeLessThanOrEqual(6);
    expect(await receiptCount(created.id)).toBe(1);
    expect(await eventTypes(merchant, created.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.settled']);
  });

  it('101.00: under review with SENDER_NAME_MISMATCH, and it stays there', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_100, credentials: merchant });
    const { order } = await until(created, 'under_review', 10_000, merchant);
    expect(order.review?.reasons.map((reason) => reason.code)).toEqual(['SENDER_NAME_MISMATCH']);
    await passTime(10 * 60_000, 60_000);
    expect((await getDeposit(app, created.id, merchant)).status).toBe('under_review');
  });

  it('102.00: expired, a late slip 60 s after the deadline goes to review with LATE_SLIP, then settled', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_200, credentials: merchant });
    expect(seconds(created.created_at, created.expires_at)).toBe(60);
    const expired = await until(created, 'expired', 61_000, merchant);
    expect(expired.order.expired_reason).toBe('no_payment');
    const reviewed = await until(created, 'under_review', 185_000, merchant);
    expect(reviewed.order.review?.reasons.map((reason) => reason.code)).toContain('LATE_SLIP');
    expect(seconds(created.expires_at, reviewed.order.review!.opened_at)).toBe(60);
    const { order } = await until(created, 'settled', 70_000, merchant);
    expect(order).toMatchObject({ settled_via: 'review', amount_received_minor: 10_200 });
  });

  it('103.00: settled, then reversed 60 seconds later', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_300, credentials: merchant });
    const settled = await until(created, 'settled', 10_000, merchant);
    await passTime(58_000);
    expect((await getDeposit(app, created.id, merchant)).status).toBe('settled');
    const { order } = await until(created, 'reversed', 5_000, merchant);
    expect(order.reversal).toMatchObject({ reason_code: 'BANK_RECALL', reverses_balance_transaction_id: settled.order.balance_transaction_id });
    expect(seconds(settled.order.settled_at!, order.reversal!.reversed_at)).toBeGreaterThanOrEqual(60);
    expect(seconds(settled.order.settled_at!, order.reversal!.reversed_at)).toBeLessThanOrEqual(61);
    expect(await eventTypes(merchant, created.id)).toContain('deposit.reversed');
  });

  it('104.00: a fallback route of two legs to the external gateway, with a lifetime of about 4 minutes', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_400, credentials: merchant });
    expect(created).toMatchObject({ status: 'awaiting_payment', leg_count: 2, liquidity_source: 'external_gateway' });
    expect(created.legs.map((leg) => leg.amount_minor)).toEqual([5_200, 5_200]);
    // Both legs go to the sandbox bank's gateway account, each with its own QR to pay.
    for (const leg of created.legs) {
      expect(leg.receiver).toMatchObject({ bank_code: '014', account_number_masked: '******1470' });
      expect(leg.qr_payload).toEqual(expect.any(String));
    }
    expect(seconds(created.created_at, created.expires_at)).toBe(240);
    // No withdrawal is reserved for it: the gateway is outside the brand's withdrawals.
    const { rows } = await app.testDatabase.database.query<{ destination: string; withdrawal_id: string | null }>('SELECT destination, withdrawal_id FROM deposit_legs WHERE deposit_id = $1', [created.id]);
    expect(rows).toEqual([{ destination: 'gateway', withdrawal_id: null }, { destination: 'gateway', withdrawal_id: null }]);
    // Nothing pays it: the two legs are the end user's to pay; unpaid, it expires at the deadline.
    await passTime(239_000, 10_000);
    expect((await getDeposit(app, created.id, merchant)).status).toBe('awaiting_payment');
    await until(created, 'expired', 5_000, merchant);
    expect(await receiptCount(created.id)).toBe(0);
  });

  it('104.00: the end user pays both gateway legs at the sandbox bank; each slip verifies, the order settles and credits the merchant', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_400, credentials: merchant });
    expect(created).toMatchObject({ liquidity_source: 'external_gateway', leg_count: 2 });
    for (const [index, leg] of created.legs.entries()) {
      const transfer = await sandboxTransfer(app, created, { leg_ref: leg.leg_ref }, merchant);
      const upload = await uploadMultipart(app, created.slip_upload, slipBytes(transfer));
      expect(upload.statusCode, upload.body).toBe(202);
      await passTime(5_000);
      const after = await getDeposit(app, created.id, merchant);
      expect(after.status).toBe(index === 0 ? 'awaiting_payment' : 'settled');
    }
    const order = await getDeposit(app, created.id, merchant);
    expect(order).toMatchObject({
      status: 'settled',
      settled_via: 'auto',
      partial: false,
      amount_received_minor: 10_400,
      verification: { amount_exact: true, receiver_match: true },
      legs: [{ leg_status: 'complete' }, { leg_status: 'complete' }],
    });
    expect(order.balance_transaction_id).toEqual(expect.any(String));
    expect(await eventTypes(merchant, created.id)).toEqual(['deposit.created', 'deposit.slip_received', 'deposit.leg_paid', 'deposit.slip_received', 'deposit.settled']);
    const balance = await app.signed({ url: '/v1/pay/balance', credentials: merchant });
    expect(balance.json<{ pending_clearing_minor: number }>().pending_clearing_minor).toBe(order.credited_amount_minor);
    expect(order.credited_amount_minor).toBeGreaterThan(0);
  });

  it('104.00 leaves the brand’s own gateway alone: its test-mode policy keeps none, and other amounts match withdrawals', async () => {
    const merchant = await newMerchant();
    await createDeposit(app, { amount_minor: 10_400, credentials: merchant });
    const policy = await app.backoffice({ method: 'GET', url: `/v1/bo/deposit-policy?mode=test&white_label_id=${app.sandbox.white_label_id}` });
    expect(policy.statusCode, policy.body).toBe(200);
    expect(policy.json<{ gateway: unknown }>().gateway).toBeNull();
    const other = await createDeposit(app, { amount_minor: 12_300, credentials: merchant });
    expect(other).toMatchObject({ liquidity_source: 'internal', leg_count: 1 });
  });

  it('104.00 with fill_preference internal_only is matched to a withdrawal: the merchant asked for no gateway', async () => {
    const merchant = await newMerchant();
    const body = { ...depositBody(10_400), fill_preference: 'internal_only' };
    const response = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials: merchant, body });
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json<DepositView>()).toMatchObject({ liquidity_source: 'internal', leg_count: 1 });
  });

  it('105.00: 25 seconds in awaiting_liquidity before a destination appears', async () => {
    const merchant = await newMerchant();
    const response = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials: merchant, body: depositBody(10_500) });
    expect(response.statusCode, response.body).toBe(202);
    const created = response.json<DepositView>();
    const { waited_ms } = await until(created, 'awaiting_payment', 30_000, merchant);
    expect(waited_ms).toBe(25_000);
  });

  it('106.00: under review with BANK_DISABLED', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_600, credentials: merchant });
    const { order } = await until(created, 'under_review', 10_000, merchant);
    expect(order.review?.reasons.map((reason) => reason.code)).toContain('BANK_DISABLED');
  });

  it('107.00 as a deposit: the counterparty’s withdrawal split into 3 chunks, the order’s 3 legs, each paid and filled', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_700, credentials: merchant });
    expect(created).toMatchObject({ status: 'awaiting_payment', leg_count: 3, liquidity_source: 'internal' });
    expect(created.legs.map((leg) => leg.amount_minor)).toEqual([3_500, 3_600, 3_600]);
    const { order } = await until(created, 'settled', 60_000, merchant);
    expect(order).toMatchObject({ settled_via: 'auto', partial: false, amount_received_minor: 10_700 });
    expect(await receiptCount(created.id)).toBe(3);
    const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; merchant_id: string }>(
      'SELECT DISTINCT d.withdrawal_id, w.merchant_id FROM deposit_legs d JOIN withdrawal_orders w USING (white_label_id, withdrawal_id) WHERE d.deposit_id = $1',
      [created.id],
    );
    expect(rows).toHaveLength(1);
    const counterparty = rows[0]!;
    expect(counterparty.merchant_id).not.toBe(merchant.merchant_id);
    const filled = (await eventsOfMerchant(app, counterparty.merchant_id)).filter((event) => event.type === 'withdrawal.filled' && event.data.object.id === counterparty.withdrawal_id);
    expect(filled.map((event) => (event.data.object as { settled_splits: number }).settled_splits)).toEqual([1, 2, 3]);
  });

  it('108.00: settled, then deposit.overpaid for the duplicate transfer 45 seconds later', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_800, credentials: merchant });
    const settled = await until(created, 'settled', 10_000, merchant);
    await passTime(43_000);
    expect(await eventTypes(merchant, created.id)).not.toContain('deposit.overpaid');
    await passTime(5_000);
    const events = (await eventsOfMerchant(app, merchant.merchant_id)).filter((event) => event.data.object.id === created.id);
    const overpaid = events.find((event) => event.type === 'deposit.overpaid');
    expect(overpaid, JSON.stringify(events.map((event) => event.type))).toBeDefined();
    expect(events.filter((event) => event.type === 'deposit.settled')).toHaveLength(1);
    const after = await getDeposit(app, created.id, merchant);
    expect(after.status).toBe('settled');
    expect(after.balance_transaction_id).toBe(settled.order.balance_transaction_id);
    expect(await receiptCount(created.id)).toBe(2);
  });

  it('109.00: canceled (not terminal), transferred anyway, under review with CANCELED_ORDER_SLIP', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 10_900, credentials: merchant });
    const canceled = await until(created, 'canceled', 10_000, merchant);
    expect(canceled.order).toMatchObject({ is_terminal: false, canceled_by: 'merchant' });
    const { order } = await until(created, 'under_review', 10_000, merchant);
    expect(order.review?.reasons.map((reason) => reason.code)).toContain('CANCELED_ORDER_SLIP');
  });

  it('110.00: a late slip with ALLOCATION_CONFLICT and withdrawal.disputed on the counterparty', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 11_000, credentials: merchant });
    expect(seconds(created.created_at, created.expires_at)).toBe(60);
    await until(created, 'expired', 61_000, merchant);
    const { order } = await until(created, 'under_review', 185_000, merchant);
    expect(order.review?.reasons[0]?.code).toBe('ALLOCATION_CONFLICT');
    const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; merchant_id: string }>(
      `SELECT d.withdrawal_id, w.merchant_id FROM deposit_legs d JOIN withdrawal_orders w USING (white_label_id, withdrawal_id) WHERE d.deposit_id = $1`,
      [created.id],
    );
    const counterparty = rows[0]!;
    const counterpartyEvents = (await eventsOfMerchant(app, counterparty.merchant_id)).filter((event) => event.data.object.id === counterparty.withdrawal_id);
    expect(counterpartyEvents.map((event) => event.type)).toContain('withdrawal.disputed');
    expect(counterpartyEvents.at(-1)?.data.object).toMatchObject({ dispute: { reason_code: 'ALLOCATION_CONFLICT', amount_minor: 11_000, status: 'open' } });
    // The merchant running the scenario gets the same event in its own feed, so its endpoints receive it.
    await passTime(10_000);
    const relayed = (await eventsOfMerchant(app, merchant.merchant_id)).filter((event) => event.type === 'withdrawal.disputed');
    expect(relayed).toHaveLength(1);
    expect(relayed[0]!.data).toEqual(counterpartyEvents.find((event) => event.type === 'withdrawal.disputed')!.data);
  });

  it('111.00: a clean short-pay settled automatically (partial, auto)', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 11_100, credentials: merchant });
    const { order } = await until(created, 'settled', 10_000, merchant);
    expect(order).toMatchObject({ partial: true, settled_via: 'auto', amount_received_minor: 10_000, transferred_amount_minor: 10_000 });
  });

  it('112.00: the late-slip window (24 h after the deadline) is closed: 410 with a claim_url that opens a claim', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 11_200, credentials: merchant });
    // The deadline is dated a day and a minute before the order, so the window, always 24 hours after the
    // deadline (spec, late_slip_accepted_until), closed a minute before the order was made.
    expect(seconds(created.created_at, created.expires_at)).toBe(-(24 * 3600 + 60));
    const { order } = await until(created, 'expired', 1_000, merchant);
    expect(seconds(order.expires_at, order.late_slip_accepted_until!)).toBe(24 * 3600);
    expect(seconds(created.created_at, order.late_slip_accepted_until!)).toBe(-60);
    // Nothing is paid automatically: the 410 is the answer to the end user's upload.
    expect(await receiptCount(created.id)).toBe(0);
    const transfer = await sandboxTransfer(app, created, {}, merchant);
    const upload = await uploadMultipart(app, created.slip_upload, slipBytes(transfer));
    expect(upload.statusCode, upload.body).toBe(410);
    const error = errorOf(upload);
    expect(error.code).toBe('late_slip_window_closed');
    const claimUrl = String(error.details.claim_url);
    expect(claimUrl).toBe(created.slip_upload.upload_url.replace(/\/slip$/, '/claims'));
    const claim = await postToUploadUrl(app, { ...created.slip_upload, upload_url: claimUrl }, JSON.stringify({ trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code }), 'application/json');
    expect(claim.statusCode, claim.body).toBe(201);
  });

  it('114.00: webhook.key.rotating on the merchant’s sandbox feed, a new sandbox kid that signs within 60 seconds; live keys unchanged', async () => {
    const merchant = await newMerchant();
    const keysBefore = (await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' })).json<{ keys: { kid: string; status: string }[] }>().keys;
    const created = await createDeposit(app, { amount_minor: 11_400, credentials: merchant });
    await passTime(4_000);
    const announcement = (await eventsOfMerchant(app, merchant.merchant_id)).find((event) => event.type === 'webhook.key.rotating');
    expect(announcement, 'the merchant is told of the rotation').toBeDefined();
    const rotation = announcement!.data.object as { id: string; new_key: { kid: string }; signing_switches_at: string };
    const newKid = rotation.new_key.kid;
    expect(rotation.id).toBe(newKid);
    expect(seconds(created.created_at, rotation.signing_switches_at)).toBeLessThanOrEqual(60);
    const keysAfter = (await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' })).json<{ keys: { kid: string; status: string; not_before: string }[] }>().keys;
    const added = keysAfter.find((key) => key.kid === newKid);
    expect(added).toMatchObject({ status: 'next' });
    expect(seconds(created.created_at, added!.not_before)).toBeLessThanOrEqual(60);
    // Every key listed before is still listed: nothing live was retired by a sandbox rotation.
    for (const key of keysBefore) expect(keysAfter.map((listed) => listed.kid)).toContain(key.kid);
    const { rows } = await app.testDatabase.database.query("SELECT 1 FROM events WHERE livemode AND type = 'webhook.key.rotating'");
    expect(rows).toHaveLength(0);
    // A retried step rotates nothing more: the same run answers the rotation it made.
    await passTime(60_000, 10_000);
    expect((await eventsOfMerchant(app, merchant.merchant_id)).filter((event) => event.type === 'webhook.key.rotating')).toHaveLength(1);
  });

  it('115.00: the first request is stored under its key; the same body replays it, another body gets 409 idempotency_key_reused naming it', async () => {
    const merchant = await newMerchant();
    const body = depositBody(11_500);
    const idempotency_key = crypto.randomUUID();
    const first = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key, credentials: merchant, body });
    expect(first.statusCode, first.body).toBe(201);
    const replay = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key, credentials: merchant, body });
    expect(replay.statusCode, replay.body).toBe(201);
    expect(replay.headers['idempotent-replay']).toBe('true');
    expect(replay.json<DepositView>().id).toBe(first.json<DepositView>().id);
    const conflict = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key, credentials: merchant, body: { ...body, merchant_reference: nextReference('other-body') } });
    expect(conflict.statusCode, conflict.body).toBe(409);
    expect(errorOf(conflict)).toMatchObject({ code: 'idempotency_key_reused', retryable: false, details: { original_request_id: first.headers['request-id'] } });
    const { rows } = await app.testDatabase.database.query('SELECT 1 FROM deposit_orders WHERE merchant_id = $1', [merchant.merchant_id]);
    expect(rows).toHaveLength(1);
  });

  it('116.00: same-slip overpayment, V = 12100: one deposit.settled with A = X and E = 500', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 11_600, credentials: merchant });
    const { order } = await until(created, 'settled', 10_000, merchant);
    expect(order).toMatchObject({ amount_received_minor: 11_600, transferred_amount_minor: 12_100, overpayment: { cause: 'same_transfer_excess', amount_minor: 500 } });
    expect((await eventTypes(merchant, created.id)).filter((type) => type === 'deposit.settled')).toHaveLength(1);
  });
});

describe('withdrawal scenarios', () => {
  it('107.00: the counterparty fills the withdrawal in 3 chunks, each a deposit paid with a slip through the live pipeline', async () => {
    const merchant = await newMerchant();
    const account = accountOf(merchant);
    await fundAvailable(app, account, 100_000);
    const beneficiary_id = await verifiedBeneficiary(app, account);
    const response = await app.signed({
      method: 'POST',
      url: '/v1/pay/withdrawals',
      idempotency_key: crypto.randomUUID(),
      credentials: merchant,
      body: { amount_minor: 10_700, currency: 'THB', merchant_reference: nextReference('chunks'), end_user_ref: 'user-107', beneficiary_id },
    });
    expect(response.statusCode, response.body).toBe(201);
    const created = response.json<WithdrawalView>();
    expect(created).toMatchObject({ status: 'open', livemode: false, settled_splits: 0 });

    let current = created;
    for (let waited_ms = 0; current.status !== 'settled'; waited_ms += 1_000) {
      if (waited_ms > 90_000) throw new Error(`withdrawal ${created.id} is ${current.status} with ${current.settled_splits} fills after 90 s`);
      await passTime(1_000);
      current = (await app.signed({ url: `/v1/pay/withdrawals/${created.id}`, credentials: merchant })).json<WithdrawalView>();
    }
    expect(current).toMatchObject({ status: 'settled', settled_splits: 3, filled_minor: 10_700, remaining_minor: 0, reserved_minor: 0 });
    expect(current.fills?.map((fill) => fill.amount_minor)).toEqual([3_500, 3_600, 3_600]);
    const filled = (await eventsOfMerchant(app, merchant.merchant_id)).filter((event) => event.type === 'withdrawal.filled' && event.data.object.id === created.id);
    expect(filled.map((event) => (event.data.object as { settled_splits: number }).settled_splits)).toEqual([1, 2, 3]);

    // Each chunk is a deposit of the sandbox counterparty, settled automatically from its slip's pixels.
    const { rows } = await app.testDatabase.database.query<{ deposit_id: string; merchant_id: string; status: string; settled_via: string; receipts: string }>(
      `SELECT d.deposit_id, d.merchant_id, d.status, d.settled_via,
              (SELECT count(*) FROM slip_receipts r WHERE r.deposit_id = d.deposit_id)::text AS receipts
         FROM deposit_legs l JOIN deposit_orders d USING (white_label_id, deposit_id)
        WHERE l.withdrawal_id = $1 ORDER BY d.created_at`,
      [created.id],
    );
    expect(rows).toHaveLength(3);
    expect(new Set(rows.map((row) => row.merchant_id)).size).toBe(1);
    expect(rows[0]?.merchant_id).not.toBe(merchant.merchant_id);
    expect(rows.map((row) => [row.status, row.settled_via, row.receipts])).toEqual(Array.from({ length: 3 }, () => ['settled', 'auto', '1']));
  });

  it('107.00 in live is an ordinary withdrawal: nothing is scheduled for it, nobody fills it', async () => {
    // A live beneficiary cannot be verified here (no live bank directory), so the order is made through
    // the service, as the route would after its verification check. Its own brand, so that the open order
    // is no other test's liquidity.
    const live = await app.createMerchant({ livemode: true });
    const account = accountOf(live, true);
    await fundAvailable(app, account, 100_000);
    const created = await inTransaction(app, async (tx) => {
      const { beneficiary } = await app.instance.services.beneficiaries.create(tx, account, { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }, SYSTEM_CAUSE);
      return app.instance.services.withdrawals.create(tx, account, { amount_minor: 10_700, merchant_reference: nextReference('chunks'), end_user_ref: 'user-107', beneficiary_id: beneficiary.id }, SYSTEM_CAUSE);
    });
    if (!created.ok) throw new Error(created.error.code);
    await passTime(30_000, 5_000);
    const after = (await app.signed({ url: `/v1/pay/withdrawals/${created.value.id}`, credentials: live })).json<WithdrawalView>();
    expect(after).toMatchObject({ status: 'open', settled_splits: 0, livemode: true });
    const { rows } = await app.testDatabase.database.query(`SELECT 1 FROM jobs WHERE task = 'sandbox.scenario_step' AND payload->>'order_id' = $1`, [created.value.id]);
    expect(rows).toHaveLength(0);
  });
});

describe('what the scenarios leave alone', () => {
  it('an end user who pays first keeps the order: the scenario makes no second payment', async () => {
    const merchant = await newMerchant();
    const created: CreatedDeposit = await createDeposit(app, { amount_minor: 10_000, credentials: merchant });
    const transfer = await sandboxTransfer(app, created, {}, merchant);
    const upload = await uploadMultipart(app, created.slip_upload, slipBytes(transfer));
    expect(upload.statusCode, upload.body).toBe(202);
    await until(created, 'settled', 10_000, merchant);
    await passTime(10_000);
    expect(await receiptCount(created.id)).toBe(1);
  });

  it('an amount that is not in the table is never paid by the sandbox', async () => {
    const merchant = await newMerchant();
    const created = await createDeposit(app, { amount_minor: 12_000, credentials: merchant });
    await passTime(30_000, 5_000);
    expect(await getDeposit(app, created.id, merchant)).toMatchObject({ status: 'awaiting_payment' });
    expect(await receiptCount(created.id)).toBe(0);
  });

  it('live orders of a scenario amount follow no scenario', async () => {
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const response = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials: live, body: depositBody(11_500) });
    // 115.00 in live is an ordinary order (no liquidity in this brand's live mode: it waits).
    expect(response.statusCode, response.body).toBe(202);
    const order = response.json<DepositView>();
    expect(order.livemode).toBe(true);
    const again = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials: live, body: depositBody(10_000) });
    expect(again.statusCode, again.body).toBe(202);
    const { rows } = await app.testDatabase.database.query(`SELECT 1 FROM jobs WHERE task = 'sandbox.scenario_step' AND payload->>'order_id' IN ($1, $2)`, [order.id, again.json<DepositView>().id]);
    expect(rows).toHaveLength(0);
  });
});

function depositBody(amount_minor: number): Record<string, unknown> {
  return somchaiDepositBody(amount_minor, { prefix: 'scenario', account_prefix: '66', ip: '203.0.113.7' });
}
