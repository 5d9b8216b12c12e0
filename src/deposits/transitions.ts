import { HOUR_MS, SECOND_MS } from '../platform/time.ts';
import type { ErrorOptions } from '../platform/errors.ts';
import { TransitionTable } from '../events/transition.ts';
import { DEPOSIT_STATUSES, type DepositStatus, type ReviewReason } from './types.ts';

/**
 * The deposit order's state machine (the one transition table every change goes through, applied by
 * `DepositChanges.transition`), the event each trigger writes, and the order's clocks and limits.
 */

export const MATCH_RETRY_TASK = 'deposits.match_retry';
export const EXPIRE_DEPOSIT_TASK = 'deposits.expire';
/** The end of an expired or canceled order's late-slip window: the order becomes terminal (`deposit.closed`). */
export const CLOSE_WINDOW_TASK = 'deposits.close_window';
/**
 * The options of `deposit_not_payable` for an order in `status`: a retry may succeed only for an order still
 * waiting for a destination (`awaiting_liquidity`, which gets one when it is matched); for any other status the
 * order will never have one to pay again, and the answer says so (`retryable` false).
 */
export function notPayableOptions(status: DepositStatus): ErrorOptions {
  return { details: { status }, retryable: status === 'awaiting_liquidity' };
}

/** The order a deposit deadline job names (`DepositChanges.retryJob`, `expireJob` write its payload). */
export function depositOfJob(payload: Record<string, unknown>): { white_label_id: string; deposit_id: string } {
  return { white_label_id: String(payload.white_label_id), deposit_id: String(payload.deposit_id) };
}

/** Matching is retried about every 10 seconds while an order waits for liquidity (spec, Limits). */
export const MATCH_RETRY_INTERVAL_MS = 10 * SECOND_MS;
/** The late-slip window: 24 hours after the transfer deadline (spec, Limits). */
export const LATE_SLIP_WINDOW_MS = 24 * HOUR_MS;

export const DEPOSIT_TRANSITIONS = new TransitionTable<DepositStatus>('deposit_order', DEPOSIT_STATUSES, [
  { from: null, to: 'awaiting_payment', trigger: 'create' },
  { from: null, to: 'awaiting_liquidity', trigger: 'create' },
  { from: 'awaiting_liquidity', to: 'awaiting_payment', trigger: 'matched' },
  { from: 'awaiting_liquidity', to: 'canceled', trigger: 'liquidity_timeout' },
  { from: 'awaiting_liquidity', to: 'canceled', trigger: 'cancel' },
  { from: 'awaiting_payment', to: 'expired', trigger: 'expire' },
  { from: 'awaiting_payment', to: 'canceled', trigger: 'cancel' },
  { from: 'awaiting_payment', to: 'slip_processing', trigger: 'slip_received' },
  { from: 'slip_processing', to: 'settled', trigger: 'settle' },
  { from: 'under_review', to: 'settled', trigger: 'settle' },
  { from: 'settled', to: 'reversed', trigger: 'reverse' },
  { from: 'settled', to: 'settled', trigger: 'overpaid' },
  // A slip for an expired order inside its late-slip window goes through the normal pipeline.
  { from: 'expired', to: 'slip_processing', trigger: 'slip_received' },
  { from: 'slip_processing', to: 'under_review', trigger: 'review' },
  // A slip for a canceled order inside its window is always reviewed (CANCELED_ORDER_SLIP).
  { from: 'canceled', to: 'under_review', trigger: 'review' },
  { from: 'under_review', to: 'under_review', trigger: 'escalate' },
  { from: 'under_review', to: 'rejected', trigger: 'reject' },
  { from: 'slip_processing', to: 'awaiting_payment', trigger: 'slip_unreadable' },
  { from: 'slip_processing', to: 'expired', trigger: 'slip_unreadable' },
  // Multi-leg orders (docs/decisions/verification.md, "Multi-leg orders"): a verified slip that pays some legs hands the order
  // back to awaiting payment of the others, and at the deadline a partially paid order settles short.
  { from: 'slip_processing', to: 'awaiting_payment', trigger: 'leg_paid' },
  { from: 'awaiting_payment', to: 'settled', trigger: 'settle' },
  // ... unless the brand's policy holds it: then a reviewer decides (docs/decisions/verification.md, "The policy hold").
  { from: 'awaiting_payment', to: 'under_review', trigger: 'review' },
  // A slip uploaded while the order is in review is attached to it (spec: "Evidence attached").
  { from: 'under_review', to: 'under_review', trigger: 'slip_attached' },
  // A withdrawer disputes a fill this order paid: its credit is held in clearing (clearing_available_at
  // null), then released when the dispute ends for the depositor (docs/decisions/disputes.md).
  { from: 'settled', to: 'settled', trigger: 'funds_held' },
  { from: 'settled', to: 'settled', trigger: 'funds_released' },
  // The late-slip window of an expired or canceled order passed with no slip: `is_terminal` turns true (deposit.closed).
  { from: 'expired', to: 'expired', trigger: 'close' },
  { from: 'canceled', to: 'canceled', trigger: 'close' },
]);

export const EVENT_OF_TRIGGER: Record<string, string> = {
  create: 'deposit.created',
  matched: 'deposit.matched',
  liquidity_timeout: 'deposit.canceled',
  cancel: 'deposit.canceled',
  expire: 'deposit.expired',
  slip_received: 'deposit.slip_received',
  settle: 'deposit.settled',
  reverse: 'deposit.reversed',
  overpaid: 'deposit.overpaid',
  review: 'deposit.under_review',
  escalate: 'deposit.review_updated',
  reject: 'deposit.rejected',
  slip_unreadable: 'deposit.slip_rejected',
  leg_paid: 'deposit.leg_paid',
  slip_attached: 'deposit.review_updated',
  funds_held: 'deposit.funds_held',
  funds_released: 'deposit.funds_released',
  close: 'deposit.closed',
};

/** Slips accepted per order, counting expired and not-yet-expired cases (spec, Limits). */
export const MAX_SLIP_UPLOADS = 3;

/**
 * The review reason of the brand's policy hold (spec: "policy hold" → `under_review`; the code is ours). The
 * deposit module opens such a review itself at the deadline of a held multi-leg order paid in part.
 */
export const POLICY_HOLD_REASON: ReviewReason = {
  code: 'POLICY_HOLD',
  display_th: 'รายการนี้ต้องได้รับการตรวจสอบจากเจ้าหน้าที่ก่อนยืนยัน เจ้าหน้าที่กำลังตรวจสอบ',
  display_en: 'This payment needs a check by support before it is confirmed; support is checking it.',
  actionable_by: 'support',
};

/** The review reason of a slip for a canceled order (spec: forced every time). */
export const CANCELED_ORDER_SLIP_REASON: ReviewReason = {
  code: 'CANCELED_ORDER_SLIP',
  display_th: 'รายการนี้ถูกยกเลิกแล้ว เจ้าหน้าที่กำลังตรวจสอบการโอนเงิน',
  display_en: 'This order was canceled; support is checking the transfer.',
  actionable_by: 'support',
};
