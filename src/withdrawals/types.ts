/** Row types of the withdrawals module. Column meanings are in migrations/0006_withdrawals.sql. */

export const WITHDRAWAL_STATUSES = ['pending_approval', 'open', 'partially_filled', 'settled', 'expired', 'canceled', 'rejected'] as const;
export type WithdrawalStatus = (typeof WITHDRAWAL_STATUSES)[number];

/** Statuses after which nothing about the order's money changes again, except a fill reversal. */
export const FINAL_WITHDRAWAL_STATUSES: ReadonlySet<WithdrawalStatus> = new Set(['settled', 'expired', 'canceled', 'rejected']);

/** Why a merchant or an operator refunds a deposit (migration 0034; docs/decisions/refunds.md). A closed list. */
export const REFUND_REASON_CODES = ['customer_request', 'canceled_purchase', 'duplicate_payment', 'overpayment', 'dispute_lost', 'claim_resolution', 'other'] as const;
export type RefundReasonCode = (typeof REFUND_REASON_CODES)[number];

export type LegStatus = 'reserved' | 'released' | 'filled' | 'reversed';
export type ReceiptState = 'awaiting_confirmation' | 'confirmed' | 'disputed' | 'reversed';
export type ClosedBy = 'merchant' | 'operator' | 'system';

/**
 * The order's `dispute` object as the withdrawing merchant sees it (spec: id, reason_code, amount_minor,
 * opened_at, respond_by, evidence_url; the rest is ours): a snapshot of its newest dispute, written on
 * the order row by the transition that opens or resolves it, so that the versioned view follows it.
 */
export interface DisputeSnapshot {
  id: string;
  reason_code: string;
  amount_minor: number;
  opened_at: string;
  respond_by: string;
  /** Where evidence is sent (POST), while the dispute is open. */
  evidence_url?: string;
  /** The fill (or, for ALLOCATION_CONFLICT, the released reservation) the dispute is about. */
  leg_ref: string;
  status: 'open' | 'resolved';
  resolution?: { outcome: 'withdrawer' | 'depositor'; resolved_at: string };
}

export interface WithdrawalAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

export interface WithdrawalPolicyRow {
  white_label_id: string;
  livemode: boolean;
  approval_threshold_minor: number | null;
  approval_ttl_seconds: number;
  expires_in_seconds: number;
  max_splits: number;
  min_amount_minor: number;
  max_amount_minor: number;
  created_at: Date;
  updated_at: Date;
}

export interface FeeBreakdownItem {
  component: string;
  amount_minor: number;
  rate_bps?: number;
}

export interface WithdrawalRow extends WithdrawalAccount {
  withdrawal_id: string;
  version: number;
  status: WithdrawalStatus;
  merchant_reference: string;
  end_user_ref: string;
  beneficiary_id: string;
  amount_total_minor: number;
  fee_total_minor: number;
  fee_breakdown: FeeBreakdownItem[];
  fee_recognized_minor: number;
  filled_minor: number;
  reserved_minor: number;
  remaining_minor: number;
  refunded_minor: number | null;
  settled_splits: number;
  max_splits: number;
  expires_at: Date;
  approval_expires_at: Date | null;
  refund_of_deposit_id: string | null;
  /** Why the deposit is refunded; set exactly on a refund (and on the replacement of a refund's reversed fill). */
  refund_reason_code: RefundReasonCode | null;
  /** The merchant's or operator's note on the refund, shown as text. */
  refund_note: string | null;
  replacement_of_withdrawal_id: string | null;
  metadata: Record<string, string> | null;
  client: Record<string, string> | null;
  close_reason_code: string | null;
  closed_by: ClosedBy | null;
  review_note: string | null;
  reserve_balance_transaction_id: string;
  release_balance_transaction_id: string | null;
  created_at: Date;
  updated_at: Date;
  closed_at: Date | null;
  /** The newest dispute of the order (migration 0013), or null. */
  dispute: DisputeSnapshot | null;
  /** True while money related to an unresolved dispute of the order is held. */
  funds_on_hold: boolean;
  /**
   * False for an order that only the deposits naming it may reserve (migration 0031): the sandbox scenarios'
   * dedicated withdrawals. The matching queue skips it; every other order is in the queue.
   */
  in_matching_queue: boolean;
}

export interface WithdrawalLegRow extends WithdrawalAccount {
  withdrawal_id: string;
  leg_ref: string;
  deposit_leg_key: string;
  deposit_id: string;
  amount_minor: number;
  reserved_amount_minor: number;
  status: LegStatus;
  sequence: number | null;
  fee_recognized_minor: number | null;
  settled_at: Date | null;
  balance_transaction_id: string | null;
  fee_balance_transaction_id: string | null;
  auto_confirm_at: Date | null;
  receipt_state: ReceiptState | null;
  release_reason_code: string | null;
  reversal_reason_code: string | null;
  replacement_withdrawal_id: string | null;
  created_at: Date;
  updated_at: Date;
}
