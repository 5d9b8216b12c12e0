import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, type Result } from '../platform/errors.ts';
import type { PlannedCommand, ReadPart } from '../platform/read-part.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { cancelJobsByKey } from '../jobs/index.ts';
import type { Payee } from '../beneficiaries/service.ts';
import { WithdrawalApprovals, type StaffApprovalDecision } from './approvals.ts';
import { MAX_REFUNDS_PER_DEPOSIT, WithdrawalCreation, type CreateWithdrawalInput, type CreateWithdrawalOptions, type MerchantWithdrawalRequest } from './creation.ts';
import type { WithdrawalDependencies } from './dependencies.ts';
import { AUTO_CONFIRM_FILL_TASK } from './jobs.ts';
import { WithdrawalLegs, type FillReads, type RecordFillInput, type ReleaseLegInput, type ReserveLegInput, type ReverseFillInput } from './legs.ts';
import { WithdrawalMatchingQueue, type FindMatchableInput } from './matching-queue.ts';
import * as repository from './repository.ts';
import * as refundsRepository from './refunds-repository.ts';
import * as listingRepository from './listing-repository.ts';
import { OrderTransitions } from './transitions.ts';
import { FINAL_WITHDRAWAL_STATUSES, type DisputeSnapshot, type ReceiptState, type WithdrawalAccount, type WithdrawalLegRow, type WithdrawalRow } from './types.ts';
import { fillView, withdrawalView, type FillOutcome, type FillReversalOutcome, type LegReservation, type MatchableWithdrawal, type WithdrawalView } from './views.ts';

/**
 * Withdrawal orders: the payout side. Creation locks amount plus fee in the merchant's wallet
 * (`withdrawal_reserved`); deposits then pay the order in chunks through the leg functions
 * (reserve a leg, release it, record its fill, reverse a fill), which the deposit side calls and
 * which are the only way an order's amounts change. Every change goes through `applyTransition` with
 * WITHDRAWAL_TRANSITIONS, asserts the order's invariants, and moves money only through the ledger.
 *
 * `WithdrawalService` is what the other modules call. It does the merchant's reads, cancel and expiry and
 * the disputes' changes itself, and hands the rest to the classes it is made of, each in a file of its own:
 * creation (creation.ts), approval and the back office's reads (approvals.ts), legs and fills (legs.ts),
 * and the matching queue with the locks the deposit side takes (matching-queue.ts). They share one
 * `OrderTransitions` (transitions.ts, with the transition table); the deadlines are in jobs.ts and the
 * views in views.ts, and what other modules import from here is exported here too.
 */

export { APPROVAL_TTL_TASK, AUTO_CONFIRM_FILL_TASK, createWithdrawalJobHandlers, EXPIRE_WITHDRAWAL_TASK, FILL_AUTO_CONFIRM_MS } from './jobs.ts';
export { assertOrderInvariants, heldInWallet, WITHDRAWAL_TRANSITIONS } from './transitions.ts';
export { fillView, withdrawalView, type FillOutcome, type FillReversalOutcome, type FillView, type LegReservation, type MatchableWithdrawal, type WithdrawalView } from './views.ts';
export { MAX_REFUNDS_PER_DEPOSIT, type CreateWithdrawalInput, type RefundTerms } from './creation.ts';
export { FINAL_WITHDRAWAL_STATUSES, REFUND_REASON_CODES, WITHDRAWAL_STATUSES, type RefundReasonCode, type WithdrawalLegRow, type WithdrawalStatus } from './types.ts';
export type { WithdrawalDependencies } from './dependencies.ts';
export type { BrandSearchFilters, OrderListFilters, WithdrawalSearchRow } from './listing-repository.ts';
export { BRAND_SEARCH_MAX_IDS as WITHDRAWAL_SEARCH_MAX_IDS } from './listing-repository.ts';

/** What a cancel refused for a pending fill tells the caller to wait: about one leg's transfer window. */
export const PENDING_FILL_RETRY_AFTER_SECONDS = 60;

/** What a deposit's object says about its refunds on GET (docs/decisions/refunds.md, "The deposit's refund summary"). */
export interface RefundSummary {
  /** What may still be refunded: what the deposit brought, less the refunds' claim on it; 0 unless it is settled. */
  amount_refundable_minor: number;
  /** What the refunds paid out to the payer so far. */
  amount_refunded_minor: number;
  /** The deposit's refunds (and the replacements of their reversed fills), oldest first. */
  refund_ids: string[];
}

/** Every refund of one deposit fits in one read: the most a deposit may open, and as many replacements of their fills. */
const REFUNDS_LISTED_PER_DEPOSIT = 2 * MAX_REFUNDS_PER_DEPOSIT;

export class WithdrawalService {
  private readonly transitions: OrderTransitions;
  private readonly creation: WithdrawalCreation;
  private readonly approvals: WithdrawalApprovals;
  private readonly legs: WithdrawalLegs;
  private readonly matchingQueue: WithdrawalMatchingQueue;

  constructor(private readonly deps: WithdrawalDependencies) {
    this.transitions = new OrderTransitions(deps);
    this.creation = new WithdrawalCreation(deps, this.transitions);
    this.approvals = new WithdrawalApprovals(deps, this.transitions);
    // A reversed fill of a settled order is paid again by a replacement order: the legs create it.
    this.legs = new WithdrawalLegs(deps, this.transitions, this.creation);
    this.matchingQueue = new WithdrawalMatchingQueue(deps);
  }

  // -------------------------------------------------------------------------------------------------
  // Creation (src/withdrawals/creation.ts), reading, cancel, expiry

  /** See {@link WithdrawalCreation.sandboxScenarioRefusal}. */
  sandboxScenarioRefusal(tx: Queryable, account: WithdrawalAccount, amount_minor: number): Promise<Result<never> | null> {
    return this.creation.sandboxScenarioRefusal(tx, account, amount_minor);
  }

  /** See {@link WithdrawalCreation.planForMerchant}. */
  planForMerchant(account: WithdrawalAccount, request: MerchantWithdrawalRequest, cause: EventCause): PlannedCommand<WithdrawalView> {
    return this.creation.planForMerchant(account, request, cause);
  }

  /** See {@link WithdrawalCreation.create}. */
  create(tx: Queryable, account: WithdrawalAccount, input: CreateWithdrawalInput, cause: EventCause, options: CreateWithdrawalOptions = {}): Promise<Result<WithdrawalView>> {
    return this.creation.create(tx, account, input, cause, options);
  }

  /** The caller's own order with its settled fills, or null. */
  async get(db: Queryable, account: WithdrawalAccount, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.findOrder(db, account, withdrawal_id);
    if (!row) return null;
    const fills = await repository.listFills(db, row.white_label_id, row.withdrawal_id);
    return { ...withdrawalView(row), fills: fills.map((leg) => fillView(leg, true)) };
  }

  /**
   * One page of the caller's orders (GET /v1/pay/withdrawals), newest or oldest first as asked. Without
   * `fills`: a list reads no order's children, so a page costs one statement whatever its orders hold; the
   * fills are read per order. The caller asks for one row more than its page to learn whether another follows.
   */
  async list(db: Queryable, account: WithdrawalAccount, filters: listingRepository.OrderListFilters): Promise<WithdrawalView[]> {
    const rows = await listingRepository.listOrdersOfMerchant(db, account, filters);
    return rows.map((row) => withdrawalView(row));
  }

  private async lockOwnOrder(tx: Queryable, account: WithdrawalAccount, withdrawal_id: string): Promise<WithdrawalRow | null> {
    const row = await repository.lockOrderInBrand(tx, account.white_label_id, withdrawal_id);
    if (!row || row.merchant_id !== account.merchant_id || row.livemode !== account.livemode) return null;
    return row;
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
    return this.transitions.close(tx, row, { ...row, version: row.version + 1 }, { status: 'canceled', trigger: 'cancel', reason_code: 'merchant_request', closed_by: 'merchant' }, cause);
  }

  /**
   * The expiry job: an open order past `expires_at` leaves the matching queue and returns its
   * remainder. While a leg is in transfer the order stays as it is; the leg's release or fill closes it.
   */
  async expire(tx: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!row || (row.status !== 'open' && row.status !== 'partially_filled')) return null;
    if (row.expires_at.getTime() > this.deps.clock.now().getTime() || row.reserved_minor > 0) return null;
    const result = await this.transitions.close(
      tx,
      row,
      { ...row, version: row.version + 1 },
      { status: 'expired', trigger: 'expire', reason_code: 'expired', closed_by: 'system' },
      SYSTEM_CAUSE,
    );
    invariant(result.ok, 'a locked order closes');
    return result.value;
  }

  // -------------------------------------------------------------------------------------------------
  // Refunds of a deposit (the refunds layer, src/refunds/, creates them through `create` with `refund`)

  /** A deposit's refunds as the merchant sees them, oldest first (at most the bound on their count, with replacements). */
  async refundsOf(db: Queryable, account: WithdrawalAccount, deposit_id: string): Promise<WithdrawalView[]> {
    const rows = await refundsRepository.listRefundsOfDeposit(db, account, deposit_id, REFUNDS_LISTED_PER_DEPOSIT);
    return rows.map((row) => withdrawalView(row));
  }

  /**
   * What a deposit's refunds have taken, for its object on GET: what may still be refunded of `refundable_cap_minor`
   * (the deposit's credit while it stands, else 0), what reached the payer, and the refunds' ids, oldest first.
   */
  async refundSummary(db: Queryable, account: WithdrawalAccount, deposit_id: string, refundable_cap_minor: number): Promise<RefundSummary> {
    const allowance = await refundsRepository.findRefundAllowance(db, account.white_label_id, deposit_id);
    if (!allowance) return { amount_refundable_minor: refundable_cap_minor, amount_refunded_minor: 0, refund_ids: [] };
    const rows = await refundsRepository.listRefundsOfDeposit(db, account, deposit_id, REFUNDS_LISTED_PER_DEPOSIT);
    return {
      amount_refundable_minor: Math.max(0, refundable_cap_minor - allowance.committed_minor),
      amount_refunded_minor: rows.reduce((sum, row) => sum + row.filled_minor, 0),
      refund_ids: rows.map((row) => row.withdrawal_id),
    };
  }

  /**
   * The live refunds of a deposit being reversed, locked in id order. The settlement layer takes them right after the
   * deposit, before the fill reversals lock other withdrawals and wallets, and cancels them at the end
   * (`cancelRefundsOfReversedDeposit`): withdrawal orders come before wallets in the lock order.
   */
  lockLiveRefundsOf(tx: Queryable, white_label_id: string, deposit_id: string): Promise<WithdrawalRow[]> {
    return refundsRepository.lockLiveRefundsOfDeposit(tx, white_label_id, deposit_id, REFUNDS_LISTED_PER_DEPOSIT);
  }

  /**
   * The deposit a refund was made for was reversed (its money did not stay with the merchant): each of its live refunds
   * locked by `lockLiveRefundsOf` with nothing in transfer is canceled by the system (`deposit_reversed`), returning its
   * remainder and fee. A refund with a chunk in transfer cannot be canceled while that chunk may still be paid: it leaves
   * the matching queue instead, so nothing more is reserved for it, and ends by that chunk and its own expiry or cancel
   * (docs/decisions/refunds.md).
   */
  async cancelRefundsOfReversedDeposit(tx: Queryable, refunds: readonly WithdrawalRow[], cause: EventCause): Promise<WithdrawalView[]> {
    const canceled: WithdrawalView[] = [];
    for (const row of refunds) {
      invariant(row.refund_of_deposit_id !== null && !FINAL_WITHDRAWAL_STATUSES.has(row.status), 'a live refund, locked');
      if (row.reserved_minor > 0) {
        await repository.leaveMatchingQueue(tx, row.white_label_id, row.withdrawal_id);
        continue;
      }
      const closed = await this.transitions.close(tx, row, { ...row, version: row.version + 1 }, { status: 'canceled', trigger: 'cancel', reason_code: 'deposit_reversed', closed_by: 'system' }, cause);
      invariant(closed.ok, 'a locked live refund closes');
      canceled.push(closed.value);
    }
    return canceled;
  }

  // -------------------------------------------------------------------------------------------------
  // Approval by brand policy and the back office's reads (src/withdrawals/approvals.ts)

  /** See {@link WithdrawalApprovals.approve}. */
  approve(tx: Queryable, white_label_id: string, withdrawal_id: string, note: string | null, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    return this.approvals.approve(tx, white_label_id, withdrawal_id, note, cause);
  }

  /** See {@link WithdrawalApprovals.decideApprovalByStaff}. */
  decideApprovalByStaff(input: StaffApprovalDecision): Promise<WithdrawalView | null> {
    return this.approvals.decideApprovalByStaff(input);
  }

  /** See {@link WithdrawalApprovals.reject}. */
  reject(tx: Queryable, white_label_id: string, withdrawal_id: string, note: string, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    return this.approvals.reject(tx, white_label_id, withdrawal_id, note, cause);
  }

  /** See {@link WithdrawalApprovals.expireApproval}. */
  expireApproval(tx: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    return this.approvals.expireApproval(tx, white_label_id, withdrawal_id);
  }

  /** See {@link WithdrawalApprovals.pendingApproval}. */
  pendingApproval(db: Queryable, white_label_id: string, livemode: boolean, limit: number): Promise<WithdrawalView[]> {
    return this.approvals.pendingApproval(db, white_label_id, livemode, limit);
  }

  /**
   * The back office's search over a brand's withdrawals (the console's orders page), newest first, without the
   * service's own merchants' orders (as `getInBrand`); the caller asks for one row more than its page.
   */
  async searchInBrand(db: Queryable, white_label_id: string, filters: Omit<listingRepository.BrandSearchFilters, 'hidden_merchant_ids'>): Promise<listingRepository.WithdrawalSearchRow[]> {
    const hidden_merchant_ids = await this.deps.service_owned_merchants(db, white_label_id);
    return listingRepository.searchOrdersInBrand(db, white_label_id, { ...filters, hidden_merchant_ids });
  }

  /** The withdrawals that these deposits' legs reserved or paid (a bank reference names the deposits), at most `limit`. */
  withdrawalIdsOfDeposits(db: Queryable, white_label_id: string, deposit_ids: readonly string[], limit: number): Promise<string[]> {
    return listingRepository.withdrawalIdsOfDeposits(db, white_label_id, deposit_ids, limit);
  }

  /**
   * A brand's withdrawal as the back office's order page shows it: the view of `getInBrand` (with the reviewer's
   * note), whose it is, and every leg, reserved, released, filled or reversed, with the deposit that pays it.
   */
  async backOfficeDetail(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<{ view: WithdrawalView; merchant_id: string; legs: WithdrawalLegRow[] } | null> {
    const view = await this.approvals.getInBrand(db, white_label_id, withdrawal_id);
    if (!view) return null;
    const row = await repository.findOrderInBrand(db, white_label_id, withdrawal_id);
    if (!row) return null;
    return { view, merchant_id: row.merchant_id, legs: await repository.listLegs(db, white_label_id, withdrawal_id) };
  }

  /** See {@link WithdrawalApprovals.getInBrand}. */
  getInBrand(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    return this.approvals.getInBrand(db, white_label_id, withdrawal_id);
  }

  // -------------------------------------------------------------------------------------------------
  // The functions the deposit side calls (src/withdrawals/legs.ts and matching-queue.ts). Each is atomic
  // in the caller's transaction and idempotent.

  /** See {@link WithdrawalMatchingQueue.findMatchable}. */
  findMatchable(
    tx: Queryable,
    input: FindMatchableInput,
    /** The caller's reads that ride on the candidate statement, parsed from the first candidate's row when one is found (src/platform/read-part.ts). */
    carried: readonly ReadPart<unknown>[] = [],
  ): Promise<MatchableWithdrawal[]> {
    return this.matchingQueue.findMatchable(tx, input, carried);
  }

  /** See {@link WithdrawalLegs.reserveLeg}. */
  reserveLeg(tx: Queryable, input: ReserveLegInput): Promise<Result<LegReservation>> {
    return this.legs.reserveLeg(tx, input);
  }

  /** See {@link WithdrawalLegs.releaseLeg}. */
  releaseLeg(tx: Queryable, input: ReleaseLegInput): Promise<Result<LegReservation>> {
    return this.legs.releaseLeg(tx, input);
  }

  /** See {@link WithdrawalLegs.recordFill}. */
  recordFill(tx: Queryable, input: RecordFillInput): Promise<Result<FillOutcome>> {
    return this.legs.recordFill(tx, input);
  }

  /** See {@link WithdrawalLegs.reverseFill}. */
  reverseFill(tx: Queryable, input: ReverseFillInput): Promise<Result<FillReversalOutcome>> {
    return this.legs.reverseFill(tx, input);
  }

  /** See {@link WithdrawalLegs.autoConfirmFill}. */
  autoConfirmFill(tx: Queryable, white_label_id: string, leg_ref: string): Promise<boolean> {
    return this.legs.autoConfirmFill(tx, white_label_id, leg_ref);
  }

  // -------------------------------------------------------------------------------------------------
  // Disputes (src/disputes/service.ts decides; these keep the order and its fills consistent).

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
    return this.transitions.apply(tx, {
      before: row,
      after: { ...row, version: row.version + 1, dispute: input.dispute, funds_on_hold: input.funds_on_hold, updated_at: now },
      trigger: input.trigger,
      cause: input.cause,
    });
  }

  // -------------------------------------------------------------------------------------------------
  // What the deposit side reads and locks ahead of its changes (src/withdrawals/matching-queue.ts, legs.ts)

  /** See {@link WithdrawalMatchingQueue.payeeOfReservation}. */
  payeeOfReservation(tx: Queryable, scope: { white_label_id: string; livemode: boolean }, reservation: Pick<LegReservation, 'merchant_id' | 'beneficiary_id'>): Promise<Payee | null> {
    return this.matchingQueue.payeeOfReservation(tx, scope, reservation);
  }

  /** See {@link WithdrawalMatchingQueue.payeeOfReservationPart}. */
  payeeOfReservationPart(scope: { white_label_id: string; livemode: boolean }, reservation: Pick<LegReservation, 'merchant_id' | 'beneficiary_id'>): ReadPart<Payee | null> {
    return this.matchingQueue.payeeOfReservationPart(scope, reservation);
  }

  /** See {@link WithdrawalMatchingQueue.destinationPart}. */
  destinationPart(tx: Queryable, white_label_id: string, withdrawal_id: string, leg_ref: string): ReadPart<Payee | null | undefined> | null {
    return this.matchingQueue.destinationPart(tx, white_label_id, withdrawal_id, leg_ref);
  }

  /** See {@link WithdrawalLegs.fillReads}. */
  fillReads(tx: Queryable, white_label_id: string, legs: readonly { withdrawal_id: string; leg_ref: string }[]): FillReads {
    return this.legs.fillReads(tx, white_label_id, legs);
  }

  /** See {@link WithdrawalLegs.keepFillReads}. */
  keepFillReads(tx: Queryable, reads: FillReads): void {
    this.legs.keepFillReads(tx, reads);
  }

  /** See {@link WithdrawalLegs.fillWallets}. */
  fillWallets(tx: Queryable, white_label_id: string, legs: readonly { withdrawal_id: string; leg_ref: string }[]): { merchant_id: string; movement_keys: string[] }[] {
    return this.legs.fillWallets(tx, white_label_id, legs);
  }

  /** See {@link WithdrawalMatchingQueue.destinationOf}. */
  destinationOf(tx: Queryable, white_label_id: string, leg_ref: string): Promise<Payee | null> {
    return this.matchingQueue.destinationOf(tx, white_label_id, leg_ref);
  }

  /** See {@link WithdrawalMatchingQueue.lockOrdersOf}. */
  lockOrdersOf(tx: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
    return this.matchingQueue.lockOrdersOf(tx, white_label_id, withdrawal_ids);
  }

  /** See {@link WithdrawalMatchingQueue.lockOrdersNamedBy}. */
  lockOrdersNamedBy(tx: Queryable, white_label_id: string, ids: ReadPart<unknown>, carried: readonly ReadPart<unknown>[]): Promise<{ owners: string[]; carried: unknown[] }> {
    return this.matchingQueue.lockOrdersNamedBy(tx, white_label_id, ids, carried);
  }

  /** See {@link WithdrawalMatchingQueue.lockOrdersNamedByPart}. */
  lockOrdersNamedByPart(white_label_id: string, ids: ReadPart<unknown>): ReadPart<WithdrawalRow[]> {
    return this.matchingQueue.lockOrdersNamedByPart(white_label_id, ids);
  }

  /** See {@link WithdrawalMatchingQueue.keepLockedOrders}. */
  keepLockedOrders(tx: Queryable, rows: readonly WithdrawalRow[]): void {
    this.matchingQueue.keepLockedOrders(tx, rows);
  }

  /** See {@link WithdrawalMatchingQueue.merchantsOf}. */
  merchantsOf(db: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
    return this.matchingQueue.merchantsOf(db, white_label_id, withdrawal_ids);
  }

  /** The legs of an order, every status (for the property test and the back office). */
  async legsOf(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalLegRow[]> {
    return repository.listLegs(db, white_label_id, withdrawal_id);
  }
}
