import type { Queryable } from '../platform/db.ts';
import type { EventCause } from '../platform/cause.ts';

/** Row types of the deposits module. Column meanings are in migrations/0007_deposits.sql. */

export const DEPOSIT_STATUSES = [
  'awaiting_liquidity',
  'awaiting_payment',
  'slip_processing',
  'under_review',
  'settled',
  'expired',
  'canceled',
  'rejected',
  'reversed',
] as const;
export type DepositStatus = (typeof DEPOSIT_STATUSES)[number];

export type FillPreference = 'any' | 'internal_only';
export type CanceledBy = 'merchant' | 'end_user' | 'system';
export type DepositLegStatus = 'reserved' | 'released' | 'filled';

export interface DepositAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

export interface DepositPolicyRow {
  white_label_id: string;
  livemode: boolean;
  min_amount_minor: number;
  max_amount_minor: number;
  default_expires_in_seconds: number;
  max_expires_in_seconds: number;
  max_legs: number;
  liquidity_wait_seconds: number;
  gateway_bank_code: string | null;
  gateway_account_sealed: string | null;
  gateway_account_last4: string | null;
  gateway_account_name_th: string | null;
  four_eyes_min_amount_minor: number | null;
  /** Whether the brand's orders show each leg's `qr_payload` (migration 0029). */
  qr_payload_enabled: boolean;
  policy_hold_min_amount_minor: number | null;
  created_at: Date;
  updated_at: Date;
}

export interface DepositRow extends DepositAccount {
  deposit_id: string;
  version: number;
  status: DepositStatus;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  sender_bank_code: string;
  sender_account_sealed: string;
  sender_account_hmac: string;
  sender_account_last4: string;
  sender_name_th: string;
  sender_name_en: string | null;
  sender_id: string | null;
  device_fingerprint: string | null;
  client: Record<string, string> | null;
  fill_preference: FillPreference;
  min_ttl_seconds: number | null;
  expires_in_seconds: number;
  return_url: string | null;
  metadata: Record<string, string> | null;
  liquidity_source: 'internal' | 'external_gateway' | null;
  expires_at: Date;
  wait_started_at: Date | null;
  late_slip_accepted_until: Date | null;
  expired_reason: string | null;
  canceled_by: CanceledBy | null;
  cancel_reason_code: string | null;
  slip_received_at: Date | null;
  slip_is_late: boolean | null;
  transferred_amount_minor: number | null;
  amount_received_minor: number | null;
  fee_total_minor: number | null;
  fee_breakdown: { component: string; amount_minor: number; rate_bps?: number }[] | null;
  credited_amount_minor: number | null;
  partial: boolean | null;
  settled_via: 'auto' | 'review' | null;
  balance_transaction_id: string | null;
  settled_at: Date | null;
  clearing_available_at: Date | null;
  overpayment: OverpaymentSnapshot | null;
  reversal: ReversalSnapshot | null;
  review: ReviewObject | null;
  rejection: RejectionObject | null;
  verification: VerificationBooleans | null;
  slip_attempts: number;
  /**
   * When the close job (deposits.close_window) closed the late-slip window of this expired or canceled order,
   * making it terminal (migration 0030); null before that, and for an order that never had a window.
   */
  window_closed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The `overpayment` object: an immutable snapshot of the claim at its creation (spec). */
export interface OverpaymentSnapshot {
  claim_id: string;
  cause: 'same_transfer_excess' | 'additional_transfer';
  amount_minor: number;
  slip_received_at: string;
  status: 'open';
  action_required: 'contact_support';
}

export interface ReversalSnapshot {
  reason_code: string;
  reverses_balance_transaction_id: string | null;
  balance_transaction_id: string | null;
  reversed_at: string;
}

/** Why a claim exists: an excess this service verified, or a transfer a payer reports after the late-slip window. */
export type ClaimCause = OverpaymentSnapshot['cause'] | 'late_slip';
/** A claim's life cycle (docs/decisions/claims.md): open, then investigating, then resolved or rejected. */
export type ClaimStatus = 'open' | 'investigating' | 'resolved' | 'rejected';

/**
 * Who opened a claim: the end user at `claim_url` (the order's capability), a back-office credential, or
 * the service itself when it verified an excess.
 */
export type ClaimOpener = { type: 'end_user' } | { type: 'backoffice'; credential_id: string } | { type: 'system' };

/** A claim as the deposit module knows it. Claims belong to the review module (src/review/claims.ts). */
export interface ClaimRecord extends DepositAccount {
  claim_id: string;
  deposit_id: string;
  cause: ClaimCause;
  /** The excess E; for a late-slip claim what the payer says they sent, or null. */
  amount_minor: number | null;
  slip_received_at: Date;
  status: ClaimStatus;
  created_at: Date;
}

/** What the deposit module asks the claims port to open, inside the transaction of the change that causes it. */
export interface OpenClaimInput extends DepositAccount {
  deposit_id: string;
  cause: ClaimCause;
  amount_minor: number | null;
  slip_received_at: Date;
  /** What makes the claim happen once: a second call with the same key returns the first claim. */
  dedupe_key: string;
  /** What the payer (or an operator for them) said about the transfer; null for an excess the service verified. */
  evidence: LateSlipClaimEvidence | null;
  opened_by: ClaimOpener;
  /** The request (or the system) that caused the claim, for its `claim.created` event. */
  cause_of_event: EventCause;
}

/**
 * The claims port: the deposit module opens claims through it inside its own transactions (settlement's
 * excess, a transfer after settlement, a late slip at `claim_url`) and never touches the claims table.
 * The review module implements it (ClaimRegistry) and is wired in src/app.ts, so that deposits imports
 * nothing from review and review may call the deposit service.
 */
export interface ClaimsPort {
  open(tx: Queryable, input: OpenClaimInput): Promise<{ claim: ClaimRecord; created: boolean }>;
}

/** A late-slip claim's content (POST at `claim_url`). */
export interface LateSlipClaimEvidence {
  trans_ref?: string;
  sending_bank_code?: string;
  occurred_at?: string;
  amount_minor?: number;
  note?: string;
}

/** A claim as its opener sees it. */
export interface ClaimView {
  id: string;
  object: 'claim';
  deposit_id: string;
  cause: ClaimCause;
  status: ClaimStatus;
  amount_minor: number | null;
  created_at: string;
  livemode: boolean;
}

export interface DepositLegRow {
  white_label_id: string;
  deposit_id: string;
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  expires_at: Date;
  status: DepositLegStatus;
  /** A withdrawal of the brand (peer to peer) or the brand's external gateway account (fallback). */
  destination: 'withdrawal' | 'gateway';
  withdrawal_id: string | null;
  withdrawal_leg_ref: string | null;
  receiver_bank_code: string;
  receiver_bank_name_th: string;
  receiver_account_last4: string;
  receiver_name_masked: string;
  created_at: Date;
  updated_at: Date;
  /** What verified slips paid into this leg while the order waited for its other legs (multi-leg orders). */
  paid_minor: number;
}

export interface SenderRow extends DepositAccount {
  sender_id: string;
  end_user_ref: string;
  bank_code: string;
  account_sealed: string;
  account_hmac: string;
  account_last4: string;
  name_th: string;
  name_en: string | null;
  verified_by_deposit_id: string;
  created_at: Date;
  last_used_at: Date;
}

/** One review reason (spec, review): `reasons[0]` is the one to display. */
export interface ReviewReason {
  code: string;
  display_th: string;
  display_en: string;
  actionable_by: 'end_user' | 'support';
  detail?: Record<string, unknown>;
}

export interface ReviewObject {
  opened_at: string;
  escalated: boolean;
  four_eyes_required: boolean;
  estimated_resolution_bucket: 'under_15m' | 'under_1h' | 'under_4h' | 'extended';
  reasons: ReviewReason[];
}

export interface RejectionObject {
  code: string;
  display_th: string;
  display_en: string;
}

/** The six booleans of a verified slip (spec, verification). */
export interface VerificationBooleans {
  amount_exact: boolean;
  within_time_window: boolean;
  sender_bank_match: boolean;
  sender_account_match: boolean;
  sender_name_match: boolean;
  receiver_match: boolean;
}
