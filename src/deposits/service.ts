import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, MINUTE_MS } from '../platform/time.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import type { Backlog } from '../platform/backlog.ts';
import { cancelJobsByKey, scheduleJob, unscheduleJob, type JobHandler, type JobSpec } from '../jobs/index.ts';
import { findBank } from '../banks/service.ts';
import * as repository from './repository.ts';
import * as searchRepository from './search-repository.ts';
import { renderQrPng } from './qr-image.ts';
import type { DepositDependencies } from './dependencies.ts';
import { DepositChanges, windowToClose, type OrderChange } from './order-changes.ts';
import { DepositLocks } from './order-locks.ts';
import { DepositCreation, SENDER_ACCOUNT_PURPOSE } from './creation.ts';
import { DepositSlipHooks } from './slip-hooks.ts';
import { DepositReviewHooks } from './review-hooks.ts';
import { CLOSE_WINDOW_TASK, depositOfJob, EXPIRE_DEPOSIT_TASK, MATCH_RETRY_TASK, POLICY_HOLD_REASON } from './transitions.ts';
import { fourEyesRequired, policyHolds } from './policy.ts';
import { depositView, promptPayPayload, type DepositView, type SenderView } from './views.ts';
import { maskAccount, maskName } from './masking.ts';
import type { CanceledBy, DepositAccount, DepositLegRow, DepositRow, DepositStatus } from './types.ts';

export type { CreateDepositInput, DepositDependencies, PaymentParties, ReviewEstimate } from './dependencies.ts';
export { LegsChangedMeanwhile } from './order-locks.ts';
export { additionalTransferClaimKey } from './claim-keys.ts';
export { CANCELED_ORDER_SLIP_REASON, DEPOSIT_TRANSITIONS, POLICY_HOLD_REASON } from './transitions.ts';
export { senderVerified, type DepositView, type LegView, type SenderView } from './views.ts';
export { DEPOSIT_STATUSES, type DepositLegRow, type DepositStatus } from './types.ts';
export { BRAND_SEARCH_MAX_IDS, BRAND_SEARCH_MAX_ROWS, type BrandSearchFilters, type DepositSearchRow } from './search-repository.ts';

/**
 * The deposit module's service: what other modules and the routes call. It is split by job into parts that
 * share one `DepositChanges` (the transition function, views, deadline jobs) and one `DepositLocks` (the
 * lock protocol): creation and matching (`creation.ts`), slip intake hooks (`slip-hooks.ts`), review hooks
 * (`review-hooks.ts`); expiry of an unpaid order, cancel, the reads, and the primitives the settlement layer
 * (src/settlement/) moves an order with are here. Settling, reversing and holding an order's money are not:
 * they span the ledger, the withdrawals and the claims, and live in the layer above.
 */
/** What a refund reads of its deposit (`lockForRefund`). The account number is for the payout, never for display or logs. */
export interface RefundedDeposit {
  deposit_id: string;
  status: DepositStatus;
  /** What the payer's transfers brought; null until the order settles. */
  amount_received_minor: number | null;
  end_user_ref: string;
  payer: { bank_code: string; account_number: string; account_name_th: string; account_name_en?: string };
}

export class DepositService {
  private readonly changes: DepositChanges;
  private readonly locks: DepositLocks;
  private readonly creation: DepositCreation;
  private readonly slipHooks: DepositSlipHooks;
  private readonly reviewHooks: DepositReviewHooks;

  constructor(private readonly deps: DepositDependencies) {
    this.changes = new DepositChanges(deps);
    this.locks = new DepositLocks(deps);
    this.creation = new DepositCreation(deps, this.changes);
    this.slipHooks = new DepositSlipHooks(deps, this.changes, this.locks);
    this.reviewHooks = new DepositReviewHooks(this.changes, this.locks);
  }

  // Creation and matching: documented in creation.ts.
  create(...args: Parameters<DepositCreation['create']>): ReturnType<DepositCreation['create']> {
    return this.creation.create(...args);
  }
  planCreation(...args: Parameters<DepositCreation['plan']>): ReturnType<DepositCreation['plan']> {
    return this.creation.plan(...args);
  }
  issueSlipToken(...args: Parameters<DepositCreation['issueSlipToken']>): ReturnType<DepositCreation['issueSlipToken']> {
    return this.creation.issueSlipToken(...args);
  }
  retryMatching(...args: Parameters<DepositCreation['retryMatching']>): ReturnType<DepositCreation['retryMatching']> {
    return this.creation.retryMatching(...args);
  }

  // Slip intake and the slip pipeline: documented in slip-hooks.ts.
  admitSlip(...args: Parameters<DepositSlipHooks['admitSlip']>): ReturnType<DepositSlipHooks['admitSlip']> {
    return this.slipHooks.admitSlip(...args);
  }
  markSlipReceived(...args: Parameters<DepositSlipHooks['markSlipReceived']>): ReturnType<DepositSlipHooks['markSlipReceived']> {
    return this.slipHooks.markSlipReceived(...args);
  }
  attachSlipToReview(...args: Parameters<DepositSlipHooks['attachSlipToReview']>): ReturnType<DepositSlipHooks['attachSlipToReview']> {
    return this.slipHooks.attachSlipToReview(...args);
  }
  lockForSlip(...args: Parameters<DepositSlipHooks['lockForSlip']>): ReturnType<DepositSlipHooks['lockForSlip']> {
    return this.slipHooks.lockForSlip(...args);
  }
  paymentParties(...args: Parameters<DepositSlipHooks['paymentParties']>): ReturnType<DepositSlipHooks['paymentParties']> {
    return this.slipHooks.paymentParties(...args);
  }
  lockPaymentParties(...args: Parameters<DepositSlipHooks['lockPaymentParties']>): ReturnType<DepositSlipHooks['lockPaymentParties']> {
    return this.slipHooks.lockPaymentParties(...args);
  }
  partiesAfterOwnChange(...args: Parameters<DepositSlipHooks['partiesAfterOwnChange']>): ReturnType<DepositSlipHooks['partiesAfterOwnChange']> {
    return this.slipHooks.partiesAfterOwnChange(...args);
  }
  openLateSlipClaim(...args: Parameters<DepositSlipHooks['openLateSlipClaim']>): ReturnType<DepositSlipHooks['openLateSlipClaim']> {
    return this.slipHooks.openLateSlipClaim(...args);
  }
  sandboxPayerCapability(...args: Parameters<DepositSlipHooks['sandboxPayerCapability']>): ReturnType<DepositSlipHooks['sandboxPayerCapability']> {
    return this.slipHooks.sandboxPayerCapability(...args);
  }
  orderLockRead(...args: Parameters<DepositLocks['orderLockRead']>): ReturnType<DepositLocks['orderLockRead']> {
    return this.locks.orderLockRead(...args);
  }
  settlementLockRead(...args: Parameters<DepositLocks['settlementLockRead']>): ReturnType<DepositLocks['settlementLockRead']> {
    return this.locks.settlementLockRead(...args);
  }

  // The review desk: documented in review-hooks.ts.
  sendToReview(...args: Parameters<DepositReviewHooks['sendToReview']>): ReturnType<DepositReviewHooks['sendToReview']> {
    return this.reviewHooks.sendToReview(...args);
  }
  escalateReview(...args: Parameters<DepositReviewHooks['escalateReview']>): ReturnType<DepositReviewHooks['escalateReview']> {
    return this.reviewHooks.escalateReview(...args);
  }
  rejectReview(...args: Parameters<DepositReviewHooks['rejectReview']>): ReturnType<DepositReviewHooks['rejectReview']> {
    return this.reviewHooks.rejectReview(...args);
  }
  markSlipUnreadable(...args: Parameters<DepositReviewHooks['markSlipUnreadable']>): ReturnType<DepositReviewHooks['markSlipUnreadable']> {
    return this.reviewHooks.markSlipUnreadable(...args);
  }
  viewInBrand(...args: Parameters<DepositReviewHooks['viewInBrand']>): ReturnType<DepositReviewHooks['viewInBrand']> {
    return this.reviewHooks.viewInBrand(...args);
  }
  /** Orders in review across every brand by mode, and the oldest entry of each: the operations gauges' reviewer backlog. */
  openReviewBacklog(db: Queryable): Promise<{ live: Backlog; test: Backlog }> {
    return repository.readOpenReviewBacklog(db);
  }

  reviewQueue(...args: Parameters<DepositReviewHooks['reviewQueue']>): ReturnType<DepositReviewHooks['reviewQueue']> {
    return this.reviewHooks.reviewQueue(...args);
  }
  countInReviewByReason(...args: Parameters<DepositReviewHooks['countInReviewByReason']>): ReturnType<DepositReviewHooks['countInReviewByReason']> {
    return this.reviewHooks.countInReviewByReason(...args);
  }
  countInReviewUpTo(...args: Parameters<DepositReviewHooks['countInReviewUpTo']>): ReturnType<DepositReviewHooks['countInReviewUpTo']> {
    return this.reviewHooks.countInReviewUpTo(...args);
  }

  /**
   * The first locks another module takes before it changes an order through this service or the settlement
   * layer (a settlement, a review decision, a claim, a dispute on a fill the order paid): the order row, the
   * withdrawals its legs name, then the feeds of every merchant involved, before any dispute row or wallet
   * (src/platform/lock-order.ts).
   */
  lockOrder(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    return this.locks.lockForChange(tx, white_label_id, deposit_id);
  }

  /** Whose a brand's deposit is (merchant and environment), for the back office acting for that merchant; null when unknown. */
  /** Which of these orders are under review: the evidence retention keeps their slips (src/slips/retention.ts). */
  ordersUnderReview(db: Queryable, orders: readonly { white_label_id: string; deposit_id: string }[]): Promise<{ white_label_id: string; deposit_id: string }[]> {
    return repository.ordersUnderReview(db, orders);
  }

  async ownerInBrand(db: Queryable, white_label_id: string, deposit_id: string): Promise<DepositAccount | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    return row ? { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode } : null;
  }

  /**
   * A deposit of the caller's, locked, as a refund needs it (src/refunds/): its status and what it brought, and the
   * account its payer declared (bank, full number, names), for the payout. Null for an unknown id or another
   * merchant's, brand's or environment's order. Locked first, so that a reversal and a refund of one deposit queue.
   */
  async lockForRefund(tx: Queryable, account: DepositAccount, deposit_id: string): Promise<RefundedDeposit | null> {
    const row = await this.locks.lockForChange(tx, account.white_label_id, deposit_id);
    if (!row || row.merchant_id !== account.merchant_id || row.livemode !== account.livemode) return null;
    return {
      deposit_id: row.deposit_id,
      status: row.status,
      amount_received_minor: row.amount_received_minor,
      end_user_ref: row.end_user_ref,
      payer: {
        bank_code: row.sender_bank_code,
        account_number: this.deps.secretBox.open(row.sender_account_sealed, SENDER_ACCOUNT_PURPOSE),
        account_name_th: row.sender_name_th,
        ...(row.sender_name_en === null ? {} : { account_name_en: row.sender_name_en }),
      },
    };
  }

  /** The order's legs, as the transaction that locked it (`lockOrder`) sees them. */
  legsOf(tx: Queryable, row: DepositRow): Promise<DepositLegRow[]> {
    return repository.listLegs(tx, row.white_label_id, row.deposit_id);
  }

  /** The order as the API shows it. */
  viewOf(db: Queryable, row: DepositRow): Promise<DepositView> {
    return this.changes.view(db, row);
  }

  /**
   * Applies a change of a locked order (the settlement layer's settle, reverse, leg payments, later transfers,
   * fund holds): DEPOSIT_TRANSITIONS decides whether the trigger is allowed, and the version, the event and the
   * follow-up jobs are written in the caller's transaction.
   */
  applyChange(tx: Queryable, change: OrderChange & { before: DepositRow }): Promise<DepositView> {
    return this.changes.transition(tx, change);
  }

  /** A released gateway leg that a late slip paid is reserved again (the gateway has no withdrawal to ask). */
  async reserveLegAgain(tx: Queryable, leg: DepositLegRow, now: Date): Promise<void> {
    invariant(leg.destination === 'gateway', 'only a gateway leg is reserved again without its withdrawal');
    invariant(await repository.setLegStatus(tx, leg, 'released', 'reserved', now), 'the leg is locked through its order');
  }

  /** A released leg whose withdrawal took it again (`WithdrawalService.reserveLeg`) names the new withdrawal leg. */
  async relinkLeg(tx: Queryable, leg: DepositLegRow, withdrawal_leg_ref: string, now: Date): Promise<void> {
    invariant(await repository.relinkLeg(tx, leg, withdrawal_leg_ref, now), 'the leg is locked through its order');
  }

  /** What verified slips paid into a leg of a multi-leg order (`paid_minor`), written after its transition. */
  async recordLegPaid(tx: Queryable, leg: DepositLegRow, now: Date): Promise<void> {
    invariant(await repository.setLegPaid(tx, leg, leg.paid_minor, now), 'the leg is locked through its order');
  }

  /** The order's declared sender, proven by a verified slip, becomes a registered sender of its end user. */
  async registerVerifiedSender(tx: Queryable, row: DepositRow, now: Date): Promise<void> {
    await repository.upsertSender(tx, {
      white_label_id: row.white_label_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      sender_id: newId('sender'),
      end_user_ref: row.end_user_ref,
      bank_code: row.sender_bank_code,
      account_sealed: row.sender_account_sealed,
      account_hmac: row.sender_account_hmac,
      account_last4: row.sender_account_last4,
      name_th: row.sender_name_th,
      name_en: row.sender_name_en,
      verified_by_deposit_id: row.deposit_id,
      created_at: now,
      last_used_at: now,
    });
  }

  /** The order's transfer deadline as a job (`deposits.expire`), enqueued again when a slip hands it back. */
  expiryJob(row: DepositRow): JobSpec {
    return this.changes.expireJob(row);
  }

  /** The order no longer has a transfer deadline (it settled). */
  unscheduleExpiry(tx: Queryable, row: DepositRow): Promise<void> {
    return unscheduleJob(tx, `${EXPIRE_DEPOSIT_TASK}:${row.deposit_id}`);
  }

  /**
   * The order, locked for a change, with its legs, when its transfer deadline has come: it awaits payment, its
   * deadline has passed, and no slip of it waits to be processed (the slip consumer then decides, and enqueues
   * the deadline again when it returns the order to awaiting payment). Null otherwise.
   */
  async dueForExpiry(tx: Queryable, white_label_id: string, deposit_id: string): Promise<{ row: DepositRow; legs: DepositLegRow[] } | null> {
    const row = await this.locks.lockForChange(tx, white_label_id, deposit_id);
    if (!row || row.status !== 'awaiting_payment' || row.expires_at.getTime() > this.changes.now().getTime()) return null;
    if ((await this.deps.slip_activity(tx, white_label_id, deposit_id)).unprocessed > 0) return null;
    return { row, legs: await repository.listLegs(tx, white_label_id, deposit_id) };
  }

  /**
   * An order due for expiry (`dueForExpiry`) that verified slips paid in part settles short at its deadline,
   * unless the brand's policy holds it: then it goes to review with POLICY_HOLD (`awaiting_payment` →
   * `under_review`, `deposit.under_review`), its legs still reserved, and a reviewer decides on what the bank
   * verified. The hold is on settling without a person, whichever path settles. Null when the policy does not
   * hold the order (the caller settles it short).
   */
  async holdAtDeadline(tx: Queryable, row: DepositRow): Promise<DepositView | null> {
    const policy = await this.deps.policies.policyFor(tx, row.white_label_id, row.livemode);
    if (!policyHolds(row, policy.policy_hold_min_amount_minor)) return null;
    const review = await this.changes.newReview(tx, row, [POLICY_HOLD_REASON], fourEyesRequired(row, policy.four_eyes_min_amount_minor));
    return this.changes.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, status: 'under_review', review, updated_at: this.changes.now() },
      trigger: 'review',
      cause: SYSTEM_CAUSE,
    });
  }

  /** An order due for expiry (`dueForExpiry`) that nothing paid expires, and its reservations go back. */
  async expireUnpaid(tx: Queryable, row: DepositRow): Promise<DepositView> {
    const released = await this.changes.releaseLegs(tx, row, 'deposit_expired', SYSTEM_CAUSE);
    return this.changes.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, status: 'expired', expired_reason: 'no_payment', late_slip_accepted_until: this.changes.lateSlipAcceptedUntil(row), updated_at: this.changes.now() },
      trigger: 'expire',
      cause: SYSTEM_CAUSE,
      legs: released,
    });
  }

  /**
   * Cancels an unpaid order for the merchant or the end user. Once a slip exists (any later status)
   * the answer is `deposit_not_cancelable`. A waiting order never had a destination, so it closes
   * for good (null window); a matched one keeps the late-slip window of its transfer deadline. The end
   * user (the hosted checkout page) cancels only an order awaiting payment, the one status the spec's
   * row names ("`awaiting_payment` | Canceled by merchant, end user or system | No slip exists").
   */
  async cancel(tx: Queryable, account: DepositAccount, deposit_id: string, by: Exclude<CanceledBy, 'system'>, cause: EventCause): Promise<Result<DepositView> | null> {
    const found = await repository.findOrder(tx, account, deposit_id);
    if (!found) return null;
    const row = await this.locks.lockForChange(tx, account.white_label_id, deposit_id);
    invariant(row, 'the order exists');
    const cancelable = by === 'end_user' ? row.status === 'awaiting_payment' : row.status === 'awaiting_liquidity' || row.status === 'awaiting_payment';
    if (!cancelable) return fail('deposit_not_cancelable', { details: { status: row.status } });
    // Once a slip exists (uploaded, even unread or unreadable) the end user may have paid: no cancel (spec).
    if (row.slip_attempts > 0 || (await this.deps.slip_activity(tx, row.white_label_id, row.deposit_id)).total > 0) {
      return fail('deposit_not_cancelable', { details: { status: row.status, reason: 'slip_received' } });
    }
    const legs = row.status === 'awaiting_payment' ? await this.changes.releaseLegs(tx, row, 'deposit_canceled', cause) : [];
    await cancelJobsByKey(tx, `${EXPIRE_DEPOSIT_TASK}:${row.deposit_id}`);
    const view = await this.changes.transition(tx, {
      before: row,
      after: {
        ...row,
        version: row.version + 1,
        status: 'canceled',
        canceled_by: by,
        cancel_reason_code: by === 'merchant' ? 'merchant_request' : 'end_user_request',
        late_slip_accepted_until: row.status === 'awaiting_payment' ? this.changes.lateSlipAcceptedUntil(row) : null,
        updated_at: this.changes.now(),
      },
      trigger: 'cancel',
      cause,
      legs,
    });
    return ok(view);
  }

  /**
   * The close job (deposits.close_window): at `late_slip_accepted_until` an expired or canceled order that took
   * no late slip becomes terminal, as a change of the order (a new version, `is_terminal` false to true,
   * `deposit.closed`), so that a client that follows webhooks learns it. An order that left the state, or was
   * closed already, is left alone. A slip accepted before the window's end and not yet processed decides
   * first: the job looks again a minute later, at most `CLOSE_WINDOW_MAX_ATTEMPTS` times (a day).
   */
  async closeWindow(tx: Queryable, white_label_id: string, deposit_id: string, attempt: number): Promise<'closed' | 'left' | 'waiting'> {
    const row = await this.locks.lockForChange(tx, white_label_id, deposit_id);
    const closes_at = row ? windowToClose(row) : null;
    if (!row || closes_at === null) return 'left';
    const now = this.changes.now();
    // Early (another clock's time) or a slip still to be processed: look again later, a bounded number of times.
    const early = closes_at.getTime() > now.getTime();
    if (early || (await this.deps.slip_activity(tx, white_label_id, deposit_id)).unprocessed > 0) {
      const next = early ? closes_at : new Date(now.getTime() + MINUTE_MS);
      if (attempt < CLOSE_WINDOW_MAX_ATTEMPTS) await scheduleJob(tx, this.deps.clock, this.changes.closeJob(row, next, attempt + 1));
      return 'waiting';
    }
    await this.changes.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, window_closed_at: now, updated_at: now },
      trigger: 'close',
      cause: SYSTEM_CAUSE,
    });
    return 'closed';
  }

  /**
   * One page of the caller's orders (no payment instructions in a list: they are read per order).
   * Returns one row more than asked when there is a next page.
   */
  async list(db: Queryable, account: DepositAccount, filters: repository.ListFilters): Promise<{ views: DepositView[]; last: DepositRow | null }> {
    const rows = await repository.listOrders(db, account, filters);
    const legs = await repository.listLegsOfOrders(db, account.white_label_id, rows.map((row) => row.deposit_id));
    const now = this.changes.now();
    return {
      views: rows.map((row) => depositView(row, legs.filter((leg) => leg.deposit_id === row.deposit_id), { now })),
      last: rows.at(-1) ?? null,
    };
  }

  /** GET /v1/pay/senders: the end user's registered senders, masked, most recently used first. */
  async senders(db: Queryable, account: DepositAccount, end_user_ref: string): Promise<SenderView[]> {
    const rows = await repository.listSenders(db, account, end_user_ref);
    const views: SenderView[] = [];
    for (const row of rows) {
      const bank = await findBank(db, row.bank_code);
      views.push({
        id: row.sender_id,
        object: 'sender',
        end_user_ref: row.end_user_ref,
        bank_code: row.bank_code,
        bank_name_th: bank?.name_th ?? row.bank_code,
        account_number_masked: maskAccount(row.account_last4),
        account_name_th_masked: maskName(row.name_th),
        created_at: formatTimestamp(row.created_at),
        last_used_at: formatTimestamp(row.last_used_at),
        livemode: account.livemode,
      });
    }
    return views;
  }

  /**
   * True when a QR image link is this service's, for exactly these ids, and not expired (no I/O). `expires`
   * is the text of the link, so that only the spelling the service writes verifies (src/deposits/qr-image.ts).
   */
  verifyQrLink(input: { white_label_id: string; deposit_id: string; leg_ref: string; expires: string; signature: string }): boolean {
    const target = { white_label_id: input.white_label_id, deposit_id: input.deposit_id, leg_ref: input.leg_ref, expires: input.expires };
    return this.deps.qr_links.verify(target, input.signature, this.changes.now());
  }

  /**
   * The PNG of a leg's QR for a signed `qr_image_url`: only while the order awaits payment and the leg
   * is reserved; null (404) for anything else, a bad signature or an expired link.
   */
  async qrImage(db: Queryable, input: { white_label_id: string; deposit_id: string; leg_ref: string; expires: string; signature: string }): Promise<Buffer | null> {
    if (!this.verifyQrLink(input)) return null;
    const row = await repository.findOrderInBrand(db, input.white_label_id, input.deposit_id);
    if (!row || row.status !== 'awaiting_payment') return null;
    const leg = (await repository.listLegs(db, input.white_label_id, input.deposit_id)).find((candidate) => candidate.leg_ref === input.leg_ref);
    if (!leg || leg.status !== 'reserved') return null;
    const payee = await this.changes.payeeOf(db, row, leg);
    if (!payee) return null;
    return renderQrPng(promptPayPayload(payee.bank_code, payee.account_number, leg.amount_minor));
  }

  /** The caller's order, with payment instructions while it awaits payment and its `checkout_url`; null outside its scope. */
  async get(db: Queryable, account: DepositAccount, deposit_id: string): Promise<DepositView | null> {
    const found = await this.forCheckout(db, account, deposit_id);
    return found ? this.changes.withCheckoutUrl(db, found.view, account.white_label_id) : null;
  }

  /**
   * GET /v1/pay/deposits/{id}: the caller's order (`get`) and, once it settled, what its refunds have taken
   * (`refunds`, present on GET only, like a withdrawal's `fills[]`: the refunds are orders of their own, with their
   * own versions and events; docs/decisions/refunds.md).
   */
  async getWithRefunds(db: Queryable, account: DepositAccount, deposit_id: string): Promise<DepositView | null> {
    const view = await this.get(db, account, deposit_id);
    if (!view || (view.status !== 'settled' && view.status !== 'reversed')) return view;
    const cap = view.status === 'settled' ? (view.amount_received_minor ?? 0) : 0;
    return { ...view, refunds: await this.deps.withdrawals.refundSummary(db, account, deposit_id, cap) };
  }

  /**
   * The order as its hosted checkout page shows it (src/checkout/): the caller's view with payment
   * instructions while it awaits payment, and where the payer returns (`return_url`, not part of the
   * order object). Null outside the (brand, merchant, environment) scope.
   */
  async forCheckout(db: Queryable, account: DepositAccount, deposit_id: string): Promise<{ view: DepositView; return_url: string | null } | null> {
    const row = await repository.findOrder(db, account, deposit_id);
    if (!row) return null;
    const policy = row.status === 'awaiting_liquidity' ? await this.deps.policies.policyFor(db, row.white_label_id, row.livemode) : null;
    const view = await this.changes.view(db, row, policy ? await this.creation.liquidityInfo(db, row, policy) : undefined);
    return { view: await this.changes.withPaymentInstructions(db, view, row.white_label_id), return_url: row.return_url };
  }

  /**
   * The back office's search over a brand's deposits (the console's orders page), newest first; the caller asks
   * for one row more than its page to learn whether another follows.
   */
  searchInBrand(db: Queryable, white_label_id: string, filters: searchRepository.BrandSearchFilters): Promise<searchRepository.DepositSearchRow[]> {
    return searchRepository.searchOrdersInBrand(db, white_label_id, filters);
  }

  /**
   * A brand's deposit as the back office's order page shows it: the order's view, whose it is, and its legs with
   * the withdrawal each pays (which the API's leg view leaves out). Null for an unknown id or another brand's.
   */
  async backOfficeDetail(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ view: DepositView; merchant_id: string; legs: DepositLegRow[] } | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    const legs = await repository.listLegs(db, white_label_id, deposit_id);
    return { view: depositView(row, legs, { now: this.changes.now() }), merchant_id: row.merchant_id, legs };
  }
}

/** How many times the close job looks again (a minute apart) while a slip of the order waits to be processed. */
const CLOSE_WINDOW_MAX_ATTEMPTS = 1440;

/** The deposit module's job handlers (matching retry, expiry, close of the window); one short transaction each, a no-op once the order moved on. */
export function createDepositJobHandlers(database: Database, deposits: DepositService): Record<string, JobHandler> {
  return {
    [CLOSE_WINDOW_TASK]: async (job) => {
      const { white_label_id, deposit_id } = depositOfJob(job.payload);
      const attempt = Number(job.payload.attempt ?? 0);
      await database.transaction((tx) => deposits.closeWindow(tx, white_label_id, deposit_id, Number.isSafeInteger(attempt) ? attempt : 0));
    },
    [MATCH_RETRY_TASK]: async (job) => {
      const { white_label_id, deposit_id } = depositOfJob(job.payload);
      await database.transaction((tx) => deposits.retryMatching(tx, white_label_id, deposit_id));
    },
  };
}
