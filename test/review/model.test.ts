import crypto from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, depositPolicyBody, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import { REVERSAL_REASON_CODES } from '../../src/review/catalogue.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * A model-based property test of everything after a slip (issue 11, "Bad input and safety"): random
 * sequences of payments (settled at once, or sent to review, full or short), review decisions by two
 * reviewers (approve with four eyes, reject, escalate), operator reversals, withdrawers' disputes and
 * their resolutions, and time passing (clearing, auto-confirm and dispute deadlines run by the real
 * worker). Every command goes through the door its user uses (signed merchant HTTP, the back-office API,
 * the slip upload and the job worker), next to a small model that predicts each order's status and
 * which commands are refused. After every step the test checks, from the database:
 *
 *  1. the ledger fold: every wallet of the brand equals the fold of its movements (`LedgerService.verify`);
 *  2. the withdrawal identity: amount_total = filled + reserved + remaining on every withdrawal order;
 *  3. one event per version: each deposit and withdrawal has exactly one event for each version 1..n;
 *  4. the depositor's money: pending clearing + available equals the credits of its orders that are
 *     settled now (reversed ones taken back), and each order's status is the model's.
 */

let app: TestApp;
const system = { actor_type: 'system' as const, actor_id: 'review-model', request_id: null };
const NOTE = 'ตรวจสอบแล้วตามหลักฐานจากธนาคารและร้านค้า';
const FOUR_EYES_FROM_MINOR = 20_000;
const HOUR_MS = 3600_000;
/** A fill may be disputed until its receipt is assumed, 3 hours after it settled (spec, fills[]). */
const DISPUTE_WINDOW_MS = 3 * HOUR_MS;
/** Evidence is due 48 hours after a dispute opens; without it the deadline job decides for the depositor. */
const RESPOND_WINDOW_MS = 48 * HOUR_MS;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

/**
 * A brand of its own for one sequence, so that every deposit pays this sequence's withdrawer: a funded
 * withdrawing merchant with a verified payee, a depositing merchant, two reviewers and an operator, and
 * a deposit policy with four eyes from 200 baht.
 */
async function newWorld(): Promise<World> {
  const withdrawer = await app.createMerchant();
  const brand = withdrawer.white_label_id;
  const owner = await app.createMerchant({ white_label_id: brand });
  const tenancy = app.instance.services.tenancy;
  const staff = async (role: 'operator' | 'reviewer', name: string) => (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role, name })).token;
  await fundAvailable(app, accountOf(withdrawer), 10_000_000);
  const operator = await staff('operator', 'Model operator');
  const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', token: operator, body: depositPolicyBody({ four_eyes_min_amount_minor: FOUR_EYES_FROM_MINOR }) });
  expect(policy.statusCode, policy.body).toBe(200);
  return {
    brand,
    owner,
    withdrawer,
    beneficiary_id: await verifiedBeneficiary(app, accountOf(withdrawer)),
    reviewers: [await staff('reviewer', 'Model reviewer A'), await staff('reviewer', 'Model reviewer B')],
    operator,
    orders: [],
    senderCounter: 0,
  };
}

// -------------------------------------------------------------------------------------------------
// The model

type Status = DepositView['status'];

interface OrderModel {
  id: string;
  amount_minor: number;
  status: Status;
  four_eyes: boolean;
  approvals: number[];
  escalated: boolean;
  /** The reviewer whose escalation counts (issue 28): they may not decide, and their approval stops counting. */
  escalated_by: number | null;
  /** Who ended the review, and how (a repeat by the same reviewer replays). */
  ended_by: { reviewer: number; action: 'approve' | 'reject' } | null;
  reversal_reason: string | null;
  /** The withdrawal and fill this order paid (known once it settled). */
  withdrawal_id: string | null;
  leg_ref: string | null;
  settled_at_ms: number | null;
  dispute: { id: string; opened_at_ms: number; status: 'open' | 'resolved' } | null;
}

interface World {
  brand: string;
  owner: MerchantCredentials;
  withdrawer: MerchantCredentials;
  beneficiary_id: string;
  reviewers: [string, string];
  operator: string;
  orders: OrderModel[];
  senderCounter: number;
}

type Command =
  | { kind: 'pay'; amount_minor: number; shape: 'clean' | 'review' | 'short_review' }
  | { kind: 'approve'; order: number; reviewer: number }
  | { kind: 'reject'; order: number; reviewer: number }
  | { kind: 'escalate'; order: number; reviewer: number }
  | { kind: 'reverse'; order: number; reason: number }
  | { kind: 'dispute'; order: number }
  | { kind: 'resolve'; order: number; outcome: 'withdrawer' | 'depositor' }
  | { kind: 'advance'; hours: number };

const commandArbitrary: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('pay' as const), amount_minor: fc.constantFrom(12_000, FOUR_EYES_FROM_MINOR), shape: fc.constantFrom('clean' as const, 'review' as const, 'short_review' as const) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('approve' as const), order: fc.nat(20), reviewer: fc.nat(1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reject' as const), order: fc.nat(20), reviewer: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('escalate' as const), order: fc.nat(20), reviewer: fc.nat(1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reverse' as const), order: fc.nat(20), reason: fc.nat(REVERSAL_REASON_CODES.length - 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('dispute' as const), order: fc.nat(20) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('resolve' as const), order: fc.nat(20), outcome: fc.constantFrom('withdrawer' as const, 'depositor' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), hours: fc.constantFrom(1, 4, 80) }) },
);

function pick(world: World, index: number): OrderModel | null {
  return world.orders.length === 0 ? null : (world.orders[index % world.orders.length] ?? null);
}

/** Reads what the settlement of an order filled: its withdrawal's fill, for a later dispute. */
async function recordSettlement(world: World, order: OrderModel): Promise<void> {
  const view = await getDeposit(app, order.id, world.owner);
  order.settled_at_ms = view.settled_at ? Date.parse(view.settled_at) : null;
  const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; withdrawal_leg_ref: string }>(
    "SELECT withdrawal_id, withdrawal_leg_ref FROM deposit_legs WHERE white_label_id = $1 AND deposit_id = $2 AND status = 'filled' ORDER BY sequence LIMIT 1",
    [world.brand, order.id],
  );
  order.withdrawal_id = rows[0]?.withdrawal_id ?? null;
  order.leg_ref = rows[0]?.withdrawal_leg_ref ?? null;
}

function decide(token: string, deposit_id: string, action: string, body: Record<string, unknown>) {
  return app.backoffice({ method: 'POST', url: `/v1/bo/reviews/${deposit_id}/${action}`, token, body });
}

// -------------------------------------------------------------------------------------------------
// Running one command against the service and the model

async function run(world: World, command: Command): Promise<string> {
  switch (command.kind) {
    case 'pay': {
      // The withdrawer asks for exactly this amount, so matching pairs the deposit with this brand's withdrawal.
      const reference = `wd-${crypto.randomBytes(6).toString('hex')}`;
      const withdrawal = await app.signed({
        method: 'POST',
        url: '/v1/pay/withdrawals',
        idempotency_key: crypto.randomUUID(),
        credentials: world.withdrawer,
        body: { amount_minor: command.amount_minor, currency: 'THB', merchant_reference: reference, end_user_ref: `payee-${reference}`, beneficiary_id: world.beneficiary_id },
      });
      expect(withdrawal.statusCode, withdrawal.body).toBe(201);
      world.senderCounter += 1;
      const declared = { bank_code: '004', account_number: `93${String(world.senderCounter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
      const order = await createDeposit(app, { amount_minor: command.amount_minor, credentials: world.owner, sender: declared });
      const wrongName = { sender: { ...declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } };
      const options = command.shape === 'clean' ? {} : command.shape === 'review' ? wrongName : { ...wrongName, amount_minor: command.amount_minor - 500 };
      expect((await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, options, world.owner)))).statusCode).toBe(202);
      await runJobs(app);
      const status: Status = command.shape === 'clean' ? 'settled' : 'under_review';
      const modelled: OrderModel = {
        id: order.id,
        amount_minor: command.amount_minor,
        status,
        four_eyes: status === 'under_review' && command.amount_minor >= FOUR_EYES_FROM_MINOR,
        approvals: [],
        escalated: false,
        escalated_by: null,
        ended_by: null,
        reversal_reason: null,
        withdrawal_id: null,
        leg_ref: null,
        settled_at_ms: null,
        dispute: null,
      };
      if (status === 'settled') await recordSettlement(world, modelled);
      world.orders.push(modelled);
      return `pay ${command.shape} ${command.amount_minor} → ${status}`;
    }
    case 'approve': {
      const order = pick(world, command.order);
      if (!order) return 'approve: no order';
      const response = await decide(world.reviewers[command.reviewer] ?? '', order.id, 'approve', {});
      if (order.status !== 'under_review') {
        if (order.ended_by?.reviewer === command.reviewer && order.ended_by.action === 'approve') {
          expect(response.statusCode, response.body).toBe(200);
          expect(response.json()).toMatchObject({ replayed: true });
        } else expect(errorOf(response).code).toBe('review_already_decided');
        return `approve ${order.status}: refused or replayed`;
      }
      if (order.escalated_by === command.reviewer) {
        expect(errorOf(response).code).toBe('escalation_same_reviewer');
        return 'approve: escalating reviewer refused';
      }
      if (order.approvals.includes(command.reviewer)) {
        expect(errorOf(response).code).toBe('four_eyes_same_reviewer');
        return 'approve: same reviewer refused';
      }
      expect(response.statusCode, response.body).toBe(200);
      if (order.four_eyes && order.approvals.filter((reviewer) => reviewer !== order.escalated_by).length === 0) {
        expect(response.json()).toMatchObject({ effect: 'approval_recorded' });
        order.approvals.push(command.reviewer);
        return 'approve: first of two';
      }
      expect(response.json()).toMatchObject({ effect: 'settled' });
      order.status = 'settled';
      order.ended_by = { reviewer: command.reviewer, action: 'approve' };
      await recordSettlement(world, order);
      return 'approve: settled';
    }
    case 'reject': {
      const order = pick(world, command.order);
      if (!order) return 'reject: no order';
      const response = await decide(world.reviewers[command.reviewer] ?? '', order.id, 'reject', { rejection_code: 'SLIP_NOT_GENUINE', note: NOTE });
      if (order.status !== 'under_review') {
        if (order.ended_by?.reviewer === command.reviewer && order.ended_by.action === 'reject') expect(response.statusCode, response.body).toBe(200);
        else expect(errorOf(response).code).toBe('review_already_decided');
        return `reject ${order.status}: refused or replayed`;
      }
      if (order.escalated_by === command.reviewer) {
        expect(errorOf(response).code).toBe('escalation_same_reviewer');
        return 'reject: escalating reviewer refused';
      }
      expect(response.statusCode, response.body).toBe(200);
      order.status = 'rejected';
      order.ended_by = { reviewer: command.reviewer, action: 'reject' };
      return 'reject: rejected';
    }
    case 'escalate': {
      const order = pick(world, command.order);
      if (!order) return 'escalate: no order';
      const response = await decide(world.reviewers[command.reviewer] ?? '', order.id, 'escalate', { note: NOTE });
      if (order.status !== 'under_review') {
        expect(errorOf(response).code).toBe('review_already_decided');
        return 'escalate: refused';
      }
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toMatchObject({ replayed: order.escalated });
      if (!order.escalated) order.escalated_by = command.reviewer;
      order.escalated = true;
      return 'escalate';
    }
    case 'reverse': {
      const order = pick(world, command.order);
      if (!order) return 'reverse: no order';
      const reason = REVERSAL_REASON_CODES[command.reason] ?? 'OPS_ERROR';
      const response = await app.backoffice({ method: 'POST', url: `/v1/bo/deposits/${order.id}/reverse`, token: world.operator, body: { reason_code: reason, note: NOTE } });
      if (order.status === 'settled') {
        expect(response.statusCode, response.body).toBe(200);
        order.status = 'reversed';
        order.reversal_reason = reason;
        return `reverse ${reason}`;
      }
      if (order.status === 'reversed' && order.reversal_reason === reason) expect(response.statusCode, response.body).toBe(200);
      else expect(errorOf(response).code).toBe('deposit_state_conflict');
      return `reverse ${order.status}: refused or replayed`;
    }
    case 'dispute': {
      const order = pick(world, command.order);
      if (!order?.withdrawal_id || !order.leg_ref) return 'dispute: no fill';
      const response = await app.signed({
        method: 'POST',
        url: `/v1/pay/withdrawals/${order.withdrawal_id}/disputes`,
        idempotency_key: crypto.randomUUID(),
        credentials: world.withdrawer,
        body: { leg_ref: order.leg_ref, reason_code: 'FUNDS_NOT_RECEIVED' },
      });
      const open = order.status === 'settled' && order.dispute === null && order.settled_at_ms !== null && app.clock.now().getTime() < order.settled_at_ms + DISPUTE_WINDOW_MS;
      if (!open) {
        expect(response.statusCode, response.body).toBe(409);
        expect(['dispute_window_closed', 'fill_already_disputed']).toContain(errorOf(response).code);
        return 'dispute: refused';
      }
      expect(response.statusCode, response.body).toBe(201);
      const view = response.json<WithdrawalView & { dispute: { id: string }; funds_on_hold: boolean }>();
      expect(view.funds_on_hold).toBe(true);
      order.dispute = { id: view.dispute.id, opened_at_ms: app.clock.now().getTime(), status: 'open' };
      return 'dispute: opened';
    }
    case 'resolve': {
      const order = pick(world, command.order);
      if (!order?.dispute) return 'resolve: no dispute';
      const response = await app.backoffice({ method: 'POST', url: `/v1/bo/disputes/${order.dispute.id}/resolve`, token: world.operator, body: { outcome: command.outcome, note: NOTE } });
      if (order.dispute.status === 'resolved') {
        // Resolved before (by this operator, or by the deadline job): a repeat replays or is refused.
        expect([200, 409]).toContain(response.statusCode);
        return 'resolve: already resolved';
      }
      if (order.status !== 'settled') {
        // The order was reversed while its dispute was open: the depositor cannot win any more.
        expect([200, 409]).toContain(response.statusCode);
        if (response.statusCode === 200) order.dispute.status = 'resolved';
        return `resolve ${command.outcome} on ${order.status}`;
      }
      expect(response.statusCode, response.body).toBe(200);
      order.dispute.status = 'resolved';
      if (command.outcome === 'withdrawer') {
        order.status = 'reversed';
        order.reversal_reason = 'MERCHANT_DISPUTE_LOST';
      }
      return `resolve for ${command.outcome}`;
    }
    case 'advance': {
      app.clock.advance(command.hours * HOUR_MS);
      await runJobs(app);
      // The deadline job decided every open dispute whose evidence was due (none of them has evidence).
      for (const order of world.orders) {
        if (order.dispute?.status === 'open' && app.clock.now().getTime() >= order.dispute.opened_at_ms + RESPOND_WINDOW_MS) order.dispute.status = 'resolved';
      }
      return `advance ${command.hours} h`;
    }
    default: {
      const unknown: never = command;
      throw new Error(`unknown command ${JSON.stringify(unknown)}`);
    }
  }
}

// -------------------------------------------------------------------------------------------------
// The checks after every step

async function checkInvariants(world: World): Promise<void> {
  const database = app.testDatabase.database;
  const ledger = app.instance.services.ledger;
  const { rows: wallets } = await database.query<{ merchant_id: string; livemode: boolean }>('SELECT merchant_id, livemode FROM wallets WHERE white_label_id = $1', [world.brand]);
  for (const wallet of wallets) {
    const verified = await ledger.verify(database, { white_label_id: world.brand, merchant_id: wallet.merchant_id, livemode: wallet.livemode });
    expect(verified.consistent, `wallet ${wallet.merchant_id} folds to its movements`).toBe(true);
  }

  const { rows: broken } = await database.query<{ withdrawal_id: string }>(
    `SELECT withdrawal_id FROM withdrawal_orders WHERE white_label_id = $1
        AND CASE WHEN refunded_minor IS NULL THEN amount_total_minor <> filled_minor + reserved_minor + remaining_minor
                 ELSE amount_total_minor + fee_total_minor <> filled_minor + fee_recognized_minor + refunded_minor OR remaining_minor <> 0 END`,
    [world.brand],
  );
  expect(broken).toEqual([]);

  const { rows: versions } = await database.query<{ object_id: string; events: string; distinct_versions: string; max_version: string }>(
    `SELECT object_id, count(*) AS events, count(DISTINCT (envelope -> 'data' -> 'object' ->> 'version')) AS distinct_versions,
            max((envelope -> 'data' -> 'object' ->> 'version')::integer) AS max_version
       FROM events WHERE white_label_id = $1 AND object_type IN ('deposit_order', 'withdrawal_order') GROUP BY object_id`,
    [world.brand],
  );
  for (const row of versions) {
    expect({ object_id: row.object_id, events: Number(row.events), distinct: Number(row.distinct_versions) }).toEqual({ object_id: row.object_id, events: Number(row.max_version), distinct: Number(row.max_version) });
  }

  let credited = 0;
  for (const order of world.orders) {
    const view = await getDeposit(app, order.id, world.owner);
    expect(view.status, `order ${order.id}`).toBe(order.status);
    if (view.status === 'settled') credited += view.credited_amount_minor ?? 0;
  }
  const balance = (await app.signed({ url: '/v1/pay/balance', credentials: world.owner })).json<{ available_minor: number; pending_clearing_minor: number }>();
  expect(balance.available_minor + balance.pending_clearing_minor).toBe(credited);
}

describe('review, reversal, dispute and clearing sequences', () => {
  it('keep the ledger fold, the withdrawal identity, one event per version and the model’s statuses', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArbitrary, { minLength: 3, maxLength: 12 }), async (commands) => {
        const world = await newWorld();
        const steps: string[] = [];
        try {
          for (const command of commands) {
            steps.push(await run(world, command));
            await checkInvariants(world);
          }
          if (process.env.REVIEW_MODEL_TRACE) process.stdout.write(`${steps.join(' | ')}\n`);
        } catch (error) {
          throw new Error(`steps run: ${steps.join(' | ')}\n${error instanceof Error ? error.message : String(error)}`);
        }
      }),
      {
        numRuns: 12,
        // One sequence that walks every kind of step whatever the random ones draw: a dispute won by the
        // withdrawer (a reversal), four eyes, a dispute decided by the deadline job, an escalation and a
        // rejection, and a dispute refused after the window and a reversal from available.
        examples: [
          [
            [
              { kind: 'pay', amount_minor: 12_000, shape: 'clean' },
              { kind: 'dispute', order: 0 },
              { kind: 'dispute', order: 0 },
              { kind: 'resolve', order: 0, outcome: 'withdrawer' },
              { kind: 'pay', amount_minor: FOUR_EYES_FROM_MINOR, shape: 'review' },
              { kind: 'approve', order: 1, reviewer: 0 },
              { kind: 'approve', order: 1, reviewer: 0 },
              { kind: 'approve', order: 1, reviewer: 1 },
              { kind: 'dispute', order: 1 },
              { kind: 'advance', hours: 80 },
              { kind: 'resolve', order: 1, outcome: 'withdrawer' },
              { kind: 'reverse', order: 1, reason: 0 },
              { kind: 'pay', amount_minor: 12_000, shape: 'short_review' },
              { kind: 'escalate', order: 2, reviewer: 1 },
              { kind: 'reject', order: 2, reviewer: 0 },
              { kind: 'approve', order: 2, reviewer: 1 },
              { kind: 'pay', amount_minor: 12_000, shape: 'clean' },
              { kind: 'advance', hours: 4 },
              { kind: 'dispute', order: 3 },
              { kind: 'advance', hours: 80 },
              { kind: 'reverse', order: 3, reason: 4 },
            ],
          ],
        ],
      },
    );
    // Twelve sequences of up to a dozen steps through HTTP and the worker: minutes on a busy machine.
  }, 240_000);
});
