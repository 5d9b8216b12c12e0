import { ApiError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, HOUR_MS, MINUTE_MS } from '../platform/time.ts';
import { computePreviousAttributes } from '../events/envelope.ts';
import type { EventCause } from '../platform/cause.ts';
import { accountOfContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import type { Queryable } from '../platform/db.ts';
import { replayOutOfOrderSchema } from './resources.ts';
import type { EventsService } from '../events/service.ts';
import type { Clock } from '../platform/clock.ts';

/**
 * POST /v1/test/webhooks/replay-out-of-order (sandbox only): writes the events of three test orders in
 * the wrong order, so that the outbox delivers them out of sequence and a merchant can prove that its
 * receiver applies an object only when its `version` is higher than the stored one (spec, cases A, B
 * and C). The test orders exist only in these events: they move no money, reserve nothing, and their
 * `metadata` says `test_scenario: replay_out_of_order` with the case, so a receiver can tell them apart.
 *
 *   A: `deposit.settled` (version 3) is delivered before `deposit.expired` (version 2): the order must stay settled.
 *   B: `deposit.reversed` (version 4) before `deposit.settled` (version 3): no credit, no release.
 *   C: `withdrawal.filled` versions 4, 2, 3: `remaining_minor` must be the version 4 value.
 */

type Snapshot = Record<string, unknown> & { id: string; version: number; object: string };

interface PlannedEvent {
  type: string;
  object: Snapshot;
  previous: Snapshot | null;
}

const SCENARIO = 'replay_out_of_order';

function depositSnapshots(id: string, testCase: 'A' | 'B', livemode: boolean, now: Date): Snapshot[] {
  const created = formatTimestamp(now);
  const expiresAt = formatTimestamp(new Date(now.getTime() + 15 * MINUTE_MS));
  const base = {
    id,
    object: 'deposit_order',
    merchant_reference: `replay-${testCase}-${id.slice(-8)}`,
    end_user_ref: 'replay-test-user',
    amount_minor: 10_000,
    currency: 'THB',
    created_at: created,
    expires_at: expiresAt,
    legs: [],
    sender: { bank_code: '002', account_number_masked: '******7890', account_name_th_masked: 'สม*** ใจ***' },
    metadata: { test_scenario: SCENARIO, case: testCase },
    livemode,
  };
  const settlement = {
    ordered_amount_minor: 10_000,
    transferred_amount_minor: 10_000,
    amount_received_minor: 10_000,
    overpayment: null,
    fee_total_minor: 161,
    fee_breakdown: [
      { component: 'processing_fee', amount_minor: 150, rate_bps: 150 },
      { component: 'fixed_fee', amount_minor: 0 },
      { component: 'vat', amount_minor: 11, rate_bps: 700 },
    ],
    credited_amount_minor: 9_839,
    partial: false,
    settled_via: 'auto',
    balance_transaction_id: null,
    settled_at: created,
    clearing_available_at: formatTimestamp(new Date(now.getTime() + 72 * HOUR_MS)),
  };
  return [
    { ...base, version: 1, status: 'awaiting_payment', is_terminal: false },
    { ...base, version: 2, status: testCase === 'A' ? 'expired' : 'slip_processing', is_terminal: false, ...(testCase === 'A' ? { expired_reason: 'no_payment', late_slip_accepted_until: formatTimestamp(new Date(now.getTime() + 15 * MINUTE_MS + 24 * HOUR_MS)) } : {}) },
    { ...base, version: 3, status: 'settled', is_terminal: false, ...settlement },
    { ...base, version: 4, status: 'reversed', is_terminal: true, ...settlement, clearing_available_at: null, reversal: { reason_code: 'BANK_RECALL', reverses_balance_transaction_id: null, balance_transaction_id: null, reversed_at: created } },
  ];
}

function withdrawalSnapshots(id: string, livemode: boolean, now: Date): Snapshot[] {
  const base = {
    id,
    object: 'withdrawal_order',
    merchant_reference: `replay-C-${id.slice(-8)}`,
    end_user_ref: 'replay-test-user',
    beneficiary_id: 'ben_replay_test',
    currency: 'THB',
    amount_total_minor: 30_000,
    fee_total_minor: 1_070,
    total_locked_minor: 31_070,
    max_splits: 10,
    expires_at: formatTimestamp(new Date(now.getTime() + 24 * HOUR_MS)),
    funds_on_hold: false,
    metadata: { test_scenario: SCENARIO, case: 'C' },
    livemode,
    created_at: formatTimestamp(now),
  };
  const fill = (sequence: number) => ({
    leg_ref: `wleg_replay_${sequence}`,
    sequence,
    amount_minor: 10_000,
    fee_recognized_minor: [356, 357, 357][sequence - 1],
    settled_at: formatTimestamp(now),
    balance_transaction_id: null,
    auto_confirm_at: formatTimestamp(new Date(now.getTime() + 3 * HOUR_MS)),
  });
  const at = (version: number, filled: number, recognized: number, status: string) => ({
    ...base,
    version,
    status,
    fee_recognized_minor: recognized,
    filled_minor: filled,
    reserved_minor: 0,
    remaining_minor: 30_000 - filled,
    settled_splits: filled / 10_000,
    ...(status === 'settled' ? { refunded_minor: 0, closed_at: formatTimestamp(now) } : {}),
    ...(filled > 0 ? { fill: fill(filled / 10_000) } : {}),
  });
  return [at(1, 0, 0, 'open'), at(2, 10_000, 356, 'partially_filled'), at(3, 20_000, 713, 'partially_filled'), at(4, 30_000, 1_070, 'settled')];
}

/** Writes the planned events in the order given; the outbox's sequence then carries that order to delivery. */
async function emitAll(db: Queryable, services: ReplayOutOfOrderRouteDependencies, account: { white_label_id: string; merchant_id: string; livemode: boolean }, cause: EventCause, planned: PlannedEvent[]): Promise<string[]> {
  const ids: string[] = [];
  for (const event of planned) {
    const envelope = await services.events.emitEvent(db, {
      ...account,
      type: event.type,
      object: event.object,
      previous_attributes: event.previous ? computePreviousAttributes(event.previous, event.object) : null,
      cause,
    });
    ids.push(envelope.id);
  }
  return ids;
}

/** What the out-of-order replay routes call. */
export interface ReplayOutOfOrderRouteDependencies {
  clock: Clock;
  events: EventsService;
}

/** The out-of-order replay routes, on the services they call. */
export function replayOutOfOrderRoutes(services: ReplayOutOfOrderRouteDependencies): RouteModule {
  return (registrar) => registerReplayOutOfOrderRoute(registrar, services);
}

function registerReplayOutOfOrderRoute(registrar: RouteRegistrar, services: ReplayOutOfOrderRouteDependencies): void {
  registrar.merchant({
    method: 'POST',
    url: '/v1/test/webhooks/replay-out-of-order',
    summary: 'Deliver events out of order (sandbox)',
    responses: { 202: { description: 'The three cases, their events and the state a receiver must end in.', schema: replayOutOfOrderSchema } },
    errors: ['resource_not_found'],
    scope: 'pay:write',
    async handler({ context, db }) {
      // Like every sandbox-only route, it does not exist for a live key.
      if (context.livemode) throw new ApiError('resource_not_found');
      const account = accountOfContext(context);
      const now = services.clock.now();
      const a = depositSnapshots(newId('deposit'), 'A', false, now);
      const b = depositSnapshots(newId('deposit'), 'B', false, now);
      const c = withdrawalSnapshots(newId('withdrawal'), false, now);
      const pick = (list: Snapshot[], version: number): Snapshot => {
        const found = list.find((snapshot) => snapshot.version === version);
        if (!found) throw new Error(`no version ${version}`);
        return found;
      };
      const cases = [
        {
          case: 'A',
          object_id: a[0]!.id,
          expected: { status: 'settled', version: 3 },
          events: [
            { type: 'deposit.created', object: pick(a, 1), previous: null },
            { type: 'deposit.settled', object: pick(a, 3), previous: pick(a, 2) },
            { type: 'deposit.expired', object: pick(a, 2), previous: pick(a, 1) },
          ],
        },
        {
          case: 'B',
          object_id: b[0]!.id,
          expected: { status: 'reversed', version: 4 },
          events: [
            { type: 'deposit.created', object: pick(b, 1), previous: null },
            { type: 'deposit.slip_received', object: pick(b, 2), previous: pick(b, 1) },
            { type: 'deposit.reversed', object: pick(b, 4), previous: pick(b, 3) },
            { type: 'deposit.settled', object: pick(b, 3), previous: pick(b, 2) },
          ],
        },
        {
          case: 'C',
          object_id: c[0]!.id,
          expected: { status: 'settled', version: 4, remaining_minor: 0 },
          events: [
            { type: 'withdrawal.created', object: pick(c, 1), previous: null },
            { type: 'withdrawal.filled', object: pick(c, 4), previous: pick(c, 3) },
            { type: 'withdrawal.filled', object: pick(c, 2), previous: pick(c, 1) },
            { type: 'withdrawal.filled', object: pick(c, 3), previous: pick(c, 2) },
          ],
        },
      ];
      const result = [];
      for (const testCase of cases) {
        const event_ids = await emitAll(db, services, account, context.cause, testCase.events);
        result.push({ case: testCase.case, object_id: testCase.object_id, event_ids, expected_final: testCase.expected });
      }
      return { status: 202, body: { object: 'webhook_replay_out_of_order', livemode: false, cases: result } };
    },
  });
}
