import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError, fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp } from '../platform/time.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import type { JobHandler } from '../jobs/index.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import { CLEARING_PERIOD_MS, type LedgerService } from '../ledger/service.ts';
import type { FeeService } from '../fees/service.ts';
import type { DepositService } from '../deposits/service.ts';
import type { SettlementReadAhead } from '../deposits/dependencies.ts';
import { depositOfJob, EXPIRE_DEPOSIT_TASK } from '../deposits/transitions.ts';
import { claimSnapshot, senderVerified, type DepositView } from '../deposits/views.ts';
import { additionalTransferClaimKey } from '../deposits/claim-keys.ts';
import type { ClaimsPort, DepositLegRow, DepositRow, OverpaymentSnapshot, VerificationBooleans } from '../deposits/types.ts';

/**
 * Settlement: what a verified transfer does to money, across the modules that hold it. A settlement
 * credits the depositor's wallet (ledger) less the fee (fees), fills the withdrawals the order's legs
 * reserved (withdrawals), opens the claim of an excess (claims) and moves the order (deposits), in one
 * transaction; a reversal undoes it. It sits above those modules and calls their services, so that none of
 * them calls back up: the deposit module knows its orders and their locks, not who is paid.
 */

/**
 * A leg of a late slip whose withdrawal could not take it again (ALLOCATION_CONFLICT) may be paid by
 * the withdrawer instead: once the dispute is resolved for the depositor, the withdrawing merchant's
 * wallet has been debited by an `adjustment` for what the slip paid into the leg, and settlement counts
 * that leg as paid without filling the withdrawal. The disputes module's `DisputeCovers` answers: it
 * reads only the disputes' own rows and posts to the ledger, so it is built before this service.
 */
export interface LegCover {
  /** What an adjustment paid into this deposit leg, or null when nothing covers it. */
  coveredAmount(db: Queryable, input: { white_label_id: string; deposit_id: string; deposit_leg_ref: string }): Promise<number | null>;
  /** The covered order is being reversed: the withdrawer's adjustment is given back, once. */
  reverseCover(tx: Queryable, input: { white_label_id: string; deposit_id: string; deposit_leg_ref: string; cause: EventCause }): Promise<void>;
}

export interface SettlementDependencies {
  clock: Clock;
  deposits: DepositService;
  withdrawals: WithdrawalService;
  ledger: LedgerService;
  fees: FeeService;
  /** Opens claims inside settlement's transactions (the review module owns them; see ClaimsPort). */
  claims: ClaimsPort;
  /** Which late legs a resolved dispute's adjustment paid (the disputes module's `DisputeCovers`). */
  leg_covers: LegCover;
}

export class SettlementService {
  constructor(private readonly deps: SettlementDependencies) {}

  /**
   * Settles an order whose slip verified V satang transferred (the verification issue calls this):
   * A = min(V, X) is accepted, the fee of the deposit channel is taken from A, the merchant is credited
   * A − fee into pending_clearing for 72 hours, the reserved withdrawal legs are filled by A in leg order
   * (a short payment fills by V and returns the rest to the withdrawals' remaining), and an excess E =
   * V − X opens a claim (`overpayment`, no automatic refund). `deposit.settled` is written before the
   * `balance.credited` of its movement. Idempotent: a settled order is returned unchanged.
   *
   * The order of the statements is the lock order (src/platform/lock-order.ts): the order, its withdrawals
   * and the feeds first (`lockOrder`), the fee schedule, the withdrawals' legs, and the wallets last.
   */
  async settle(tx: Queryable, input: SettleInput): Promise<Result<DepositView>> {
    const transferred = input.transferred_amount_minor;
    invariant(Number.isSafeInteger(transferred) && transferred > 0, 'a verified transfer is a positive number of satang');
    const row = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'settled' || row.status === 'reversed') return ok(await this.deps.deposits.viewOf(tx, row));
    // awaiting_payment: a multi-leg order settling short at its deadline on the legs its slips paid.
    const settles = row.status === 'slip_processing' || row.status === 'under_review' || (row.status === 'awaiting_payment' && input.paid_by_leg !== undefined);
    if (!settles) return fail('deposit_state_conflict', { details: { status: row.status } });

    const now = this.deps.clock.now();
    const account = accountOf(row);
    const received = Math.min(transferred, row.amount_minor);
    const fee = await this.deps.fees.quote(tx, { ...account, channel: 'deposit' }, received, input.read_ahead?.deposit_fee_schedule ?? null);
    const credited = received - fee.fee_total_minor;
    const plan = fillPlan(await this.deps.deposits.legsOf(tx, row), received, input.paid_by_leg);
    const covered = await this.reserveReleasedLegsAgain(tx, row, plan, input.cause, now);
    // The merchant's credit comes after the fills: its wallet is locked with the first withdrawer's, in one statement.
    if (credited > 0) this.deps.ledger.expectDepositCredit(tx, account, row.deposit_id);
    const legs = await this.payLegs(tx, row, plan, covered, input.cause, now);
    const overpayment = transferred > row.amount_minor ? await this.openSameTransferExcess(tx, row, transferred - row.amount_minor, input.cause, now) : null;
    const balanceTransactionId = credited > 0 ? newId('balance_transaction') : null;
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'settled',
      transferred_amount_minor: transferred,
      amount_received_minor: received,
      fee_total_minor: fee.fee_total_minor,
      fee_breakdown: fee.fee_breakdown,
      credited_amount_minor: credited,
      partial: transferred < row.amount_minor,
      settled_via: input.settled_via,
      balance_transaction_id: balanceTransactionId,
      settled_at: now,
      clearing_available_at: credited > 0 ? new Date(now.getTime() + CLEARING_PERIOD_MS) : null,
      overpayment,
      verification: input.verification ?? row.verification,
      updated_at: now,
    };
    // Queued: nothing here reads whether the deadline job was still pending.
    await this.deps.deposits.unscheduleExpiry(tx, row);
    if (input.sender_verified) await this.deps.deposits.registerVerifiedSender(tx, row, now);
    const view = await this.deps.deposits.applyChange(tx, { before: row, after, trigger: 'settle', cause: input.cause, legs });
    if (balanceTransactionId !== null) {
      invariant(after.clearing_available_at !== null, 'a credited settlement names when its credit clears');
      const movement = await this.deps.ledger.creditSettledDeposit(tx, {
        account,
        deposit_id: row.deposit_id,
        amount_minor: credited,
        cause: input.cause,
        balance_transaction_id: balanceTransactionId,
        // One instant for both: the order's clearing_available_at is the movement's available_at.
        available_at: after.clearing_available_at,
      });
      invariant(movement.id === balanceTransactionId, 'the credit carries the id the settlement named');
    }
    return ok(view);
  }

  /**
   * Legs released at expiry or cancel that a (late) slip paid anyway: reserve the same withdrawals again.
   * If one of them can no longer take its leg, the money landed where it is not owed any more, unless a
   * resolved dispute made the withdrawer pay for it (LegCover): the leg then counts as paid, and its ref is
   * in the answer. The plan's legs are updated in place to what they are now.
   */
  private async reserveReleasedLegsAgain(tx: Queryable, row: DepositRow, plan: LegFill[], cause: EventCause, now: Date): Promise<Set<string>> {
    const covered = new Set<string>();
    for (const { leg, fill_minor } of plan) {
      if (leg.status !== 'released' || fill_minor === 0) continue;
      if (leg.destination === 'withdrawal') {
        const cover = await this.deps.leg_covers.coveredAmount(tx, { white_label_id: row.white_label_id, deposit_id: row.deposit_id, deposit_leg_ref: leg.leg_ref });
        if (cover !== null) {
          // The adjustment paid exactly what this settlement fills into the leg, or the money would not balance.
          if (cover !== fill_minor) throw new ApiError('alloc_state_conflict', { details: { leg_ref: leg.leg_ref, withdrawal_id: leg.withdrawal_id, reason: 'covered_amount_differs' } });
          covered.add(leg.leg_ref);
          continue;
        }
      }
      if (leg.destination === 'gateway') {
        await this.deps.deposits.reserveLegAgain(tx, leg, now);
        leg.status = 'reserved';
        continue;
      }
      invariant(leg.withdrawal_id, 'a withdrawal leg names its withdrawal');
      const again = await this.deps.withdrawals.reserveLeg(tx, {
        white_label_id: row.white_label_id,
        livemode: row.livemode,
        withdrawal_id: leg.withdrawal_id,
        deposit_id: row.deposit_id,
        deposit_leg_key: `${leg.leg_ref}:late`,
        amount_minor: leg.amount_minor,
        cause,
      });
      // Thrown, not returned: legs reserved again before this one must roll back with the transaction.
      if (!again.ok) throw new ApiError('alloc_state_conflict', { details: { leg_ref: leg.leg_ref, withdrawal_id: leg.withdrawal_id } });
      await this.deps.deposits.relinkLeg(tx, leg, again.value.leg_ref, now);
      leg.status = 'reserved';
      leg.withdrawal_leg_ref = again.value.leg_ref;
    }
    return covered;
  }

  /** Pays the withdrawals by the plan: a fill for each paid leg, a release for each leg that got nothing. */
  private async payLegs(tx: Queryable, row: DepositRow, plan: LegFill[], covered: Set<string>, cause: EventCause, now: Date): Promise<DepositLegRow[]> {
    const legs: DepositLegRow[] = [];
    for (const { leg, fill_minor: paid } of plan) {
      if (covered.has(leg.leg_ref)) {
        // Paid by the withdrawer's adjustment: the withdrawal itself is not filled again.
        legs.push({ ...leg, status: 'filled', updated_at: now });
        continue;
      }
      if (leg.status !== 'reserved') continue;
      if (leg.destination === 'gateway') {
        // The gateway account is outside the brand's withdrawals: nothing to fill there.
        legs.push({ ...leg, status: paid > 0 ? 'filled' : 'released', updated_at: now });
        continue;
      }
      invariant(leg.withdrawal_leg_ref, 'a withdrawal leg names its withdrawal leg');
      if (paid > 0) {
        const filled = await this.deps.withdrawals.recordFill(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, amount_minor: paid, cause });
        invariant(filled.ok, 'a reserved leg of a deposit being settled can be filled');
        legs.push({ ...leg, status: 'filled', updated_at: now });
      } else {
        const released = await this.deps.withdrawals.releaseLeg(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, reason_code: 'deposit_short_paid', cause });
        invariant(released.ok, 'a reserved leg can be released');
        legs.push({ ...leg, status: 'released', updated_at: now });
      }
    }
    return legs;
  }

  /** An excess E = V − X of the same transfer opens a claim (`same_transfer_excess`), once per order. */
  private async openSameTransferExcess(tx: Queryable, row: DepositRow, excess: number, cause: EventCause, now: Date): Promise<OverpaymentSnapshot> {
    const opened = await this.deps.claims.open(tx, {
      ...accountOf(row),
      deposit_id: row.deposit_id,
      cause: 'same_transfer_excess',
      amount_minor: excess,
      slip_received_at: row.slip_received_at ?? now,
      dedupe_key: `same_transfer_excess:${row.deposit_id}`,
      evidence: null,
      opened_by: { type: 'system' },
      cause_of_event: cause,
    });
    return claimSnapshot(opened.claim);
  }

  /**
   * Reverses a settled order (bank recall, invalidated slip, …): the credit is taken back (from
   * pending clearing inside the 72 hours, else from available, see the ledger), and every fill it made
   * on withdrawals is reversed, since their beneficiaries did not keep the money. Idempotent.
   */
  async reverse(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; reason_code: string; reason_display_th?: string; cause: EventCause },
  ): Promise<Result<DepositView>> {
    const row = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'reversed') return ok(await this.deps.deposits.viewOf(tx, row));
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    const account = accountOf(row);
    // The deposit's live refunds stop (below); their orders are locked now, before the fill reversals take other
    // withdrawals and wallets (src/platform/lock-order.ts).
    const refunds = await this.deps.withdrawals.lockLiveRefundsOf(tx, row.white_label_id, row.deposit_id);
    for (const leg of await this.deps.deposits.legsOf(tx, row)) {
      if (leg.status !== 'filled' || leg.destination !== 'withdrawal' || !leg.withdrawal_leg_ref) continue;
      const coverTarget = { white_label_id: row.white_label_id, deposit_id: row.deposit_id, deposit_leg_ref: leg.leg_ref };
      if ((await this.deps.leg_covers.coveredAmount(tx, coverTarget)) !== null) {
        // A leg the withdrawer paid by adjustment filled no withdrawal: the adjustment is what goes back.
        await this.deps.leg_covers.reverseCover(tx, { ...coverTarget, cause: input.cause });
        continue;
      }
      const reversed = await this.deps.withdrawals.reverseFill(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, reason_code: 'deposit_reversed', cause: input.cause });
      invariant(reversed.ok, 'a fill of a settled deposit can be reversed');
    }
    // The deposit's live refunds stop: the money they would pay back did not stay with the merchant (a refund with
    // a chunk in transfer leaves the matching queue and ends by that chunk and its expiry; docs/decisions/refunds.md).
    await this.deps.withdrawals.cancelRefundsOfReversedDeposit(tx, refunds, input.cause);
    // The depositor's wallet is debited after the fill reversals above: wallets come last in the lock
    // order (order row, withdrawal rows, feeds, wallets; src/platform/lock-order.ts).
    let debitId: string | null = null;
    if (row.balance_transaction_id) {
      const debit = await this.deps.ledger.reverseDepositCredit(tx, {
        account,
        deposit_id: row.deposit_id,
        credit_balance_transaction_id: row.balance_transaction_id,
        reason_code: input.reason_code,
        ...(input.reason_display_th === undefined ? {} : { reason_display_th: input.reason_display_th }),
        cause: input.cause,
      });
      debitId = debit.id;
    }
    const now = this.deps.clock.now();
    const view = await this.deps.deposits.applyChange(tx, {
      before: row,
      after: {
        ...row,
        version: row.version + 1,
        status: 'reversed',
        clearing_available_at: null,
        reversal: { reason_code: input.reason_code, reverses_balance_transaction_id: row.balance_transaction_id, balance_transaction_id: debitId, reversed_at: formatTimestamp(now) },
        updated_at: now,
      },
      trigger: 'reverse',
      cause: input.cause,
    });
    return ok(view);
  }

  /**
   * A verified slip paid some legs of a multi-leg order, and others are still unpaid: the paid amounts
   * are recorded on the legs (they show `complete` and lose their QR), and the order goes back to
   * `awaiting_payment` of the rest (`deposit.leg_paid`). Its deadline stands: the expiry job settles it
   * short on what was paid if the other legs are not paid in time.
   */
  async recordLegPayments(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; paid_by_leg: Record<string, number>; verification: VerificationBooleans; cause: EventCause },
  ): Promise<Result<DepositView>> {
    const row = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'slip_processing') return fail('deposit_state_conflict', { details: { status: row.status } });
    const now = this.deps.clock.now();
    const legs: DepositLegRow[] = [];
    for (const leg of await this.deps.deposits.legsOf(tx, row)) {
      const paid = input.paid_by_leg[leg.leg_ref];
      if (paid === undefined || paid === leg.paid_minor) continue;
      invariant(leg.status === 'reserved' && Number.isSafeInteger(paid) && paid > leg.paid_minor, 'a reserved leg is paid more, never less');
      legs.push({ ...leg, paid_minor: paid, updated_at: now });
    }
    invariant(legs.length > 0, 'a leg payment pays a leg');
    const after: DepositRow = { ...row, version: row.version + 1, status: 'awaiting_payment', verification: input.verification, updated_at: now };
    // The expiry job may have run while the slip was processed and left the deadline to this consumer.
    const view = await this.deps.deposits.applyChange(tx, { before: row, after, trigger: 'leg_paid', cause: input.cause, legs, jobs: [this.deps.deposits.expiryJob(row)] });
    // Written after the transition, which reads the legs as they were for `previous_attributes`.
    for (const leg of legs) await this.deps.deposits.recordLegPaid(tx, leg, now);
    return ok(view);
  }

  /**
   * Money transferred again after settlement: a claim (`additional_transfer`), `deposit.overpaid`, the
   * status stays `settled`, and neither V nor A changes (invariant 5). `transfer_key` (the transfer's
   * bank reference) makes it happen once.
   */
  async recordAdditionalTransfer(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; amount_minor: number; slip_received_at: Date; transfer_key: string; cause: EventCause },
  ): Promise<Result<DepositView>> {
    invariant(Number.isSafeInteger(input.amount_minor) && input.amount_minor > 0, 'an additional transfer is a positive amount');
    const row = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    const now = this.deps.clock.now();
    const opened = await this.deps.claims.open(tx, {
      white_label_id: row.white_label_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      deposit_id: row.deposit_id,
      cause: 'additional_transfer',
      amount_minor: input.amount_minor,
      slip_received_at: input.slip_received_at,
      dedupe_key: additionalTransferClaimKey(row.deposit_id, input.transfer_key),
      evidence: null,
      opened_by: { type: 'system' },
      cause_of_event: input.cause,
    });
    // The transfer was recorded before (its claim exists): nothing changes a second time.
    if (!opened.created) return ok(await this.deps.deposits.viewOf(tx, row));
    const snapshot = claimSnapshot(opened.claim);
    const view = await this.deps.deposits.applyChange(tx, {
      before: row,
      after: { ...row, version: row.version + 1, overpayment: row.overpayment ?? snapshot, updated_at: now },
      trigger: 'overpaid',
      cause: input.cause,
      event_extra: { additional_transfer: snapshot },
    });
    return ok(view);
  }

  /**
   * Holds a settled order's credit in pending clearing while a withdrawer disputes a fill it paid
   * (spec, Wallet effects): the credit gets no release time, `clearing_available_at` becomes null
   * (`deposit.funds_held`; the order says nothing about the dispute). `held` is false when there is no
   * credit still in clearing to hold. Holding an order held already changes nothing.
   */
  async holdFunds(tx: Queryable, input: { white_label_id: string; deposit_id: string; hold_reason: string; cause: EventCause }): Promise<Result<{ held: boolean }>> {
    const row = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    if (!row.balance_transaction_id) return ok({ held: false });
    const account = accountOf(row);
    if (!(await this.deps.ledger.holdClearing(tx, account, row.balance_transaction_id, input.hold_reason))) return ok({ held: false });
    if (row.clearing_available_at !== null) {
      await this.deps.deposits.applyChange(tx, { before: row, after: { ...row, version: row.version + 1, clearing_available_at: null, updated_at: this.deps.clock.now() }, trigger: 'funds_held', cause: input.cause });
    }
    return ok({ held: true });
  }

  /**
   * Lifts the hold of `holdFunds`: the credit clears at its original time, or at once when that has
   * passed (the ledger's rule), and `clearing_available_at` says when again (`deposit.funds_released`).
   */
  async releaseFunds(tx: Queryable, input: { white_label_id: string; deposit_id: string; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    invariant(row.balance_transaction_id && row.settled_at, 'only a credited order has funds to release');
    const account = accountOf(row);
    if (!(await this.deps.ledger.releaseHold(tx, account, row.balance_transaction_id))) return ok(await this.deps.deposits.viewOf(tx, row));
    // The credit's release time was fixed at settlement (settled_at + 72 h); past it, the ledger releases now.
    const original = row.settled_at.getTime() + CLEARING_PERIOD_MS;
    const clearing_available_at = new Date(Math.max(original, this.deps.clock.now().getTime()));
    return ok(await this.deps.deposits.applyChange(tx, { before: row, after: { ...row, version: row.version + 1, clearing_available_at, updated_at: this.deps.clock.now() }, trigger: 'funds_released', cause: input.cause }));
  }

  /**
   * The expiry job: an unpaid order past its transfer deadline expires, and its reservations go back
   * (`DepositService.expireUnpaid`). Two cases wait instead: an order with a slip not processed yet (the slip
   * consumer decides, and hands the deadline back by enqueueing this job again when it returns the order to
   * awaiting payment), and a multi-leg order some of whose legs verified slips paid, which settles short on
   * what was paid (or, when the brand's policy holds the order, goes to review): that is why the job is
   * settlement's, not the deposit module's.
   */
  async expire(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositView | null> {
    const due = await this.deps.deposits.dueForExpiry(tx, white_label_id, deposit_id);
    if (!due) return null;
    const paid = due.legs.filter((leg) => leg.status === 'reserved' && leg.paid_minor > 0);
    if (paid.length === 0) return this.deps.deposits.expireUnpaid(tx, due.row);
    const held = await this.deps.deposits.holdAtDeadline(tx, due.row);
    if (held) return held;
    const settled = await this.settle(tx, {
      white_label_id,
      deposit_id,
      transferred_amount_minor: paid.reduce((sum, leg) => sum + leg.paid_minor, 0),
      paid_by_leg: Object.fromEntries(paid.map((leg) => [leg.leg_ref, leg.paid_minor])),
      settled_via: 'auto',
      sender_verified: senderVerified(due.row.verification),
      cause: SYSTEM_CAUSE,
    });
    invariant(settled.ok, 'a partially paid order settles at its deadline');
    return settled.value;
  }
}

/** What a verified transfer settles (`SettlementService.settle`). */
export interface SettleInput {
  white_label_id: string;
  deposit_id: string;
  transferred_amount_minor: number;
  settled_via: 'auto' | 'review';
  /** True when the slip proved the declared sender (bank, account and name all matched): it is registered. */
  sender_verified?: boolean;
  verification?: VerificationBooleans;
  /**
   * What the verified slips paid into each leg (by `leg_ref`), when they said which receiver they paid: the
   * fills follow the money. Without it, A is filled across the legs in their order.
   */
  paid_by_leg?: Record<string, number>;
  /** What the slip pipeline's lock of the order read ahead for this settlement (`DepositService.lockPaymentParties`). */
  read_ahead?: SettlementReadAhead;
  cause: EventCause;
}

/** One leg of an order and what a settlement fills into it. */
interface LegFill {
  leg: DepositLegRow;
  fill_minor: number;
}

function accountOf(row: DepositRow): { white_label_id: string; merchant_id: string; livemode: boolean } {
  return { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
}

/**
 * What each leg receives of A: the verified amount of each leg when the slips said which receiver they paid
 * (multi-leg orders), else A across the legs in their order. A leg paid in part is a short fill whose rest
 * returns to that withdrawal; a leg that gets nothing goes back whole. Filled legs are left out.
 */
function fillPlan(legs: DepositLegRow[], received: number, paid_by_leg: Record<string, number> | undefined): LegFill[] {
  let left = received;
  const plan: LegFill[] = [];
  for (const leg of legs) {
    if (leg.status === 'filled') continue;
    const wanted = paid_by_leg ? (paid_by_leg[leg.leg_ref] ?? 0) : left;
    const fill_minor = Math.min(leg.amount_minor, wanted, left);
    left -= fill_minor;
    plan.push({ leg, fill_minor });
  }
  invariant(left === 0, 'the legs of an order cover its amount');
  return plan;
}

/** The job handler of the transfer deadline (`deposits.expire`): one short transaction, a no-op once the order moved on. */
export function createSettlementJobHandlers(database: Database, settlement: SettlementService): Record<string, JobHandler> {
  return {
    [EXPIRE_DEPOSIT_TASK]: async (job) => {
      const { white_label_id, deposit_id } = depositOfJob(job.payload);
      await database.transaction((tx) => settlement.expire(tx, white_label_id, deposit_id));
    },
  };
}
