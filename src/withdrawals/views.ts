import { invariant } from '../platform/assert.ts';
import { formatTimestamp } from '../platform/time.ts';
import type { ClosedBy, DisputeSnapshot, FeeBreakdownItem, ReceiptState, RefundReasonCode, WithdrawalAccount, WithdrawalLegRow, WithdrawalRow, WithdrawalStatus } from './types.ts';

/**
 * What the withdrawals module shows of its rows: the order and its fills as the API and events show them,
 * and the shapes its leg and matching functions answer the deposit side with.
 */

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
  refund_reason_code?: RefundReasonCode;
  refund_note?: string;
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
    ...(row.refund_reason_code ? { refund_reason_code: row.refund_reason_code } : {}),
    ...(row.refund_note ? { refund_note: row.refund_note } : {}),
    ...(row.replacement_of_withdrawal_id ? { replacement_of_withdrawal_id: row.replacement_of_withdrawal_id } : {}),
    ...(row.status === 'canceled' ? { cancel_reason_code: row.close_reason_code ?? 'canceled', ...(row.closed_by ? { canceled_by: row.closed_by } : {}) } : {}),
    ...(row.status === 'rejected' ? { rejection: { code: row.close_reason_code ?? 'approval_rejected' } } : {}),
    ...(row.metadata ? { metadata: row.metadata } : {}),
    livemode: row.livemode,
    created_at: formatTimestamp(row.created_at),
    ...(row.closed_at ? { closed_at: formatTimestamp(row.closed_at) } : {}),
  };
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

/** A withdrawal the matcher may reserve from: enough to plan legs and to lock its owner's event feed. */
export interface MatchableWithdrawal {
  id: string;
  /** The withdrawing merchant, whose feed the reservation writes to. */
  merchant_id: string;
  remaining_minor: number;
  /** The order's beneficiary: whom a leg of it pays (its payee can be read before the leg is reserved). */
  beneficiary_id: string;
}

/** A leg as the deposit side holds it: the reservation, and the order's beneficiary whom it pays. */
export function legReservation(leg: WithdrawalLegRow, order: Pick<WithdrawalRow, 'beneficiary_id'>): LegReservation {
  return {
    leg_ref: leg.leg_ref,
    withdrawal_id: leg.withdrawal_id,
    merchant_id: leg.merchant_id,
    beneficiary_id: order.beneficiary_id,
    amount_minor: leg.amount_minor,
    status: leg.status,
  };
}

/** The account a row belongs to and nothing else, for the ledger's posts and the events' envelopes. */
export function accountOf(row: WithdrawalAccount): WithdrawalAccount {
  return { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
}
