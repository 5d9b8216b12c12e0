import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError, fail, ok, unwrap, type Result } from '../platform/errors.ts';
import type { Actor } from '../platform/access.ts';
import type { AuditTrail } from '../platform/audit.ts';
import { holdsLock, takeCarried } from '../platform/unit-of-work.ts';
import type { CarriedRead, ReadPart } from '../platform/read-part.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, HOUR_MS, SECOND_MS } from '../platform/time.ts';
import { type EventsService } from '../events/service.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { applyTransition, TransitionTable } from '../events/transition.ts';
import { cancelJobsByKey, scheduleJob, unscheduleJob, type JobHandler, type JobSpec } from '../jobs/index.ts';
import type { LedgerService, PostInput } from '../ledger/service.ts';
import { recognizeFee, recognizeFill, type FeeComputation, type FeeService } from '../fees/service.ts';
import type { BeneficiaryService, Payee } from '../beneficiaries/service.ts';
import type { WithdrawalScenariosFor } from './scenario-hooks.ts';
import * as repository from './repository.ts';
import type { WithdrawalPolicyService } from './policy.ts';
import {
  FINAL_WITHDRAWAL_STATUSES,
  WITHDRAWAL_STATUSES,
  type ClosedBy,
  type DisputeSnapshot,
  type FeeBreakdownItem,
  type ReceiptState,
  type WithdrawalAccount,
  type WithdrawalLegRow,
  type WithdrawalRow,
  type WithdrawalStatus,
} from './types.ts';

/**
 * Withdrawal orders: the payout side. Creation locks amount plus fee in the merchant's wallet
 * (`withdrawal_reserved`); deposits then pay the order in chunks through the leg functions here
 * (reserve a leg, release it, record its fill, reverse a fill), which the deposit side calls and
 * which are the only way an order's amounts change. Every change goes through `applyTransition` with
 * WITHDRAWAL_TRANSITIONS, asserts the order's invariants, and moves money only through the ledger.
 */

export const EXPIRE_WITHDRAWAL_TASK = 'withdrawals.expire';
export const APPROVAL_TTL_TASK = 'withdrawals.approval_ttl';
export const AUTO_CONFIRM_FILL_TASK = 'withdrawals.auto_confirm_fill';
/** Receipt of a fill is assumed this long after it settles unless the withdrawer disputes it (spec, Limits). */
export const FILL_AUTO_CONFIRM_MS = 3 * HOUR_MS;
/** What a cancel refused for a pending fill tells the caller to wait: about one leg's transfer window. */
export const PENDING_FILL_RETRY_AFTER_SECONDS = 60;

const ORDER_SOURCE = 'withdrawal_order';

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
  // A dispute opened or resolved (src/withdrawals/disputes.ts): `version` moves, the status does not
  // (spec). Any order that has had a fill or a reservation can carry one.
  ...(['open', 'partially_filled', 'settled', 'expired', 'canceled'] as const).flatMap((status) => [
    { from: status, to: status, trigger: 'disputed' },
    { from: status, to: status, trigger: 'dispute_resolved' },
  ]),
]);

/** The event each trigger writes; closing triggers name the status they close into. */
function eventTypeFor(trigger: string, to: WithdrawalStatus): string {
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

export interface FillView {
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  fee_recognized_minor: number;
  settled_at: string;
  balance_transaction_id: string;
  auto_confirm_at: string;
  receipt_state?: ReceiptState;
}

// A type alias (not an interface) so that it satisfies VersionedView's index signature.
export type WithdrawalView = {
  id: string;
  object: 'withdrawal_order';
  version: number;
  status: WithdrawalStatus;
  merchant_reference: string;
  end_user_ref: string;
  beneficiary_id: string;
  currency: 'THB';
  amount_total_minor: number;
  fee_total_minor: number;
  total_locked_minor: number;
  fee_breakdown: FeeBreakdownItem[];
  fee_recognized_minor: number;
  filled_minor: number;
  reserved_minor: number;
  remaining_minor: number;
  refunded_minor?: number;
  settled_splits: number;
  max_splits: number;
  expires_at: string;
  approval_expires_at?: string;
  dispute?: DisputeSnapshot;
  funds_on_hold: boolean;
  refund_of_deposit_id?: string;
  replacement_of_withdrawal_id?: string;
  cancel_reason_code?: string;
  canceled_by?: ClosedBy;
  /** Why the order was rejected; the reviewer's note is internal and never part of it (spec). */
  rejection?: { code: string };
  metadata?: Record<string, string>;
  livemode: boolean;
  created_at: string;
  closed_at?: string;
  fills?: FillView[];
};

export function fillView(leg: WithdrawalLegRow, withReceiptState: boolean): FillView {
  invariant(leg.sequence !== null && leg.settled_at && leg.balance_transaction_id && leg.auto_confirm_at && leg.fee_recognized_minor !== null, 'a fill has its settlement facts');
  return {
    leg_ref: leg.leg_ref,
    sequence: leg.sequence,
    amount_minor: leg.amount_minor,
    fee_recognized_minor: leg.fee_recognized_minor,
    settled_at: formatTimestamp(leg.settled_at),
    balance_transaction_id: leg.balance_transaction_id,
    auto_confirm_at: formatTimestamp(leg.auto_confirm_at),
    ...(withReceiptState && leg.receipt_state ? { receipt_state: leg.receipt_state } : {}),
  };
}

/** The order as the API and events show it (without `fills`, which only GET adds). */
export function withdrawalView(row: WithdrawalRow): WithdrawalView {
  // Built in the spec's field order; optional keys are absent (not null) when they do not apply.
  return {
    id: row.withdrawal_id,
    object: 'withdrawal_order',
    version: row.version,
    status: row.status,
    merchant_reference: row.merchant_reference,
    end_user_ref: row.end_user_ref,
    beneficiary_id: row.beneficiary_id,
    currency: 'THB',
    amount_total_minor: row.amount_total_minor,
    fee_total_minor: row.fee_total_minor,
    total_locked_minor: row.amount_total_minor + row.fee_total_minor,
    fee_breakdown: row.fee_breakdown,
    fee_recognized_minor: row.fee_recognized_minor,
    filled_minor: row.filled_minor,
    reserved_minor: row.reserved_minor,
    remaining_minor: row.remaining_minor,
    ...(row.refunded_minor !== null ? { refunded_minor: row.refunded_minor } : {}),
    settled_splits: row.settled_splits,
    max_splits: row.max_splits,
    expires_at: formatTimestamp(row.expires_at),
    ...(row.approval_expires_at ? { approval_expires_at: formatTimestamp(row.approval_expires_at) } : {}),
    ...(row.dispute ? { dispute: row.dispute } : {}),
    funds_on_hold: row.funds_on_hold,
    ...(row.refund_of_deposit_id ? { refund_of_deposit_id: row.refund_of_deposit_id } : {}),
    ...(row.replacement_of_withdrawal_id ? { replacement_of_withdrawal_id: row.replacement_of_withdrawal_id } : {}),
    ...(row.status === 'canceled' ? { cancel_reason_code: row.close_reason_code ?? 'canceled', ...(row.closed_by ? { canceled_by: row.closed_by } : {}) } : {}),
    ...(row.status === 'rejected' ? { rejection: { code: row.close_reason_code ?? 'approval_rejected' } } : {}),
    ...(row.metadata ? { metadata: row.metadata } : {}),
    livemode: row.livemode,
    created_at: formatTimestamp(row.created_at),
    ...(row.closed_at ? { closed_at: formatTimestamp(row.closed_at) } : {}),
  };
}

/**
 * The order's invariants, asserted on every row written: the spec's identity, the fee recognised in
 * proportion to what was paid out, and what each status allows. The database backs each with a CHECK.
 */
export function assertOrderInvariants(row: WithdrawalRow): void {
  const id = row.withdrawal_id;
  invariant(row.filled_minor >= 0 && row.reserved_minor >= 0 && row.remaining_minor >= 0, `${id}: amounts are never negative`);
  invariant(row.amount_total_minor === row.filled_minor + row.reserved_minor + row.remaining_minor, `${id}: total = filled + reserved + remaining`);
  invariant(row.fee_recognized_minor === recognizeFee(row.fee_total_minor, row.amount_total_minor, row.filled_minor), `${id}: fee recognised pro rata`);
  invariant(row.settled_splits >= 0 && row.settled_splits <= row.max_splits, `${id}: settled splits within max_splits`);
  const final = FINAL_WITHDRAWAL_STATUSES.has(row.status);
  invariant(final === (row.refunded_minor !== null) && final === (row.closed_at !== null), `${id}: refunded and closed exactly when final`);
  if (final) invariant(row.reserved_minor === 0 && row.refunded_minor === row.remaining_minor, `${id}: a closed order returned what it never paid`);
  if (row.status === 'pending_approval' || row.status === 'rejected') invariant(row.filled_minor === 0 && row.reserved_minor === 0, `${id}: nothing paid before approval`);
  if (row.status === 'open') invariant(row.filled_minor === 0, `${id}: open has no fill`);
  if (row.status === 'partially_filled') invariant(row.filled_minor > 0, `${id}: partially filled has a fill`);
  invariant((row.status === 'pending_approval') === (row.approval_expires_at !== null), `${id}: approval deadline exactly while pending`);
  invariant(!row.funds_on_hold || row.dispute !== null, `${id}: funds are held only for a dispute`);
}

/** What an order still holds in the wallet's reserved bucket: unpaid principal plus unrecognised fee. */
export function heldInWallet(row: WithdrawalRow): number {
  if (FINAL_WITHDRAWAL_STATUSES.has(row.status)) return 0;
  return row.remaining_minor + row.reserved_minor + row.fee_total_minor - row.fee_recognized_minor;
}

export interface CreateWithdrawalInput {
  amount_minor: number;
  merchant_reference: string;
  end_user_ref: string;
  beneficiary_id: string;
  metadata?: Record<string, string> | undefined;
  client?: Record<string, string | undefined> | undefined;
  refund_of_deposit_id?: string | undefined;
}

export interface LegReservation {
  leg_ref: string;
  withdrawal_id: string;
  /** The withdrawing merchant, whose beneficiary receives the transfer. */
  merchant_id: string;
  beneficiary_id: string;
  amount_minor: number;
  status: WithdrawalLegRow['status'];
}

export interface FillOutcome {
  fill: FillView;
  withdrawal: WithdrawalView;
}

export interface FillReversalOutcome {
  withdrawal: WithdrawalView;
  /** The order created to pay a reversed fill of a settled order again; null otherwise. */
  replacement_withdrawal_id: string | null;
}

export interface WithdrawalDependencies {
  events: EventsService;
  clock: Clock;
  ledger: LedgerService;
  fees: FeeService;
  beneficiaries: BeneficiaryService;
  policies: WithdrawalPolicyService;
  /** The brand's merchants the service runs itself, whose orders the back office never reaches (tenancy). */
  service_owned_merchants: (db: Queryable, white_label_id: string) => Promise<readonly string[]>;
  /** For the back office's decisions, each with its audit row in one transaction. */
  database: Database;
  audit: AuditTrail;
  /** Where a test-mode order's sandbox scenario acts; live orders get hooks that do nothing. */
  scenarios: WithdrawalScenariosFor;
}

function legReservation(leg: WithdrawalLegRow, order: Pick<WithdrawalRow, 'beneficiary_id'>): LegReservation {
  return {
    leg_ref: leg.leg_ref,
    withdrawal_id: leg.withdrawal_id,
    merchant_id: leg.merchant_id,
    beneficiary_id: order.beneficiary_id,
    amount_minor: leg.amount_minor,
    status: leg.status,
  };
}

function accountOf(row: WithdrawalAccount): WithdrawalAccount {
  return { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
}

/** A deadline of one thing: one pending job per task and id (`job_key`), with ids only in its payload. */
function deadlineJob(task: string, white_label_id: string, target: { withdrawal_id: string } | { leg_ref: string }, run_at: Date): JobSpec {
  const id = 'withdrawal_id' in target ? target.withdrawal_id : target.leg_ref;
  return { task, payload: { white_label_id, ...target }, run_at, job_key: `${task}:${id}`, white_label_id };
}

function expireJob(row: WithdrawalRow): JobSpec {
  return deadlineJob(EXPIRE_WITHDRAWAL_TASK, row.white_label_id, { withdrawal_id: row.withdrawal_id }, row.expires_at);
}

function approvalTtlJob(row: WithdrawalRow): JobSpec {
  invariant(row.approval_expires_at, 'an approval deadline exists while pending');
  return deadlineJob(APPROVAL_TTL_TASK, row.white_label_id, { withdrawal_id: row.withdrawal_id }, row.approval_expires_at);
}

function autoConfirmJob(leg: WithdrawalLegRow): JobSpec {
  invariant(leg.auto_confirm_at, 'a fill has its auto-confirm time');
  return deadlineJob(AUTO_CONFIRM_FILL_TASK, leg.white_label_id, { leg_ref: leg.leg_ref }, leg.auto_confirm_at);
}

/** A withdrawal the matcher may reserve from: enough to plan legs and to lock its owner's event feed. */
export interface MatchableWithdrawal {
  id: string;
  /** The withdrawing merchant, whose feed the reservation writes to. */
  merchant_id: string;
  remaining_minor: number;
  /** The order's beneficiary: whom a leg of it pays (its payee can be read before the leg is reserved). */
  beneficiary_id: string;
}

/** Where a creation's carried first read is kept: the reference and amount it was read for are part of the key. */
function creationReadKey(account: WithdrawalAccount, input: Pick<CreateWithdrawalInput, 'merchant_reference' | 'amount_minor'>): string {
  return `withdrawals:creation-context:${account.white_label_id}:${account.merchant_id}:${account.livemode}:${input.amount_minor}:${input.merchant_reference}`;
}

/** The movement keys of a leg's fill, which make it happen once: its payout and its share of the fee (`recordFill`). */
function fillMovementKeys(leg_ref: string): { payout: string; fee: string } {
  return { payout: `withdrawal_settled:${leg_ref}`, fee: `fee:${leg_ref}` };
}

export class WithdrawalService {
  constructor(private readonly deps: WithdrawalDependencies) {}

  /**
   * True when an order belongs to a merchant the service runs itself. Such an order answers 404 on every
   * back-office route, as the merchant does (tenancy's lookups skip `system_owned`), so that no operator
   * reads, approves or rejects what only the sandbox may act on, nor learns its state from an error.
   */
  private async hiddenFromBackOffice(db: Queryable, row: Pick<WithdrawalRow, 'white_label_id' | 'merchant_id'>): Promise<boolean> {
    return (await this.deps.service_owned_merchants(db, row.white_label_id)).includes(row.merchant_id);
  }

  /**
   * Applies one transition: asserts the new row's invariants, persists it where the stored version
   * is still the old one, writes the event and the follow-up jobs. `fill` adds the fill object to the
   * event (it is the same on both sides of previous_attributes, so it is not reported as changed).
   */
  private async transition(
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

  // -------------------------------------------------------------------------------------------------
  // Creation, reading, approval, cancel, expiry

  /**
   * Creates an order: fee locked from the schedule of this moment, amount plus fee moved from
   * available to reserved, status `open` or `pending_approval` by the brand's policy. Returns
   * `insufficient_balance` (nothing created, nothing locked) or `merchant_reference_in_use`.
   * The beneficiary must be the caller's and verified; the route checks that before calling.
   */
  /**
   * A sandbox scenario's 402 `insufficient_balance` (113.00 THB), which a merchant must handle whatever its
   * balance and whatever the state of the beneficiary (so the creation route asks this before it looks at
   * the beneficiary), with the balance's real figures. Null for every other amount and in live mode.
   */
  async sandboxScenarioRefusal(tx: Queryable, account: WithdrawalAccount, amount_minor: number): Promise<Result<never> | null> {
    if (!this.deps.scenarios(account.livemode).refusesAsInsufficient(amount_minor)) return null;
    const fee = await this.deps.fees.quote(tx, { ...account, channel: 'withdrawal' }, amount_minor);
    const balance = await this.deps.ledger.balance(tx, account);
    const pendingAt = await this.deps.ledger.nextClearingAt(tx, account);
    return fail('insufficient_balance', {
      details: {
        available_minor: balance.available_minor,
        required_minor: amount_minor + fee.fee_total_minor,
        pending_clearing_minor: balance.pending_clearing_minor,
        pending_clearing_available_at: pendingAt ? formatTimestamp(pendingAt) : null,
      },
    });
  }

  private creationContextPart(account: WithdrawalAccount, input: Pick<CreateWithdrawalInput, 'merchant_reference' | 'amount_minor'>, replacement: boolean): ReadPart<repository.CreationContext<FeeComputation>> {
    return repository.creationContextPart(account, input.merchant_reference, replacement ? null : this.deps.fees.quotePart({ ...account, channel: 'withdrawal' }, input.amount_minor));
  }

  /** The first read of a merchant's creation (`create`), for the request's idempotency statement to carry (src/platform/read-part.ts). */
  creationRead(account: WithdrawalAccount, input: Pick<CreateWithdrawalInput, 'merchant_reference' | 'amount_minor'>): CarriedRead {
    return { key: creationReadKey(account, input), part: this.creationContextPart(account, input, false) };
  }

  async create(
    tx: Queryable,
    account: WithdrawalAccount,
    input: CreateWithdrawalInput,
    cause: EventCause,
    options: {
      /** Set when the order pays again a reversed fill of a settled order: the service's own order, not
       * a new request, so it skips the amount range, approval, the sandbox 402 and the fee. */
      replacement_of_withdrawal_id?: string | null;
      /** The sandbox counterparty's standing liquidity: skips the amount range, approval and the sandbox 402. */
      sandbox_liquidity?: boolean;
    } = {},
  ): Promise<Result<WithdrawalView>> {
    const now = this.deps.clock.now();
    const replacement_of_withdrawal_id = options.replacement_of_withdrawal_id ?? null;
    const replacement = replacement_of_withdrawal_id !== null;
    const internal = replacement || options.sandbox_liquidity === true;
    invariant(!options.sandbox_liquidity || !account.livemode, 'sandbox liquidity exists in test mode only');
    // The policy, the reference and the fee quote are read in one round trip, carried by the request's
    // idempotency statement when it came through HTTP (`creationRead`); a replacement pays no fee.
    const carriedContext = replacement ? ({ found: false } as const) : takeCarried(tx, creationReadKey(account, input));
    const context = carriedContext.found
      ? (carriedContext.value as repository.CreationContext<FeeComputation>)
      : await repository.readCreationContext(tx, this.creationContextPart(account, input, replacement));
    const policy = this.deps.policies.fromRow(context.policy);
    if (!internal && (input.amount_minor < policy.min_amount_minor || input.amount_minor > policy.max_amount_minor)) {
      return fail('amount_not_supported', { details: { min_minor: policy.min_amount_minor, max_minor: policy.max_amount_minor } });
    }
    if (context.reference_taken) {
      return fail('merchant_reference_in_use', { details: { merchant_reference: input.merchant_reference } });
    }
    if (input.refund_of_deposit_id && (await repository.findOpenRefund(tx, account.white_label_id, input.refund_of_deposit_id))) {
      return fail('refund_already_open', { details: { refund_of_deposit_id: input.refund_of_deposit_id } });
    }
    const fee = replacement
      ? {
          fee_total_minor: 0,
          fee_breakdown: [
            { component: 'processing_fee', amount_minor: 0, rate_bps: 0 },
            { component: 'fixed_fee', amount_minor: 0 },
            { component: 'vat', amount_minor: 0, rate_bps: 0 },
          ],
        }
      : context.carried;
    invariant(fee !== null, 'a creation that pays a fee has its quote');
    const withdrawal_id = newId('withdrawal');
    const locked = input.amount_minor + fee.fee_total_minor;
    invariant(Number.isSafeInteger(locked), 'amount plus fee is a safe integer');

    if (!internal) {
      const scenario = await this.sandboxScenarioRefusal(tx, account, input.amount_minor);
      if (scenario) return scenario;
    }
    const reserved = await this.deps.ledger.post(tx, {
      account,
      type: 'withdrawal_reserved',
      amount_minor: locked,
      bucket_from: 'available',
      bucket_to: 'reserved',
      movement_key: `withdrawal_reserved:${withdrawal_id}`,
      source: { type: ORDER_SOURCE, id: withdrawal_id },
      cause,
    });
    if (!reserved.ok) return reserved;

    const needsApproval = !internal && policy.approval_threshold_minor !== null && input.amount_minor >= policy.approval_threshold_minor;
    const approvalExpiresAt = needsApproval ? new Date(now.getTime() + policy.approval_ttl_seconds * SECOND_MS) : null;
    const expiresAt = new Date((approvalExpiresAt ?? now).getTime() + policy.expires_in_seconds * SECOND_MS);
    const client = input.client ? (Object.fromEntries(Object.entries(input.client).filter(([, value]) => value !== undefined)) as Record<string, string>) : null;
    const row: WithdrawalRow = {
      ...account,
      withdrawal_id,
      version: 1,
      status: needsApproval ? 'pending_approval' : 'open',
      merchant_reference: input.merchant_reference,
      end_user_ref: input.end_user_ref,
      beneficiary_id: input.beneficiary_id,
      amount_total_minor: input.amount_minor,
      fee_total_minor: fee.fee_total_minor,
      fee_breakdown: fee.fee_breakdown,
      fee_recognized_minor: 0,
      filled_minor: 0,
      reserved_minor: 0,
      remaining_minor: input.amount_minor,
      refunded_minor: null,
      settled_splits: 0,
      max_splits: policy.max_splits,
      expires_at: expiresAt,
      approval_expires_at: approvalExpiresAt,
      refund_of_deposit_id: input.refund_of_deposit_id ?? null,
      replacement_of_withdrawal_id,
      metadata: input.metadata ?? null,
      client,
      close_reason_code: null,
      closed_by: null,
      review_note: null,
      reserve_balance_transaction_id: reserved.value.id,
      release_balance_transaction_id: null,
      created_at: now,
      updated_at: now,
      closed_at: null,
      dispute: null,
      funds_on_hold: false,
    };
    const created = await this.transition(tx, {
      before: null,
      after: row,
      trigger: 'create',
      cause,
      // Sandbox scenario 107.00 THB: the counterparty's deposits fill a merchant's order in three chunks.
      jobs: [needsApproval ? approvalTtlJob(row) : expireJob(row), ...(internal ? [] : this.deps.scenarios(row.livemode).afterCreation(row))],
    });
    // A creation has no version to lose; a reference taken meanwhile is thrown by the insert's flush.
    invariant(created.ok, 'a creation transition always persists');
    return created;
  }

  /** The caller's own order with its settled fills, or null. */
  async get(db: Queryable, account: WithdrawalAccount, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.findOrder(db, account, withdrawal_id);
    if (!row) return null;
    const fills = await repository.listFills(db, row.white_label_id, row.withdrawal_id);
    return { ...withdrawalView(row), fills: fills.map((leg) => fillView(leg, true)) };
  }

  private async lockOwnOrder(tx: Queryable, account: WithdrawalAccount, withdrawal_id: string): Promise<WithdrawalRow | null> {
    const row = await repository.lockOrderInBrand(tx, account.white_label_id, withdrawal_id);
    if (!row || row.merchant_id !== account.merchant_id || row.livemode !== account.livemode) return null;
    return row;
  }

  /**
   * Closes an order: whatever was never paid, plus the fee not recognised, returns from reserved to
   * available (`withdrawal_released`), and `refunded_minor` records the unpaid principal.
   */
  private async close(
    tx: Queryable,
    before: WithdrawalRow,
    after: WithdrawalRow,
    close: { status: 'expired' | 'canceled' | 'rejected'; trigger: string; reason_code: string; closed_by: ClosedBy; note?: string | null },
    cause: EventCause,
    event_extra?: Record<string, unknown>,
  ): Promise<Result<WithdrawalView>> {
    invariant(after.reserved_minor === 0, 'an order closes with nothing in transfer');
    const now = this.deps.clock.now();
    const release = after.remaining_minor + after.fee_total_minor - after.fee_recognized_minor;
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
      releaseId = released.value.id;
    }
    await cancelJobsByKey(tx, `${EXPIRE_WITHDRAWAL_TASK}:${after.withdrawal_id}`);
    await cancelJobsByKey(tx, `${APPROVAL_TTL_TASK}:${after.withdrawal_id}`);
    return this.transition(tx, {
      before,
      after: {
        ...after,
        status: close.status,
        refunded_minor: after.remaining_minor,
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

  /**
   * Cancels an order for the merchant: 409 `withdrawal_has_pending_fill` while any part is being
   * transferred, 409 `withdrawal_not_cancelable` once closed. Returns null for an unknown id.
   */
  async cancel(tx: Queryable, account: WithdrawalAccount, withdrawal_id: string, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    const row = await this.lockOwnOrder(tx, account, withdrawal_id);
    if (!row) return null;
    if (FINAL_WITHDRAWAL_STATUSES.has(row.status)) return fail('withdrawal_not_cancelable', { details: { status: row.status } });
    if (row.reserved_minor > 0) {
      return fail('withdrawal_has_pending_fill', {
        retry_after_seconds: PENDING_FILL_RETRY_AFTER_SECONDS,
        details: { reserved_minor: row.reserved_minor, retry_after_seconds: PENDING_FILL_RETRY_AFTER_SECONDS },
      });
    }
    return this.close(tx, row, { ...row, version: row.version + 1 }, { status: 'canceled', trigger: 'cancel', reason_code: 'merchant_request', closed_by: 'merchant' }, cause);
  }

  /** Approves an order waiting for approval: it enters the matching queue with a fresh expiry. */
  async approve(tx: Queryable, white_label_id: string, withdrawal_id: string, note: string | null, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    // The owner is judged before the state, so that a hidden order's state never shows in an error.
    if (!row || (await this.hiddenFromBackOffice(tx, row))) return null;
    if (row.status !== 'pending_approval') return fail('withdrawal_not_pending_approval', { details: { status: row.status } });
    const now = this.deps.clock.now();
    // Past its approval deadline the order is being canceled (its job may just be late): too late to approve.
    if (row.approval_expires_at && row.approval_expires_at.getTime() <= now.getTime()) {
      return fail('withdrawal_not_pending_approval', { details: { status: row.status, reason: 'approval_ttl_expired' } });
    }
    const policy = await this.deps.policies.policyFor(tx, row.white_label_id, row.livemode);
    const after: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      status: 'open',
      approval_expires_at: null,
      expires_at: new Date(now.getTime() + policy.expires_in_seconds * SECOND_MS),
      review_note: note,
      updated_at: now,
    };
    await cancelJobsByKey(tx, `${APPROVAL_TTL_TASK}:${row.withdrawal_id}`);
    return this.transition(tx, { before: row, after, trigger: 'approve', cause, jobs: [expireJob(after)] });
  }

  /**
   * The back office's decision on an order waiting for approval, with its audit row, in one transaction.
   * Null for an order the back office may not reach; a refusal throws its catalogue error and nothing is
   * written (the transaction rolls back).
   */
  decideApprovalByStaff(input: {
    white_label_id: string;
    withdrawal_id: string;
    decision: 'approve' | 'reject';
    note: string | null;
    actor: Actor;
    cause: EventCause;
  }): Promise<WithdrawalView | null> {
    return this.deps.database.transaction(async (tx) => {
      const result =
        input.decision === 'approve'
          ? await this.approve(tx, input.white_label_id, input.withdrawal_id, input.note, input.cause)
          : await this.reject(tx, input.white_label_id, input.withdrawal_id, input.note ?? '', input.cause);
      if (!result) return null;
      const view = unwrap(result);
      const action = input.decision === 'approve' ? 'withdrawal.approved' : 'withdrawal.rejected';
      await this.deps.audit.audit(tx, input.actor, input.white_label_id, action, 'withdrawal_order', view.id, { note: input.note });
      return view;
    });
  }

  /** Rejects an order waiting for approval: the full amount and fee return to available. */
  async reject(tx: Queryable, white_label_id: string, withdrawal_id: string, note: string, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!row || (await this.hiddenFromBackOffice(tx, row))) return null;
    if (row.status !== 'pending_approval') return fail('withdrawal_not_pending_approval', { details: { status: row.status } });
    return this.close(tx, row, { ...row, version: row.version + 1 }, { status: 'rejected', trigger: 'reject', reason_code: 'approval_rejected', closed_by: 'operator', note }, cause);
  }

  /** The approval deadline job: an order still waiting is canceled with `approval_ttl_expired`. */
  async expireApproval(tx: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!row || row.status !== 'pending_approval' || !row.approval_expires_at) return null;
    if (row.approval_expires_at.getTime() > this.deps.clock.now().getTime()) return null;
    const result = await this.close(
      tx,
      row,
      { ...row, version: row.version + 1 },
      { status: 'canceled', trigger: 'approval_ttl_expired', reason_code: 'approval_ttl_expired', closed_by: 'system' },
      SYSTEM_CAUSE,
    );
    invariant(result.ok, 'a locked order closes');
    return result.value;
  }

  /**
   * The expiry job: an open order past `expires_at` leaves the matching queue and returns its
   * remainder. While a leg is in transfer the order stays as it is; the leg's release or fill closes it.
   */
  async expire(tx: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!row || (row.status !== 'open' && row.status !== 'partially_filled')) return null;
    if (row.expires_at.getTime() > this.deps.clock.now().getTime() || row.reserved_minor > 0) return null;
    const result = await this.close(
      tx,
      row,
      { ...row, version: row.version + 1 },
      { status: 'expired', trigger: 'expire', reason_code: 'expired', closed_by: 'system' },
      SYSTEM_CAUSE,
    );
    invariant(result.ok, 'a locked order closes');
    return result.value;
  }

  /** True when a live order has passed its expiry with nothing in transfer: it must close now. */
  private dueToClose(row: WithdrawalRow): boolean {
    return (
      (row.status === 'open' || row.status === 'partially_filled') &&
      row.reserved_minor === 0 &&
      row.remaining_minor > 0 &&
      row.expires_at.getTime() <= this.deps.clock.now().getTime()
    );
  }

  // -------------------------------------------------------------------------------------------------
  // The functions the deposit side calls. Each is atomic in the caller's transaction and idempotent.

  /**
   * Live orders of the brand and environment that can take a leg of at least `amount_minor` now,
   * oldest first (or largest remaining first, for splitting a deposit into few legs), locked with
   * SKIP LOCKED for the caller's transaction. `exclude_merchant_id` keeps a merchant from paying itself.
   */
  async findMatchable(
    tx: Queryable,
    input: { white_label_id: string; livemode: boolean; amount_minor: number; exclude_merchant_id: string | null; limit?: number; largest_first?: boolean },
    /** The caller's reads that ride on the candidate statement, kept for it when a candidate is found (src/platform/read-part.ts). */
    carried: readonly CarriedRead[] = [],
  ): Promise<MatchableWithdrawal[]> {
    const rows = await repository.lockMatchable(
      tx,
      {
        ...input,
        largest_first: input.largest_first ?? false,
        now: this.deps.clock.now(),
        limit: Math.min(Math.max(input.limit ?? 1, 1), 50),
      },
      carried,
    );
    return rows.map((row) => ({ id: row.withdrawal_id, merchant_id: row.merchant_id, remaining_minor: row.remaining_minor, beneficiary_id: row.beneficiary_id }));
  }

  /**
   * Reserves `amount_minor` of an order for one deposit leg (`deposit_leg_key` is the deposit side's
   * key of that leg, and makes the call idempotent). Refused with `withdrawal_state_conflict` when the
   * order is not live, expired, has too little remaining or no split left.
   */
  async reserveLeg(
    tx: Queryable,
    input: {
      white_label_id: string;
      livemode: boolean;
      withdrawal_id: string;
      deposit_id: string;
      deposit_leg_key: string;
      amount_minor: number;
      cause: EventCause;
      /**
       * True when the caller minted `deposit_leg_key` for this call, so that no leg can hold it yet: an order
       * the matching queue read and locked in this transaction is then reserved as that read answered it.
       */
      deposit_leg_key_is_new?: boolean;
    },
  ): Promise<Result<LegReservation>> {
    invariant(Number.isSafeInteger(input.amount_minor) && input.amount_minor > 0, 'a leg amount is a positive safe integer');
    // An order the matching queue read and locked in this transaction, unwritten since, is what a new read
    // would answer (the row lock holds it), and a new key has no leg to find: it is not read again. Another
    // order this transaction locked is read with its legs in one statement; any other is locked first, and
    // its legs read after the lock, so that both see every leg committed before.
    const candidate = input.deposit_leg_key_is_new === true ? repository.takeCandidate(tx, input.white_label_id, input.withdrawal_id) : null;
    const held = candidate
      ? { row: candidate.row, existing_leg_ref: null, reserved_legs: candidate.reserved_legs }
      : holdsLock(tx, repository.orderRowKey(input.white_label_id, input.withdrawal_id))
        ? await repository.readHeldOrderForReservation(tx, input.white_label_id, input.withdrawal_id, input.deposit_leg_key)
        : null;
    const row = held ? held.row : await repository.lockOrderInBrand(tx, input.white_label_id, input.withdrawal_id);
    if (!row || row.livemode !== input.livemode) return fail('withdrawal_state_conflict', { details: { reason: 'not_found' } });
    const { existing_leg_ref, reserved_legs: reservedLegs } = held ?? (await repository.legsOfReservation(tx, input.white_label_id, input.withdrawal_id, input.deposit_leg_key));
    const existing = existing_leg_ref ? await repository.findLeg(tx, input.white_label_id, existing_leg_ref) : null;
    if (existing) {
      invariant(
        existing.withdrawal_id === input.withdrawal_id && existing.reserved_amount_minor === input.amount_minor,
        `deposit leg ${input.deposit_leg_key} was reserved with other terms`,
      );
      return ok(legReservation(existing, row));
    }
    const refuse = (reason: string) => fail<LegReservation>('withdrawal_state_conflict', { details: { reason, withdrawal_id: row.withdrawal_id } });
    if (row.status !== 'open' && row.status !== 'partially_filled') return refuse('not_open');
    // A candidate of the matching queue is judged at the instant its statement found it live: the order
    // has been locked since, so no expiry can have run on it, and the match that chose it must be able to
    // reserve it (an order expiring in the milliseconds between the two answered 500 in the chaos run).
    const expiry_checked_at = candidate ? candidate.read_at : this.deps.clock.now();
    if (row.expires_at.getTime() <= expiry_checked_at.getTime()) return refuse('expired');
    if (row.remaining_minor < input.amount_minor) return refuse('insufficient_remaining');
    if (row.settled_splits + reservedLegs >= row.max_splits) return refuse('max_splits_reached');

    const now = this.deps.clock.now();
    const leg: WithdrawalLegRow = {
      ...accountOf(row),
      withdrawal_id: row.withdrawal_id,
      leg_ref: newId('withdrawal_leg'),
      deposit_leg_key: input.deposit_leg_key,
      deposit_id: input.deposit_id,
      amount_minor: input.amount_minor,
      reserved_amount_minor: input.amount_minor,
      status: 'reserved',
      sequence: null,
      fee_recognized_minor: null,
      settled_at: null,
      balance_transaction_id: null,
      fee_balance_transaction_id: null,
      auto_confirm_at: null,
      receipt_state: null,
      release_reason_code: null,
      reversal_reason_code: null,
      replacement_withdrawal_id: null,
      created_at: now,
      updated_at: now,
    };
    await repository.insertLeg(tx, leg);
    const moved = await this.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, reserved_minor: row.reserved_minor + leg.amount_minor, remaining_minor: row.remaining_minor - leg.amount_minor, updated_at: now },
      trigger: 'leg_reserved',
      cause: input.cause,
      event_extra: { leg: { leg_ref: leg.leg_ref, amount_minor: leg.amount_minor } },
    });
    if (!moved.ok) return moved;
    return ok(legReservation(leg, row));
  }

  /**
   * Locks the order of a leg found without its lock, and the leg as it is under that lock: read again,
   * unless the transaction held the order's lock already when it found the leg (a deposit locks the
   * withdrawals its legs name before it fills or releases them), since the leg cannot have moved then.
   */
  private async lockLegOrder(tx: Queryable, white_label_id: string, found: WithdrawalLegRow): Promise<{ leg: WithdrawalLegRow; order: WithdrawalRow }> {
    const heldBefore = holdsLock(tx, repository.orderRowKey(white_label_id, found.withdrawal_id));
    const order = await repository.lockOrderInBrand(tx, white_label_id, found.withdrawal_id);
    invariant(order, 'a leg belongs to an order');
    const leg = heldBefore ? found : await repository.findLeg(tx, white_label_id, found.leg_ref);
    invariant(leg, 'a leg does not disappear');
    return { leg, order };
  }

  /**
   * Releases a reserved leg (the deposit did not pay): its amount returns to the order's remaining.
   * Releasing a released leg returns it again; a filled or reversed leg answers `alloc_state_conflict`.
   * An order past its expiry with nothing left in transfer closes here as `expired`.
   */
  async releaseLeg(tx: Queryable, input: { white_label_id: string; leg_ref: string; reason_code: string; cause: EventCause }): Promise<Result<LegReservation>> {
    const found = await repository.findLeg(tx, input.white_label_id, input.leg_ref);
    if (!found) return fail('alloc_state_conflict', { details: { reason: 'not_found' } });
    const { leg, order: row } = await this.lockLegOrder(tx, input.white_label_id, found);
    if (leg.status === 'released') return ok(legReservation(leg, row));
    if (leg.status !== 'reserved') return fail('alloc_state_conflict', { details: { reason: leg.status, leg_ref: leg.leg_ref } });
    const now = this.deps.clock.now();
    const releasedLeg: WithdrawalLegRow = { ...leg, status: 'released', release_reason_code: input.reason_code, updated_at: now };
    await repository.updateLockedLeg(tx, releasedLeg, 'reserved');
    const after: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      reserved_minor: row.reserved_minor - leg.amount_minor,
      remaining_minor: row.remaining_minor + leg.amount_minor,
      updated_at: now,
    };
    const extra = { leg: { leg_ref: leg.leg_ref, amount_minor: leg.amount_minor, reason_code: input.reason_code } };
    const moved = this.dueToClose(after)
      ? await this.close(tx, row, after, { status: 'expired', trigger: 'leg_released', reason_code: 'expired', closed_by: 'system' }, input.cause, extra)
      : await this.transition(tx, { before: row, after, trigger: 'leg_released', cause: input.cause, event_extra: extra });
    if (!moved.ok) return moved;
    return ok(legReservation(releasedLeg, row));
  }

  /**
   * Records the fill of a reserved leg: the chunk leaves the wallet's reserved bucket
   * (`withdrawal_settled`) with its share of the fee (`fee`), the order's amounts move, and
   * `withdrawal.filled` carries the fill with `auto_confirm_at` 3 hours on (a durable job then assumes
   * receipt). `amount_minor` below the leg's amount is a short payment: the rest returns to remaining.
   * Recording a fill again returns the first one; a released leg answers `alloc_state_conflict`.
   */
  async recordFill(tx: Queryable, input: { white_label_id: string; leg_ref: string; amount_minor?: number; cause: EventCause }): Promise<Result<FillOutcome>> {
    const found = await repository.findLeg(tx, input.white_label_id, input.leg_ref);
    if (!found) return fail('alloc_state_conflict', { details: { reason: 'not_found' } });
    const { leg, order: row } = await this.lockLegOrder(tx, input.white_label_id, found);
    if (leg.status === 'filled') return ok({ fill: fillView(leg, false), withdrawal: withdrawalView(row) });
    if (leg.status !== 'reserved') return fail('alloc_state_conflict', { details: { reason: leg.status, leg_ref: leg.leg_ref } });
    const paid = input.amount_minor ?? leg.amount_minor;
    invariant(Number.isSafeInteger(paid) && paid > 0 && paid <= leg.amount_minor, 'a fill pays between 1 satang and its leg amount');

    const now = this.deps.clock.now();
    const account = accountOf(row);
    const feeShare = recognizeFill(row.fee_total_minor, row.amount_total_minor, row.filled_minor, paid);
    // The payout and its fee leave the wallet in one post: one lock of the wallet and one lookup of both keys.
    const source = { type: ORDER_SOURCE, id: row.withdrawal_id };
    const keys = fillMovementKeys(leg.leg_ref);
    const movements: PostInput[] = [
      { account, type: 'withdrawal_settled', amount_minor: paid, bucket_from: 'reserved', bucket_to: null, movement_key: keys.payout, source, cause: input.cause },
    ];
    if (feeShare > 0) {
      movements.push({ account, type: 'fee', amount_minor: feeShare, bucket_from: 'reserved', bucket_to: null, movement_key: keys.fee, source, cause: input.cause });
    }
    const [settled, fee] = await this.deps.ledger.postAll(tx, movements);
    invariant(settled?.ok, 'a payout from reserved cannot be refused');
    let feeMovementId: string | null = null;
    if (fee) {
      invariant(fee.ok, 'a fee from reserved cannot be refused');
      feeMovementId = fee.value.id;
    }
    const filledLeg: WithdrawalLegRow = {
      ...leg,
      amount_minor: paid,
      status: 'filled',
      sequence: await repository.nextFillSequence(tx, row.white_label_id, row.withdrawal_id),
      fee_recognized_minor: feeShare,
      settled_at: now,
      balance_transaction_id: settled.value.id,
      fee_balance_transaction_id: feeMovementId,
      auto_confirm_at: new Date(now.getTime() + FILL_AUTO_CONFIRM_MS),
      receipt_state: 'awaiting_confirmation',
      updated_at: now,
    };
    await repository.updateLockedLeg(tx, filledLeg, 'reserved');
    invariant(filledLeg.amount_minor === paid, 'a fill records what was paid');

    const filled = row.filled_minor + paid;
    const base: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      filled_minor: filled,
      reserved_minor: row.reserved_minor - leg.amount_minor,
      remaining_minor: row.remaining_minor + (leg.amount_minor - paid),
      fee_recognized_minor: row.fee_recognized_minor + feeShare,
      settled_splits: row.settled_splits + 1,
      status: 'partially_filled',
      updated_at: now,
    };
    const fill = fillView(filledLeg, false);
    const jobs = [autoConfirmJob(filledLeg)];
    let moved: Result<WithdrawalView>;
    if (base.remaining_minor === 0 && base.reserved_minor === 0) {
      // Queued: nothing here reads whether the deadline job was still pending.
      await unscheduleJob(tx, `${EXPIRE_WITHDRAWAL_TASK}:${row.withdrawal_id}`);
      moved = await this.transition(tx, {
        before: row,
        after: { ...base, status: 'settled', refunded_minor: 0, closed_at: now },
        trigger: 'fill',
        cause: input.cause,
        jobs,
        event_extra: { fill },
      });
    } else if (this.dueToClose(base)) {
      moved = await this.close(tx, row, base, { status: 'expired', trigger: 'fill', reason_code: 'expired', closed_by: 'system' }, input.cause, { fill });
      if (moved.ok) await this.enqueue(tx, jobs);
    } else {
      moved = await this.transition(tx, { before: row, after: base, trigger: 'fill', cause: input.cause, jobs, event_extra: { fill } });
    }
    if (!moved.ok) return moved;
    return ok({ fill, withdrawal: moved.value });
  }

  private async enqueue(tx: Queryable, jobs: JobSpec[]): Promise<void> {
    for (const job of jobs) await scheduleJob(tx, this.deps.clock, job);
  }

  /**
   * Reverses a fill (the paying deposit was reversed, so the beneficiary did not keep the chunk). The
   * chunk and the fee it no longer earns come back into the wallet (`reversal` movements that point at
   * the fill's payout). A live order takes the chunk back into remaining and is matched again; a
   * closed order returns it to available, and a settled one gets a replacement order for it
   * (`replacement_of_withdrawal_id`, no second fee) when the balance covers it. Idempotent by leg.
   */
  async reverseFill(tx: Queryable, input: { white_label_id: string; leg_ref: string; reason_code: string; cause: EventCause }): Promise<Result<FillReversalOutcome>> {
    const found = await repository.findLeg(tx, input.white_label_id, input.leg_ref);
    if (!found) return fail('alloc_state_conflict', { details: { reason: 'not_found' } });
    const { leg, order: row } = await this.lockLegOrder(tx, input.white_label_id, found);
    if (leg.status === 'reversed') return ok({ withdrawal: withdrawalView(row), replacement_withdrawal_id: leg.replacement_withdrawal_id });
    if (leg.status !== 'filled') return fail('alloc_state_conflict', { details: { reason: leg.status, leg_ref: leg.leg_ref } });
    invariant(leg.balance_transaction_id, 'a fill has its payout movement');
    invariant(row.status !== 'pending_approval' && row.status !== 'rejected' && row.status !== 'open', 'a filled leg belongs to an order with fills');

    const now = this.deps.clock.now();
    const account = accountOf(row);
    const live = row.status === 'partially_filled';
    const filled = row.filled_minor - leg.amount_minor;
    // Recognition stays pro rata on what is still paid out, so a later fill cannot over-recognise.
    const recognized = recognizeFee(row.fee_total_minor, row.amount_total_minor, filled);
    const feeBack = row.fee_recognized_minor - recognized;
    invariant(feeBack >= 0, 'a reversal never recognises more fee');
    const into = live ? 'reserved' : 'available';
    // The chunk and the fee it no longer earns come back in one post: one lock of the wallet and one lookup of both keys.
    const source = { type: ORDER_SOURCE, id: row.withdrawal_id };
    const movements: PostInput[] = [
      {
        account,
        type: 'reversal',
        amount_minor: leg.amount_minor,
        bucket_from: null,
        bucket_to: into,
        movement_key: `reversal:${leg.balance_transaction_id}`,
        source,
        reverses_balance_transaction_id: leg.balance_transaction_id,
        reason_code: input.reason_code,
        cause: input.cause,
      },
    ];
    if (feeBack > 0) {
      movements.push({
        account,
        type: 'reversal',
        amount_minor: feeBack,
        bucket_from: null,
        bucket_to: into,
        movement_key: `fee_reversal:${leg.leg_ref}`,
        source,
        reverses_balance_transaction_id: leg.fee_balance_transaction_id ?? leg.balance_transaction_id,
        reason_code: input.reason_code,
        cause: input.cause,
      });
    }
    const [principal, fee] = await this.deps.ledger.postAll(tx, movements);
    invariant(principal?.ok, 'a credit cannot be refused');
    if (fee) invariant(fee.ok, 'a credit cannot be refused');

    const remaining = row.remaining_minor + leg.amount_minor;
    let after: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      filled_minor: filled,
      fee_recognized_minor: recognized,
      remaining_minor: remaining,
      settled_splits: row.settled_splits - 1,
      updated_at: now,
    };
    if (live) after = { ...after, status: filled > 0 ? 'partially_filled' : 'open' };
    else after = { ...after, refunded_minor: remaining };

    let replacementId: string | null = null;
    if (row.status === 'settled') {
      const replacement = await this.create(
        tx,
        account,
        {
          amount_minor: leg.amount_minor,
          merchant_reference: `rpl_${leg.leg_ref}`.slice(0, 64),
          end_user_ref: row.end_user_ref,
          beneficiary_id: row.beneficiary_id,
          ...(row.metadata ? { metadata: row.metadata } : {}),
        },
        input.cause,
        { replacement_of_withdrawal_id: row.withdrawal_id },
      );
      // Without the balance (a debt on available) the money stays in available for the merchant to decide.
      if (replacement.ok) replacementId = replacement.value.id;
    }

    const reversedLeg: WithdrawalLegRow = {
      ...leg,
      status: 'reversed',
      receipt_state: 'reversed',
      reversal_reason_code: input.reason_code,
      replacement_withdrawal_id: replacementId,
      updated_at: now,
    };
    await repository.updateLockedLeg(tx, reversedLeg, 'filled');
    await cancelJobsByKey(tx, `${AUTO_CONFIRM_FILL_TASK}:${leg.leg_ref}`);

    const extra = {
      fill: { ...fillView(leg, false), receipt_state: 'reversed', reason_code: input.reason_code },
      replacement_withdrawal_id: replacementId,
    };
    let moved: Result<WithdrawalView>;
    if (live && this.dueToClose(after)) {
      moved = await this.close(tx, row, after, { status: 'expired', trigger: 'fill_reversed', reason_code: 'expired', closed_by: 'system' }, input.cause, extra);
    } else {
      moved = await this.transition(tx, { before: row, after, trigger: 'fill_reversed', cause: input.cause, event_extra: extra });
    }
    if (!moved.ok) return moved;
    return ok({ withdrawal: moved.value, replacement_withdrawal_id: replacementId });
  }

  /**
   * The auto-confirm job: receipt of a fill is assumed 3 hours after it settled unless it was
   * disputed or reversed meanwhile. `receipt_state` belongs to the fill, not to the versioned order,
   * so this changes neither the order's version nor writes an event.
   */
  async autoConfirmFill(tx: Queryable, white_label_id: string, leg_ref: string): Promise<boolean> {
    const found = await repository.findLeg(tx, white_label_id, leg_ref);
    if (!found) return false;
    await repository.lockOrderInBrand(tx, white_label_id, found.withdrawal_id);
    const leg = await repository.findLeg(tx, white_label_id, leg_ref);
    if (!leg || leg.status !== 'filled' || leg.receipt_state !== 'awaiting_confirmation' || !leg.auto_confirm_at) return false;
    if (leg.auto_confirm_at.getTime() > this.deps.clock.now().getTime()) return false;
    return repository.updateLeg(tx, { ...leg, receipt_state: 'confirmed', updated_at: this.deps.clock.now() }, 'filled');
  }

  // -------------------------------------------------------------------------------------------------
  // Disputes (src/withdrawals/disputes.ts decides; these keep the order and its fills consistent).

  /**
   * Locks an order for a dispute change and returns it with its legs. A dispute's transaction takes the
   * paying deposit's locks first and this one after them (docs/decisions/disputes.md), so the
   * caller checks the fill here, under the order's lock, before it changes anything.
   */
  async lockForDispute(tx: Queryable, white_label_id: string, withdrawal_id: string): Promise<{ order: WithdrawalRow; legs: WithdrawalLegRow[] } | null> {
    const order = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!order) return null;
    return { order, legs: await repository.listLegs(tx, white_label_id, withdrawal_id) };
  }

  /**
   * Writes the order's dispute snapshot and `funds_on_hold` (`withdrawal.disputed` when a dispute opens,
   * `withdrawal.dispute_resolved` when one ends): `version` moves, the status does not. `receipt` moves
   * the disputed fill's `receipt_state` with it: to `disputed` when opened (its auto-confirm is cancelled:
   * receipt is no longer assumed) and to `confirmed` when resolved for the depositor.
   */
  async recordDispute(
    tx: Queryable,
    input: {
      white_label_id: string;
      withdrawal_id: string;
      trigger: 'disputed' | 'dispute_resolved';
      dispute: DisputeSnapshot;
      funds_on_hold: boolean;
      receipt?: { leg_ref: string; from: ReceiptState; to: ReceiptState };
      cause: EventCause;
    },
  ): Promise<Result<WithdrawalView>> {
    const row = await repository.lockOrderInBrand(tx, input.white_label_id, input.withdrawal_id);
    invariant(row, 'a dispute belongs to an order');
    const now = this.deps.clock.now();
    if (input.receipt) {
      const leg = await repository.findLeg(tx, input.white_label_id, input.receipt.leg_ref);
      invariant(leg && leg.withdrawal_id === row.withdrawal_id && leg.status === 'filled', 'a disputed fill stands');
      invariant(leg.receipt_state === input.receipt.from, `the fill's receipt is ${String(leg.receipt_state)}, not ${input.receipt.from}`);
      await repository.updateLockedLeg(tx, { ...leg, receipt_state: input.receipt.to, updated_at: now }, 'filled');
      if (input.receipt.to === 'disputed') await cancelJobsByKey(tx, `${AUTO_CONFIRM_FILL_TASK}:${leg.leg_ref}`);
    }
    return this.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, dispute: input.dispute, funds_on_hold: input.funds_on_hold, updated_at: now },
      trigger: input.trigger,
      cause: input.cause,
    });
  }

  /** The payee of a reservation just made: its order's beneficiary, without reading the leg again. */
  async payeeOfReservation(tx: Queryable, scope: { white_label_id: string; livemode: boolean }, reservation: Pick<LegReservation, 'merchant_id' | 'beneficiary_id'>): Promise<Payee | null> {
    return this.deps.beneficiaries.payee(tx, { white_label_id: scope.white_label_id, merchant_id: reservation.merchant_id, livemode: scope.livemode }, reservation.beneficiary_id);
  }

  /**
   * `payeeOfReservation` as a read another module's statement carries (src/platform/read-part.ts): matching
   * reads the payees of the orders it is about to reserve with the event feeds it locks.
   */
  payeeOfReservationPart(scope: { white_label_id: string; livemode: boolean }, reservation: Pick<LegReservation, 'merchant_id' | 'beneficiary_id'>): ReadPart<Payee | null> {
    return this.deps.beneficiaries.payeePart({ white_label_id: scope.white_label_id, merchant_id: reservation.merchant_id, livemode: scope.livemode }, reservation.beneficiary_id);
  }

  /**
   * `destinationOf` as a read another module's statement carries (src/platform/read-part.ts), for a leg of
   * an order this transaction holds locked (a deposit change locks the withdrawals its legs name before
   * their feeds): the order's copy names its owner and beneficiary, so the leg's owner is not read first.
   * Null when the order is not held. The part answers `undefined` when the leg is not of that order, and the
   * caller asks `destinationOf` then.
   */
  destinationPart(tx: Queryable, white_label_id: string, withdrawal_id: string, leg_ref: string): ReadPart<Payee | null | undefined> | null {
    const order = repository.heldOrder(tx, white_label_id, withdrawal_id);
    if (!order) return null;
    const part = repository.legOfOrderWith(white_label_id, withdrawal_id, leg_ref, this.deps.beneficiaries.payeePart(accountOf(order), order.beneficiary_id));
    return {
      ...part,
      parse: (value) => {
        const answer = part.parse(value);
        if (!answer.leg_of_order) return undefined;
        invariant(answer.carried, 'an order keeps its beneficiary');
        return answer.carried;
      },
    };
  }

  /**
   * What filling these legs reads (each leg, and its order's next fill number), as reads another module's
   * statement carries for `recordFill` to take later in the transaction (src/platform/read-part.ts). Only
   * for orders this transaction holds locked: their legs cannot move under that lock, and a write of one of
   * them here forgets what was carried.
   */
  fillReads(tx: Queryable, white_label_id: string, legs: readonly { withdrawal_id: string; leg_ref: string }[]): CarriedRead[] {
    const held = legs.filter((leg) => holdsLock(tx, repository.orderRowKey(white_label_id, leg.withdrawal_id)));
    const orders = [...new Set(held.map((leg) => leg.withdrawal_id))];
    return [...held.map((leg) => repository.legRead(white_label_id, leg.leg_ref)), ...orders.map((withdrawal_id) => repository.nextFillSequenceRead(white_label_id, withdrawal_id))];
  }

  /**
   * The wallets that filling these legs posts on (each leg's order's owner), with the movement keys `recordFill`
   * looks up there, for a lock of the wallets taken ahead of the fills (`LedgerService.walletsLockRead`). Only
   * legs of orders this transaction holds locked.
   */
  fillWallets(tx: Queryable, white_label_id: string, legs: readonly { withdrawal_id: string; leg_ref: string }[]): { merchant_id: string; movement_keys: string[] }[] {
    return legs.flatMap((leg) => {
      const order = repository.heldOrder(tx, white_label_id, leg.withdrawal_id);
      if (!order) return [];
      const keys = fillMovementKeys(leg.leg_ref);
      return [{ merchant_id: order.merchant_id, movement_keys: [keys.payout, keys.fee] }];
    });
  }

  /** The payee of a leg, for the payment instructions the deposit side shows its payer. */
  async destinationOf(tx: Queryable, white_label_id: string, leg_ref: string): Promise<Payee | null> {
    const owner = await repository.findLegOwner(tx, white_label_id, leg_ref);
    if (!owner) return null;
    const payee = await this.deps.beneficiaries.payee(tx, owner, owner.beneficiary_id);
    invariant(payee, 'an order keeps its beneficiary');
    return payee;
  }

  /**
   * Locks these orders (withdrawal-id order) and returns their owners, whose event feeds a deposit that
   * touches them writes to: a deposit change takes them after its own row and before those feeds
   * (src/platform/lock-order.ts), as every path of this module locks an order before its merchant's feed.
   */
  lockOrdersOf(tx: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
    return repository.lockOrdersOf(tx, white_label_id, withdrawal_ids);
  }

  /**
   * `lockOrdersOf` for orders another module's read names (their ids as a JSON array), with that module's
   * reads carried in the same statement (src/withdrawals/repository.ts `lockOrdersNamedBy`): a deposit change
   * names its withdrawals through its legs, which it reads in the statement that locks them.
   */
  lockOrdersNamedBy(tx: Queryable, white_label_id: string, ids: ReadPart<unknown>, carried: readonly ReadPart<unknown>[]): Promise<{ owners: string[]; carried: unknown[] }> {
    return repository.lockOrdersNamedBy(tx, white_label_id, ids, carried);
  }

  /**
   * `lockOrdersNamedBy` as a read that another module's statement carries after an earlier lock of the lock
   * order (src/withdrawals/repository.ts `lockOrdersNamedByPart`): the rows it answers are handed back with
   * `keepLockedOrders` in the same transaction, which then holds those orders as if this module had locked them.
   */
  lockOrdersNamedByPart(white_label_id: string, ids: ReadPart<unknown>): ReadPart<WithdrawalRow[]> {
    return repository.lockOrdersNamedByPart(white_label_id, ids);
  }

  /** Remembers orders that a carried read locked for this transaction (`lockOrdersNamedByPart`). */
  keepLockedOrders(tx: Queryable, rows: readonly WithdrawalRow[]): void {
    repository.keepLockedOrders(tx, rows);
  }

  /** The merchants owning these orders (read without a lock). */
  merchantsOf(db: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
    return repository.merchantsOf(db, white_label_id, withdrawal_ids);
  }

  /** The legs of an order, every status (for the property test and the back office). */
  async legsOf(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalLegRow[]> {
    return repository.listLegs(db, white_label_id, withdrawal_id);
  }

  /** Orders waiting for approval in a brand and environment, oldest first. */
  async pendingApproval(db: Queryable, white_label_id: string, livemode: boolean, limit: number): Promise<WithdrawalView[]> {
    const hidden = await this.deps.service_owned_merchants(db, white_label_id);
    return (await repository.listPendingApproval(db, white_label_id, livemode, Math.min(Math.max(limit, 1), 200), hidden)).map(withdrawalView);
  }

  /** An order anywhere in a brand (back office), or null; an order of the service's own merchants is null too. */
  async getInBrand(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, withdrawal_id);
    if (!row || (await this.hiddenFromBackOffice(db, row))) return null;
    const fills = await repository.listFills(db, row.white_label_id, row.withdrawal_id);
    // The back office reads the reviewer's note beside the order; merchants and events never do.
    return { ...withdrawalView(row), fills: fills.map((leg) => fillView(leg, true)), ...(row.review_note ? { review_note: row.review_note } : {}) };
  }
}

/**
 * The job handlers of withdrawal deadlines. Each runs one short transaction and is a no-op when the
 * order or fill has moved on (a late, repeated or stale job changes nothing).
 */
export function createWithdrawalJobHandlers(database: Database, withdrawals: WithdrawalService): Record<string, JobHandler> {
  const target = (payload: Record<string, unknown>) => ({ white_label_id: String(payload.white_label_id), id: String(payload.withdrawal_id ?? payload.leg_ref) });
  return {
    [EXPIRE_WITHDRAWAL_TASK]: async (job) => {
      const { white_label_id, id } = target(job.payload);
      await database.transaction((tx) => withdrawals.expire(tx, white_label_id, id));
    },
    [APPROVAL_TTL_TASK]: async (job) => {
      const { white_label_id, id } = target(job.payload);
      await database.transaction((tx) => withdrawals.expireApproval(tx, white_label_id, id));
    },
    [AUTO_CONFIRM_FILL_TASK]: async (job) => {
      const { white_label_id, id } = target(job.payload);
      await database.transaction((tx) => withdrawals.autoConfirmFill(tx, white_label_id, id));
    },
  };
}
