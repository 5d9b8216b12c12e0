import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError, fail, ok, type Result } from '../platform/errors.ts';
import type { EventCause } from '../platform/cause.ts';
import { applyTransition, TransitionTable } from '../events/transition.ts';
import { cancelJobsByKey, type JobSpec } from '../jobs/index.ts';
import { recognizeFee } from '../fees/service.ts';
import type { WithdrawalDependencies } from './dependencies.ts';
import { APPROVAL_TTL_TASK, EXPIRE_WITHDRAWAL_TASK } from './jobs.ts';
import * as repository from './repository.ts';
import * as refundsRepository from './refunds-repository.ts';
import { FINAL_WITHDRAWAL_STATUSES, WITHDRAWAL_STATUSES, type ClosedBy, type WithdrawalRow, type WithdrawalStatus } from './types.ts';
import { accountOf, withdrawalView, type WithdrawalView } from './views.ts';

/**
 * The state machine of a withdrawal order: its transition table, the event each trigger writes, the
 * invariants every row written keeps, and the one class that applies a transition or closes an order.
 */

/** The source every ledger movement of an order names. */
export const ORDER_SOURCE = 'withdrawal_order';

export const WITHDRAWAL_TRANSITIONS = new TransitionTable<WithdrawalStatus>('withdrawal_order', WITHDRAWAL_STATUSES, [
  { from: null, to: 'open', trigger: 'create' },
  { from: null, to: 'pending_approval', trigger: 'create' },
  { from: 'pending_approval', to: 'open', trigger: 'approve' },
  { from: 'pending_approval', to: 'rejected', trigger: 'reject' },
  { from: 'pending_approval', to: 'canceled', trigger: 'cancel' },
  { from: 'pending_approval', to: 'canceled', trigger: 'approval_ttl_expired' },
  { from: 'open', to: 'open', trigger: 'leg_reserved' },
  { from: 'partially_filled', to: 'partially_filled', trigger: 'leg_reserved' },
  { from: 'open', to: 'open', trigger: 'leg_released' },
  { from: 'partially_filled', to: 'partially_filled', trigger: 'leg_released' },
  // A leg released after expires_at leaves nothing in transfer: the order closes then.
  { from: 'open', to: 'expired', trigger: 'leg_released' },
  { from: 'partially_filled', to: 'expired', trigger: 'leg_released' },
  { from: 'open', to: 'partially_filled', trigger: 'fill' },
  { from: 'partially_filled', to: 'partially_filled', trigger: 'fill' },
  { from: 'open', to: 'settled', trigger: 'fill' },
  { from: 'partially_filled', to: 'settled', trigger: 'fill' },
  // The last leg in transfer filled after expires_at with something still unpaid: the order closes.
  { from: 'open', to: 'expired', trigger: 'fill' },
  { from: 'partially_filled', to: 'expired', trigger: 'fill' },
  { from: 'open', to: 'expired', trigger: 'expire' },
  { from: 'partially_filled', to: 'expired', trigger: 'expire' },
  { from: 'open', to: 'canceled', trigger: 'cancel' },
  { from: 'partially_filled', to: 'canceled', trigger: 'cancel' },
  // A reversed fill of a live order goes back into remaining and is matched again.
  { from: 'partially_filled', to: 'partially_filled', trigger: 'fill_reversed' },
  { from: 'partially_filled', to: 'open', trigger: 'fill_reversed' },
  { from: 'partially_filled', to: 'expired', trigger: 'fill_reversed' },
  // A reversed fill of a closed order is returned to the balance; a settled order gets a replacement.
  { from: 'settled', to: 'settled', trigger: 'fill_reversed' },
  { from: 'expired', to: 'expired', trigger: 'fill_reversed' },
  { from: 'canceled', to: 'canceled', trigger: 'fill_reversed' },
  // A dispute opened or resolved (src/disputes/service.ts): `version` moves, the status does not
  // (spec). Any order that has had a fill or a reservation can carry one.
  ...(['open', 'partially_filled', 'settled', 'expired', 'canceled'] as const).flatMap((status) => [
    { from: status, to: status, trigger: 'disputed' },
    { from: status, to: status, trigger: 'dispute_resolved' },
  ]),
]);

/** The event each trigger writes; closing triggers name the status they close into. */
export function eventTypeFor(trigger: string, to: WithdrawalStatus): string {
  switch (trigger) {
    case 'create':
      return 'withdrawal.created';
    case 'approve':
      return 'withdrawal.approved';
    case 'reject':
      return 'withdrawal.rejected';
    case 'cancel':
    case 'approval_ttl_expired':
      return 'withdrawal.canceled';
    case 'expire':
      return 'withdrawal.expired';
    case 'fill':
      return 'withdrawal.filled';
    case 'fill_reversed':
      return 'withdrawal.fill_reversed';
    case 'leg_reserved':
      return 'withdrawal.leg_reserved';
    case 'leg_released':
      return to === 'expired' ? 'withdrawal.expired' : 'withdrawal.leg_released';
    case 'disputed':
      return 'withdrawal.disputed';
    case 'dispute_resolved':
      return 'withdrawal.dispute_resolved';
    default:
      throw new Error(`no event for withdrawal trigger ${trigger}`);
  }
}

/**
 * The order's invariants, asserted on every row written: the spec's identity while the order is live, what
 * a closed order returned, the fee recognised in proportion to what was paid out, and what each status
 * allows. The database backs each with a CHECK (withdrawal_orders_rules_hold, migration 0032).
 */
export function assertOrderInvariants(row: WithdrawalRow): void {
  const id = row.withdrawal_id;
  invariant(row.filled_minor >= 0 && row.reserved_minor >= 0 && row.remaining_minor >= 0, `${id}: amounts are never negative`);
  invariant(row.fee_recognized_minor === recognizeFee(row.fee_total_minor, row.amount_total_minor, row.filled_minor), `${id}: fee recognised pro rata`);
  invariant(row.settled_splits >= 0 && row.settled_splits <= row.max_splits, `${id}: settled splits within max_splits`);
  const final = FINAL_WITHDRAWAL_STATUSES.has(row.status);
  invariant(final === (row.refunded_minor !== null) && final === (row.closed_at !== null), `${id}: refunded and closed exactly when final`);
  if (final) {
    // Nothing is open once the order is closed; what was locked was paid out, earned as fee, or returned.
    invariant(row.reserved_minor === 0 && row.remaining_minor === 0, `${id}: a closed order has nothing in transfer or open`);
    const refunded = row.refunded_minor ?? 0;
    invariant(row.amount_total_minor + row.fee_total_minor === row.filled_minor + row.fee_recognized_minor + refunded, `${id}: locked = paid + fee earned + refunded`);
  } else {
    invariant(row.amount_total_minor === row.filled_minor + row.reserved_minor + row.remaining_minor, `${id}: total = filled + reserved + remaining`);
  }
  if (row.status === 'pending_approval' || row.status === 'rejected') invariant(row.filled_minor === 0 && row.reserved_minor === 0, `${id}: nothing paid before approval`);
  if (row.status === 'open') invariant(row.filled_minor === 0, `${id}: open has no fill`);
  if (row.status === 'partially_filled') invariant(row.filled_minor > 0, `${id}: partially filled has a fill`);
  invariant((row.status === 'pending_approval') === (row.approval_expires_at !== null), `${id}: approval deadline exactly while pending`);
  invariant(!row.funds_on_hold || row.dispute !== null, `${id}: funds are held only for a dispute`);
}

/**
 * What closing a live order returns to the balance (the spec's wallet table: "Remainder plus unused fee
 * returns"): the principal never paid plus the fee not recognised. This is the `withdrawal_released` credit
 * and the order's `refunded_minor`.
 */
export function closingRefund(row: WithdrawalRow): number {
  invariant(row.reserved_minor === 0, 'an order closes with nothing in transfer');
  return row.remaining_minor + row.fee_total_minor - row.fee_recognized_minor;
}

/** What an order still holds in the wallet's reserved bucket: unpaid principal plus unrecognised fee. */
export function heldInWallet(row: WithdrawalRow): number {
  if (FINAL_WITHDRAWAL_STATUSES.has(row.status)) return 0;
  return row.remaining_minor + row.reserved_minor + row.fee_total_minor - row.fee_recognized_minor;
}

/**
 * Applies the transitions of orders, for every class of the module that changes one: each change of an
 * order's row goes through `apply`, and each close through `close`, so that the invariants, the event and
 * the money of a change are written the one way.
 */
export class OrderTransitions {
  constructor(private readonly deps: WithdrawalDependencies) {}

  /**
   * Applies one transition: asserts the new row's invariants, persists it where the stored version
   * is still the old one, writes the event and the follow-up jobs. `fill` adds the fill object to the
   * event (it is the same on both sides of previous_attributes, so it is not reported as changed).
   */
  async apply(
    tx: Queryable,
    input: { before: WithdrawalRow | null; after: WithdrawalRow; trigger: string; cause: EventCause; jobs?: JobSpec[]; event_extra?: Record<string, unknown> },
  ): Promise<Result<WithdrawalView>> {
    assertOrderInvariants(input.after);
    const beforeView = input.before ? withdrawalView(input.before) : null;
    const afterView = withdrawalView(input.after);
    const extra = input.event_extra;
    const result = await applyTransition(tx, this.deps, {
      table: WITHDRAWAL_TRANSITIONS,
      trigger: input.trigger,
      before: beforeView,
      after: afterView,
      persist: async (db) => {
        if (input.before) return repository.updateOrder(db, input.after, input.before.version);
        // The reference was free when the creation read it; a concurrent creation that took it since makes
        // the queued insert change nothing, and the flush throws this, rolling back the reservation with it.
        const reference = input.after.merchant_reference;
        await repository.insertOrder(db, input.after, () => new ApiError('merchant_reference_in_use', { details: { merchant_reference: reference } }));
        return true;
      },
      event: {
        type: eventTypeFor(input.trigger, input.after.status),
        ...accountOf(input.after),
        cause: input.cause,
        ...(extra ? { object: { ...afterView, ...extra }, ...(beforeView ? { before_object: { ...beforeView, ...extra } } : {}) } : {}),
      },
      ...(input.jobs ? { jobs: input.jobs } : {}),
    });
    if (!result.ok) return fail('withdrawal_state_conflict');
    return ok(result.view);
  }

  /**
   * Closes an order: whatever was never paid, plus the fee not recognised, returns from reserved to
   * available (`withdrawal_released`), `refunded_minor` is exactly that credit ("Amount returned to the
   * balance": remainder plus unused fee) and `remaining_minor` becomes 0, since nothing is open any more.
   */
  async close(
    tx: Queryable,
    before: WithdrawalRow,
    after: WithdrawalRow,
    close: { status: 'expired' | 'canceled' | 'rejected'; trigger: string; reason_code: string; closed_by: ClosedBy; note?: string | null },
    cause: EventCause,
    event_extra?: Record<string, unknown>,
  ): Promise<Result<WithdrawalView>> {
    invariant(after.reserved_minor === 0, 'an order closes with nothing in transfer');
    const now = this.deps.clock.now();
    const release = closingRefund(after);
    let releaseId: string | null = null;
    if (release > 0) {
      const released = await this.deps.ledger.post(tx, {
        account: accountOf(after),
        type: 'withdrawal_released',
        amount_minor: release,
        bucket_from: 'reserved',
        bucket_to: 'available',
        movement_key: `withdrawal_released:${after.withdrawal_id}`,
        source: { type: ORDER_SOURCE, id: after.withdrawal_id },
        cause,
      });
      invariant(released.ok, 'a release into available cannot be refused');
      // The credit and refunded_minor are one number: a movement posted before under this key must agree too.
      invariant(released.value.amount_minor === release, `${after.withdrawal_id}: the release credit is what refunded_minor says`);
      releaseId = released.value.id;
    }
    // A refund closed with principal unpaid gives that part of its claim on the deposit back, so the merchant may
    // refund it again (after the wallet: the allowance is the last lock of the lock order).
    if (after.refund_of_deposit_id !== null && after.remaining_minor > 0) {
      await refundsRepository.adjustRefundCommitment(tx, after.white_label_id, after.refund_of_deposit_id, -after.remaining_minor, now);
    }
    await cancelJobsByKey(tx, `${EXPIRE_WITHDRAWAL_TASK}:${after.withdrawal_id}`);
    await cancelJobsByKey(tx, `${APPROVAL_TTL_TASK}:${after.withdrawal_id}`);
    return this.apply(tx, {
      before,
      after: {
        ...after,
        status: close.status,
        remaining_minor: 0,
        refunded_minor: release,
        approval_expires_at: null,
        close_reason_code: close.reason_code,
        closed_by: close.closed_by,
        review_note: close.note ?? after.review_note,
        release_balance_transaction_id: releaseId,
        closed_at: now,
        updated_at: now,
      },
      trigger: close.trigger,
      cause,
      ...(event_extra ? { event_extra } : {}),
    });
  }
}
