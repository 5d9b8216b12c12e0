import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, depositPolicyBody, eventsOfMerchant, getDeposit, nextReference, runJobs, sandboxTransfer, slipBytes, uploadMultipart, somchaiDepositBody, type CreatedDeposit } from '../support/slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import { SANDBOX_REFUND_SCENARIOS, SANDBOX_SCENARIOS } from '../../src/sandbox/scenario-table.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * The sandbox scenarios under concurrent use (issue 31): any number of scenario orders of any amounts, from
 * many merchants of one brand at once, each ends as its row of the spec's table says. Every order is created
 * over HTTP with a merchant's sandbox key before any time passes, so every scenario's steps, verifications,
 * expiries and standing withdrawals interleave; the test clock then moves while the job worker runs what falls
 * due, and each order's ending is read back over HTTP and from its merchant's event feed.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

type Started =
  | { amount_minor: number; merchant: MerchantCredentials; kind: 'deposit'; created: CreatedDeposit; request: { idempotency_key: string; body: Record<string, unknown>; request_id: string } }
  | { amount_minor: number; merchant: MerchantCredentials; kind: 'withdrawal'; created: WithdrawalView }
  | { amount_minor: number; merchant: MerchantCredentials; kind: 'refund'; created: WithdrawalView; deposit_id: string }
  | { amount_minor: number; merchant: MerchantCredentials; kind: 'refused'; status: number; code: string };

interface FeedEvent {
  type: string;
  created_at: string;
  data: { object: Record<string, unknown> };
}

const seconds = (from: string, to: string) => (Date.parse(to) - Date.parse(from)) / 1000;

function depositBody(amount_minor: number): Record<string, unknown> {
  return somchaiDepositBody(amount_minor, { prefix: 'at-once', account_prefix: '77', ip: '203.0.113.9' });
}

interface Ready {
  merchant: MerchantCredentials;
  beneficiary_id: string;
  /** A settled deposit of the merchant whose payer the bank proved, for the refund rows to refund (once its credit cleared). */
  refundable_deposit_id: string;
}

/** A merchant of the brand with money, a verified payee (107.00 and 113.00) and a settled deposit to refund. */
async function readyMerchant(white_label_id: string): Promise<Ready> {
  const merchant = await app.createMerchant({ white_label_id });
  await fundAvailable(app, accountOf(merchant), 1_000_000);
  const deposit = await createDeposit(app, { amount_minor: 500_000, credentials: merchant });
  const upload = await uploadMultipart(app, deposit.slip_upload, slipBytes(await sandboxTransfer(app, deposit, {}, merchant)));
  expect(upload.statusCode, upload.body).toBe(202);
  await runJobs(app);
  expect((await getDeposit(app, deposit.id, merchant)).status).toBe('settled');
  return { merchant, beneficiary_id: await verifiedBeneficiary(app, accountOf(merchant)), refundable_deposit_id: deposit.id };
}

/** Creates one order of a scenario amount as a merchant's integration would: a deposit, or a withdrawal for the withdrawal rows. */
async function start(amount_minor: number, ready: Ready, kind: 'deposit' | 'withdrawal' | 'refund' = 'deposit'): Promise<Started> {
  const { merchant } = ready;
  if (kind === 'refund') return startRefund(amount_minor, ready);
  const withdrawal = kind === 'withdrawal';
  const body = withdrawal
    ? { amount_minor, currency: 'THB', merchant_reference: nextReference('at-once-wdr'), end_user_ref: 'user-at-once', beneficiary_id: ready.beneficiary_id }
    : depositBody(amount_minor);
  const idempotency_key = crypto.randomUUID();
  const response = await app.signed({ method: 'POST', url: withdrawal ? '/v1/pay/withdrawals' : '/v1/pay/deposits', idempotency_key, credentials: merchant, body });
  if (response.statusCode >= 400) return { amount_minor, merchant, kind: 'refused', status: response.statusCode, code: errorOf(response).code };
  expect([201, 202], response.body).toContain(response.statusCode);
  if (withdrawal) return { amount_minor, merchant, kind: 'withdrawal', created: response.json<WithdrawalView>() };
  const request = { idempotency_key, body, request_id: String(response.headers['request-id']) };
  return { amount_minor, merchant, kind: 'deposit', created: response.json<CreatedDeposit>(), request };
}

/** A refund of the merchant's settled deposit over POST /v1/pay/deposits/{id}/refunds, as its integration would ask for it. */
async function startRefund(amount_minor: number, ready: Ready): Promise<Started> {
  const { merchant, refundable_deposit_id } = ready;
  const response = await app.signed({
    method: 'POST',
    url: `/v1/pay/deposits/${refundable_deposit_id}/refunds`,
    idempotency_key: crypto.randomUUID(),
    credentials: merchant,
    body: { amount_minor, reason_code: 'customer_request' },
  });
  if (response.statusCode >= 400) return { amount_minor, merchant, kind: 'refused', status: response.statusCode, code: errorOf(response).code };
  expect(response.statusCode, response.body).toBe(201);
  return { amount_minor, merchant, kind: 'refund', created: response.json<WithdrawalView>(), deposit_id: refundable_deposit_id };
}

/** Lets `total_ms` pass on the test clock in steps of `step_ms`, running every job as it falls due. */
async function passTime(total_ms: number, step_ms: number): Promise<void> {
  for (let passed = 0; passed < total_ms; passed += step_ms) {
    app.clock.advance(Math.min(step_ms, total_ms - passed));
    await runJobs(app);
  }
}

async function feedOf(merchant: MerchantCredentials, object_id: string): Promise<FeedEvent[]> {
  return ((await eventsOfMerchant(app, merchant.merchant_id)) as unknown as FeedEvent[]).filter((event) => event.data.object.id === object_id);
}

function reasonsOf(order: { review?: { reasons: { code: string }[] } | null | undefined }): string[] {
  return order.review?.reasons.map((reason) => reason.code) ?? [];
}

/** The event of `type` in a feed, which must be there. */
function eventOf(feed: FeedEvent[], type: string): FeedEvent {
  const found = feed.find((event) => event.type === type);
  expect(found, `${type} in ${JSON.stringify(feed.map((event) => event.type))}`).toBeDefined();
  return found!;
}

/** Checks that a deposit of a scenario amount ended as its row says; `tolerance_s` is the clock step. */
async function expectDepositEnding(started: Extract<Started, { kind: 'deposit' }>, tolerance_s: number): Promise<void> {
  const { created, merchant } = started;
  const order = await getDeposit(app, created.id, merchant);
  const feed = await feedOf(merchant, created.id);
  const label = `${started.amount_minor} ${created.id} ${order.status} ${JSON.stringify(reasonsOf(order))}`;
  switch (started.amount_minor) {
    case 10_000:
      expect(order, label).toMatchObject({ status: 'settled', settled_via: 'auto', partial: false, amount_received_minor: 10_000 });
      expect(seconds(created.created_at, order.settled_at!)).toBeLessThanOrEqual(5 + tolerance_s);
      return;
    case 10_100:
    case 10_600:
      expect(order.status, label).toBe('under_review');
      expect(reasonsOf(order), label).toEqual(started.amount_minor === 10_100 ? ['SENDER_NAME_MISMATCH'] : ['BANK_DISABLED']);
      return;
    case 10_200:
      expectLateSlipSettled(created, order, feed, tolerance_s, label);
      return;
    case 10_300:
      expect(order, label).toMatchObject({ status: 'reversed', reversal: { reason_code: 'BANK_RECALL' } });
      eventOf(feed, 'deposit.reversed');
      return;
    case 10_400:
      expectGatewayFallback(created, order, label);
      return;
    case 10_500:
      expect(created.status).toBe('awaiting_liquidity');
      expect(seconds(created.created_at, eventOf(feed, 'deposit.matched').created_at), label).toBeGreaterThanOrEqual(25);
      expect(seconds(created.created_at, eventOf(feed, 'deposit.matched').created_at), label).toBeLessThanOrEqual(25 + tolerance_s);
      return;
    case 10_700:
      await expectSplitCounterpartyWithdrawal(started, order, label);
      return;
    case 10_800:
      expect(order.status, label).toBe('settled');
      expect(feed.filter((event) => event.type === 'deposit.settled'), label).toHaveLength(1);
      eventOf(feed, 'deposit.overpaid');
      return;
    case 10_900:
      expect(order.status, label).toBe('under_review');
      expect(reasonsOf(order), label).toContain('CANCELED_ORDER_SLIP');
      expect(eventOf(feed, 'deposit.canceled').data.object).toMatchObject({ is_terminal: false, canceled_by: 'merchant' });
      return;
    case 11_000:
      await expectAllocationConflict(started, order, label);
      return;
    case 11_100:
      expect(order, label).toMatchObject({ status: 'settled', partial: true, settled_via: 'auto', amount_received_minor: 10_000 });
      return;
    case 11_200:
      await expectClosedWindow(started, order, label);
      return;
    case 11_400:
      expect((await eventsOfMerchant(app, merchant.merchant_id)).some((event) => event.type === 'webhook.key.rotating'), label).toBe(true);
      return;
    case 11_500:
      await expectKeyConflict(started, label);
      return;
    case 11_600:
      expect(order, label).toMatchObject({ status: 'settled', amount_received_minor: 11_600, overpayment: { cause: 'same_transfer_excess', amount_minor: 500 } });
      expect(feed.filter((event) => event.type === 'deposit.settled'), label).toHaveLength(1);
      return;
    default:
      throw new Error(`no ending written for ${started.amount_minor}`);
  }
}

/** 104.00: the fallback route, two legs to the sandbox gateway account with a 4-minute lifetime; nobody pays it, so it expires. */
function expectGatewayFallback(created: CreatedDeposit, order: DepositView, label: string): void {
  expect(created, label).toMatchObject({ liquidity_source: 'external_gateway', leg_count: 2 });
  expect(created.legs.map((leg) => [leg.amount_minor, leg.receiver.bank_code, leg.receiver.account_number_masked]), label).toEqual([
    [5_200, '014', '******1470'],
    [5_200, '014', '******1470'],
  ]);
  expect(seconds(created.created_at, created.expires_at), label).toBe(240);
  expect(order, label).toMatchObject({ status: 'expired', leg_count: 2, liquidity_source: 'external_gateway' });
}

/** 102.00: expired, a late slip 60 s after the deadline in review with LATE_SLIP, then settled by the sandbox desk. */
function expectLateSlipSettled(created: CreatedDeposit, order: DepositView, feed: FeedEvent[], tolerance_s: number, label: string): void {
  expect(order, label).toMatchObject({ status: 'settled', settled_via: 'review', amount_received_minor: 10_200 });
  const review = eventOf(feed, 'deposit.under_review');
  expect(reasonsOf(review.data.object as { review?: { reasons: { code: string }[] } }), label).toContain('LATE_SLIP');
  const lateBy = seconds(created.expires_at, review.created_at);
  expect(lateBy, label).toBeGreaterThanOrEqual(60);
  expect(lateBy, label).toBeLessThanOrEqual(60 + tolerance_s);
  expect(feed.map((event) => event.type), label).toEqual(expect.arrayContaining(['deposit.expired', 'deposit.under_review', 'deposit.settled']));
}

/**
 * 107.00 as a deposit: three legs, the counterparty's one withdrawal split into three chunks, each paid and
 * settled automatically; the withdrawal has three fills.
 */
async function expectSplitCounterpartyWithdrawal(started: Extract<Started, { kind: 'deposit' }>, order: DepositView, label: string): Promise<void> {
  expect(started.created, label).toMatchObject({ leg_count: 3 });
  expect(started.created.legs.map((leg) => leg.amount_minor), label).toEqual([3_500, 3_600, 3_600]);
  expect(order, label).toMatchObject({ status: 'settled', settled_via: 'auto', amount_received_minor: 10_700 });
  const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; merchant_id: string; status: string; settled_splits: number }>(
    `SELECT DISTINCT w.withdrawal_id, w.merchant_id, w.status, w.settled_splits
       FROM deposit_legs d JOIN withdrawal_orders w USING (white_label_id, withdrawal_id) WHERE d.deposit_id = $1`,
    [started.created.id],
  );
  expect(rows, label).toHaveLength(1);
  expect(rows[0], label).toMatchObject({ status: 'settled', settled_splits: 3 });
  expect(rows[0]!.merchant_id, label).not.toBe(started.merchant.merchant_id);
}

/** 110.00: a late slip in review with ALLOCATION_CONFLICT, and a dispute on the counterparty's withdrawal. */
async function expectAllocationConflict(started: Extract<Started, { kind: 'deposit' }>, order: DepositView, label: string): Promise<void> {
  expect(order.status, label).toBe('under_review');
  expect(reasonsOf(order)[0], label).toBe('ALLOCATION_CONFLICT');
  const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; merchant_id: string }>(
    'SELECT d.withdrawal_id, w.merchant_id FROM deposit_legs d JOIN withdrawal_orders w USING (white_label_id, withdrawal_id) WHERE d.deposit_id = $1',
    [started.created.id],
  );
  const leg = rows[0]!;
  const disputed = (await eventsOfMerchant(app, leg.merchant_id)).filter((event) => event.type === 'withdrawal.disputed' && event.data.object.id === leg.withdrawal_id);
  expect(disputed, label).toHaveLength(1);
  expect(disputed[0]!.data.object, label).toMatchObject({ dispute: { reason_code: 'ALLOCATION_CONFLICT', amount_minor: 11_000, status: 'open' } });
  // The copy in the feed of the merchant running the scenario (issue 31): the same event data.
  const relayed = await feedOf(started.merchant, leg.withdrawal_id);
  expect(relayed.map((event) => event.type), label).toEqual(['withdrawal.disputed']);
  expect(relayed[0]!.data, label).toEqual(disputed[0]!.data);
}

/** 115.00: the first request is stored under its key: the same body replays it, another body gets 409 naming it. */
async function expectKeyConflict(started: Extract<Started, { kind: 'deposit' }>, label: string): Promise<void> {
  const { idempotency_key, body, request_id } = started.request;
  const send = (sent: Record<string, unknown>) => app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key, credentials: started.merchant, body: sent });
  const replay = await send(body);
  expect([replay.statusCode, replay.headers['idempotent-replay'], replay.json<DepositView>().id], label).toEqual([201, 'true', started.created.id]);
  const conflict = await send({ ...body, merchant_reference: nextReference('other-body') });
  expect(conflict.statusCode, conflict.body).toBe(409);
  expect(errorOf(conflict), label).toMatchObject({ code: 'idempotency_key_reused', details: { original_request_id: request_id } });
}

/** 112.00: expired with its late-slip window closed; the end user's upload then answers 410 with a claim_url. */
async function expectClosedWindow(started: Extract<Started, { kind: 'deposit' }>, order: DepositView, label: string): Promise<void> {
  expect(order.status, label).toBe('expired');
  expect(seconds(order.expires_at, order.late_slip_accepted_until!), label).toBe(24 * 3600);
  const transfer = await sandboxTransfer(app, started.created, {}, started.merchant);
  const upload = await uploadMultipart(app, started.created.slip_upload, slipBytes(transfer));
  expect(upload.statusCode, upload.body).toBe(410);
  expect(errorOf(upload).details.claim_url, label).toEqual(expect.any(String));
}

async function expectWithdrawalEnding(started: Extract<Started, { kind: 'withdrawal' }>): Promise<void> {
  const response = await app.signed({ url: `/v1/pay/withdrawals/${started.created.id}`, credentials: started.merchant });
  const order = response.json<WithdrawalView>();
  const label = `${started.amount_minor} ${order.id} ${order.status} ${order.settled_splits}`;
  expect(started.amount_minor).toBe(10_700);
  expect(order, label).toMatchObject({ status: 'settled', settled_splits: 3, filled_minor: 10_700, remaining_minor: 0 });
  expect(order.fills?.map((fill) => fill.amount_minor), label).toEqual([3_500, 3_600, 3_600]);
  const filled = (await feedOf(started.merchant, order.id)).filter((event) => event.type === 'withdrawal.filled');
  expect(filled.map((event) => event.data.object.settled_splits), label).toEqual([1, 2, 3]);
}

/**
 * A test-mode refund ends as the sandbox's fill says (docs/decisions/sandbox.md, refund scenarios): filled in two
 * chunks (one for a single baht) within seconds, 107.00 in three, 117.00 left unfilled, 118.00 one chunk then left.
 */
async function expectRefundEnding(started: Extract<Started, { kind: 'refund' }>, tolerance_s: number): Promise<void> {
  const order = await (await app.signed({ url: `/v1/pay/withdrawals/${started.created.id}`, credentials: started.merchant })).json<WithdrawalView>();
  const label = `refund ${started.amount_minor} ${order.id} ${order.status} ${order.settled_splits}`;
  expect(order.refund_of_deposit_id, label).toBe(started.deposit_id);
  const feed = await feedOf(started.merchant, order.id);
  const filled = feed.filter((event) => event.type === 'withdrawal.filled');
  const expected: Record<number, { status: string; fills: number[] }> = {
    50_000: { status: 'settled', fills: [25_000, 25_000] },
    100: { status: 'settled', fills: [100] },
    10_700: { status: 'settled', fills: [3_500, 3_600, 3_600] },
    11_700: { status: 'open', fills: [] },
    11_800: { status: 'partially_filled', fills: [5_900] },
  };
  const row = expected[started.amount_minor];
  expect(row, label).toBeDefined();
  expect(order, label).toMatchObject({ status: row!.status, reserved_minor: 0, filled_minor: row!.fills.reduce((sum, amount) => sum + amount, 0) });
  expect(order.fills?.map((fill) => fill.amount_minor) ?? [], label).toEqual(row!.fills);
  expect(filled.map((event) => event.data.object.settled_splits), label).toEqual(row!.fills.map((_, index) => index + 1));
  expect(feed.filter((event) => event.type === 'withdrawal.leg_reserved'), label).toHaveLength(row!.fills.length);
  // Each chunk comes 5 s after the previous fill (the first 5 s after creation), and settles from its slip at once.
  if (filled.length > 0) expect(seconds(started.created.created_at, filled.at(-1)!.created_at), label).toBeLessThanOrEqual(5 * row!.fills.length + 2 * tolerance_s * row!.fills.length);
}

function expectRefusalOfRow(started: Extract<Started, { kind: 'refused' }>): void {
  const expected: Record<number, [number, string]> = { 11_300: [402, 'insufficient_balance'] };
  expect([started.status, started.code], `${started.amount_minor}`).toEqual(expected[started.amount_minor]);
}

async function expectEnding(started: Started, tolerance_s: number): Promise<void> {
  if (started.kind === 'deposit') return expectDepositEnding(started, tolerance_s);
  if (started.kind === 'withdrawal') return expectWithdrawalEnding(started);
  if (started.kind === 'refund') return expectRefundEnding(started, tolerance_s);
  expectRefusalOfRow(started);
}

/** No job of the run failed for good or is still being retried: every step did what it set out to do. */
async function expectNoFailedJobs(): Promise<void> {
  const { rows } = await app.testDatabase.database.query<{ task: string; last_error: string | null; status: string }>(
    "SELECT task, last_error, status FROM jobs WHERE status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL)",
  );
  expect(rows).toEqual([]);
}

/** The refund rows: an ordinary amount (two chunks), a single baht (one chunk), the refund scenarios, and the spec's withdrawal rows. */
const REFUND_ROWS = [50_000, 100, 10_700, 11_300, ...SANDBOX_REFUND_SCENARIOS.map((row) => row.amount_minor)].map((amount_minor) => ({ amount_minor, kind: 'refund' as const }));

/**
 * Runs `copies` orders of every scenario amount and of every refund row, spread over `merchants` merchants of one new
 * brand, all created before any time passes (in parallel requests), then lets five minutes pass in steps of
 * `step_ms`. The deposits the refunds refund are settled and their credit cleared (72 hours) first.
 */
async function runAtOnce(copies: number, merchants: number, step_ms: number): Promise<Started[]> {
  const brand = (await app.createMerchant()).white_label_id;
  const ready: Ready[] = [];
  for (let index = 0; index < merchants; index += 1) ready.push(await readyMerchant(brand));
  app.clock.advance(72 * HOUR_MS + 1);
  await runJobs(app);
  // Every row once per kind of order it selects: 107.00 both as a deposit and as a withdrawal.
  const rows = SANDBOX_SCENARIOS.flatMap((row) => (row.applies_to === 'both' ? (['deposit', 'withdrawal'] as const) : [row.applies_to]).map((kind) => ({ amount_minor: row.amount_minor as number, kind })));
  const orders = Array.from({ length: copies }, () => [...rows, ...REFUND_ROWS]).flat();
  const started = await Promise.all(orders.map((order, index) => start(order.amount_minor, ready[index % merchants]!, order.kind)));
  await passTime(5 * 60_000, step_ms);
  return started;
}

describe('every scenario at once', () => {
  it('all 17 amounts and every refund row created at once each end as their row says', async () => {
    const started = await runAtOnce(1, 1, 1_000);
    // The spec's rows first, then the refunds (Promise.all keeps the order of the requests).
    expect([...new Set(started.slice(0, 18).map((order) => order.amount_minor))].sort()).toEqual(SANDBOX_SCENARIOS.map((row) => row.amount_minor));
    expect(started.slice(18).map((order) => order.amount_minor)).toEqual(REFUND_ROWS.map((row) => row.amount_minor));
    expect(started).toHaveLength(18 + REFUND_ROWS.length);
    for (const order of started) await expectEnding(order, 1);
    await expectNoFailedJobs();
  }, 180_000);

  it('ten of each amount and of each refund row at once from several merchants of one brand each end as their row says', async () => {
    const started = await runAtOnce(10, 7, 2_000);
    expect(started).toHaveLength(10 * (18 + REFUND_ROWS.length));
    expect(started.filter((order) => order.kind === 'refund')).toHaveLength(10 * (REFUND_ROWS.length - 1));
    for (const order of started) await expectEnding(order, 2);
    await expectNoFailedJobs();
  }, 600_000);
});

describe('scenario orders among other deposits of the brand', () => {
  it('110.00 and 102.00 keep their destinations while other deposits match during their wait for the late slip', async () => {
    const brand = (await app.createMerchant()).white_label_id;
    // The brand takes deposits from 50.00 THB, an amount no scenario uses: such an order is never paid by the sandbox.
    const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: brand, min_amount_minor: 5_000 }) });
    expect(policy.statusCode, policy.body).toBe(200);
    const first = await readyMerchant(brand);
    const other = await readyMerchant(brand);
    // 110.00 first, so that its destination is the oldest order of the brand's queue, then 102.00.
    const conflict = await start(11_000, first);
    const late = await start(10_200, first);
    await passTime(61_000, 1_000);
    // Before issue 31 an unpaid ordinary deposit made now held 110.00's destination, so the scenario's cancel of
    // it was refused and the order stayed expired; and ten deposits filled the standing order that 102.00's late
    // slip needs again, up to its max_splits, so its approval failed with alloc_state_conflict for good.
    const unpaid = await start(5_000, other);
    const others = [];
    for (let index = 0; index < 10; index += 1) others.push(await start(10_000, other));
    await passTime(4 * 60_000, 1_000);
    await expectEnding(conflict, 1);
    await expectEnding(late, 1);
    for (const order of others) await expectEnding(order, 1);
    // The ordinary order still holds a destination of the brand, unpaid: it was matched, just not to theirs.
    expect(unpaid.kind === 'deposit' && (await getDeposit(app, unpaid.created.id, other.merchant)).status).toBe('awaiting_payment');
    await expectNoFailedJobs();
  });
});
