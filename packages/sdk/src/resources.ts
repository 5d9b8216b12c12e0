/**
 * The resources of the merchant API, typed by hand from the spec and the service's views (written before
 * the service published its OpenAPI document; see the package README). Conventions of the spec hold
 * throughout: money is integer satang in fields ending in `_minor`, timestamps are RFC 3339 UTC strings
 * with three millisecond digits, optional fields may be absent (never null unless typed so), and an
 * open enum is typed as its known values plus `string` (keep a default branch).
 */

/** An open enum: the values known today, and any other string a later version may add. */
export type OpenEnum<Known extends string> = Known | (string & {});

/** RFC 3339 UTC with three millisecond digits, such as `2026-08-01T00:00:00.000Z`. */
export type Timestamp = string;

// Deposits

/** Closed enum: the 9 deposit states. */
export type DepositStatus =
  | 'awaiting_liquidity'
  | 'awaiting_payment'
  | 'slip_processing'
  | 'under_review'
  | 'settled'
  | 'expired'
  | 'canceled'
  | 'rejected'
  | 'reversed';

export const DEPOSIT_STATUSES: readonly DepositStatus[] = [
  'awaiting_liquidity',
  'awaiting_payment',
  'slip_processing',
  'under_review',
  'settled',
  'expired',
  'canceled',
  'rejected',
  'reversed',
];

export interface DepositLeg {
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  expires_at: Timestamp;
  /** Progress display only, never a money status. */
  leg_status: 'pending' | 'complete';
  method: string;
  /** Render and discard: never log, store or forward it. */
  qr_payload?: string;
  qr_image_url?: string;
  receiver: { bank_code: string; bank_name_th: string; account_number_masked: string; account_name_masked: string };
}

export interface SlipUpload {
  /** A bearer capability for one deposit: never log it, never put it in a URL. */
  token: string;
  expires_at: Timestamp;
  /** The exact address to POST the slip to. */
  upload_url: string;
  max_bytes: number;
  content_types: string[];
}

export interface ReviewReason {
  code: OpenEnum<
    | 'SENDER_NAME_MISMATCH'
    | 'AMOUNT_MISMATCH'
    | 'NO_SLIP_IMAGE'
    | 'DUPLICATE_SLIP'
    | 'CANCELED_ORDER_SLIP'
    | 'LATE_SLIP'
    | 'BANK_DISABLED'
    | 'ALLOCATION_CONFLICT'
    | 'AMBIGUOUS_MATCH'
    | 'RECEIVER_MISMATCH'
  >;
  display_th: string;
  display_en: string;
  actionable_by: 'end_user' | 'support';
  detail?: Record<string, unknown>;
}

export interface Review {
  opened_at: Timestamp;
  escalated: boolean;
  four_eyes_required: boolean;
  estimated_resolution_bucket: 'under_15m' | 'under_1h' | 'under_4h' | 'extended';
  /** `reasons[0]` is the one to display. */
  reasons: ReviewReason[];
}

export interface Verification {
  amount_exact: boolean;
  within_time_window: boolean;
  sender_bank_match: boolean;
  sender_account_match: boolean;
  sender_name_match: boolean;
  receiver_match: boolean;
}

export interface Overpayment {
  claim_id: string;
  cause: 'same_transfer_excess' | 'additional_transfer';
  amount_minor: number;
  slip_received_at: Timestamp;
  status: 'open';
  action_required: 'contact_support';
  expected_response_at?: Timestamp;
}

export interface FeeBreakdownItem {
  component: OpenEnum<'processing_fee' | 'fixed_fee' | 'vat'>;
  amount_minor: number;
  rate_bps?: number;
}

export interface DepositOrder {
  id: string;
  object: 'deposit_order';
  /** Increases on every change; apply an event only when its version is higher than the stored one. */
  version: number;
  status: DepositStatus;
  /** Read this, not the status name, to decide whether the order is closed. */
  is_terminal: boolean;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  currency: 'THB';
  created_at: Timestamp;
  /** Use this value, never a constant: it may be about 4 minutes away and changes on matching. */
  expires_at: Timestamp;
  /** The hosted payment page; in API answers about one order, never in an event or a list. */
  checkout_url?: string;
  /** Only in the 201 create answer. */
  slip_upload?: SlipUpload;
  liquidity_source?: 'internal' | 'external_gateway';
  leg_count?: number;
  legs: DepositLeg[];
  sender: { bank_code: string; account_number_masked: string; account_name_th_masked: string };
  metadata?: Record<string, string>;
  liquidity?: { wait_started_at: Timestamp; estimated_wait_ms: number; retry_interval_ms: number; suggested_amounts_minor: number[] };
  /** Only in the 202 create answer: a lower bound for polling. */
  retry_after_seconds?: number;
  late_slip_accepted_until?: Timestamp | null;
  expired_reason?: string;
  canceled_by?: 'merchant' | 'end_user' | 'system';
  cancel_reason_code?: OpenEnum<'no_liquidity_available' | 'merchant_request' | 'end_user_request' | 'approval_ttl_expired'>;
  slip?: { received_at: Timestamp; is_late: boolean; attempts_left?: number };
  verification?: Verification;
  review?: Review;
  rejection?: { code: string; display_th: string; display_en: string };
  ordered_amount_minor?: number;
  transferred_amount_minor?: number;
  amount_received_minor?: number;
  overpayment?: Overpayment | null;
  fee_total_minor?: number;
  fee_breakdown?: FeeBreakdownItem[];
  credited_amount_minor?: number;
  partial?: boolean;
  settled_via?: 'auto' | 'review';
  balance_transaction_id?: string | null;
  settled_at?: Timestamp;
  clearing_available_at?: Timestamp | null;
  /** On GET of a settled or reversed order only, never in events: its refunds (`refunds.create`). */
  refunds?: DepositRefunds;
  reversal?: {
    reason_code: OpenEnum<'BANK_RECALL' | 'ACCOUNT_FROZEN' | 'SLIP_INVALIDATED_AFTER_SETTLEMENT' | 'DUPLICATE_CREDIT' | 'OPS_ERROR' | 'MERCHANT_DISPUTE_LOST'>;
    reverses_balance_transaction_id: string | null;
    balance_transaction_id: string | null;
    reversed_at?: Timestamp;
  };
  livemode: boolean;
}

/** What a deposit's refunds took of it; derived on read, so the deposit's `version` does not move with them. */
export interface DepositRefunds {
  /** What may still be refunded: the amount received, less every live refund and what closed refunds paid; 0 once reversed. */
  amount_refundable_minor: number;
  /** What the refunds have paid out to the payer so far. */
  amount_refunded_minor: number;
  /** The refunds (withdrawal ids), oldest first. */
  refund_ids: string[];
}

export interface DepositSender {
  bank_code: string;
  /** Digits only. */
  account_number: string;
  /** Without an honorific. */
  account_name_th: string;
  account_name_en?: string;
}

export interface DepositClient {
  device_fingerprint?: string;
  ip?: string;
  user_agent?: string;
}

export interface CreateDepositParams {
  /** Whole baht in satang (a multiple of 100), greater than 0. */
  amount_minor: number;
  currency: 'THB';
  merchant_reference: string;
  end_user_ref: string;
  sender?: DepositSender;
  sender_id?: string;
  /** Required in practice: without it the open-order cap drops to 1 and rate limiting is coarse. */
  client?: DepositClient;
  fill_preference?: 'any' | 'internal_only';
  min_ttl_seconds?: number;
  expires_in_seconds?: number;
  return_url?: string;
  metadata?: Record<string, string>;
}

export interface ListDepositsParams {
  status?: DepositStatus;
  end_user_ref?: string;
  from?: Timestamp;
  to?: Timestamp;
  order?: 'asc' | 'desc';
  limit?: number;
  cursor?: string;
}

export interface Sender {
  id: string;
  object: 'sender';
  end_user_ref: string;
  bank_code: string;
  bank_name_th: string;
  account_number_masked: string;
  account_name_th_masked: string;
  created_at: Timestamp;
  last_used_at: Timestamp;
  livemode: boolean;
}

// Withdrawals and beneficiaries

/** Closed enum: the 7 withdrawal states. */
export type WithdrawalStatus = 'pending_approval' | 'open' | 'partially_filled' | 'settled' | 'expired' | 'canceled' | 'rejected';

export interface Fill {
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  fee_recognized_minor: number;
  settled_at: Timestamp;
  balance_transaction_id: string;
  auto_confirm_at: Timestamp;
  receipt_state?: OpenEnum<'awaiting_confirmation' | 'confirmed' | 'disputed' | 'reversed'>;
}

export interface WithdrawalOrder {
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
  /** Overwrite from the latest version; never add up increments. */
  filled_minor: number;
  /** The part of this order being transferred now; unrelated to the wallet's reserved_minor. */
  reserved_minor: number;
  /** Amount still open; 0 once the order is closed. */
  remaining_minor: number;
  /** Once closed: the amount returned to the balance (unpaid remainder plus unused fee, and any fill reversed after the close). */
  refunded_minor?: number;
  settled_splits: number;
  max_splits: number;
  expires_at: Timestamp;
  approval_expires_at?: Timestamp;
  dispute?: {
    id: string;
    reason_code: string;
    amount_minor: number;
    opened_at: Timestamp;
    respond_by: Timestamp;
    evidence_url?: string;
    leg_ref: string;
    status: 'open' | 'resolved';
    resolution?: { outcome: 'withdrawer' | 'depositor'; resolved_at: Timestamp };
  };
  funds_on_hold: boolean;
  /** Present on a refund: the deposit it pays back (`refunds.create`). */
  refund_of_deposit_id?: string;
  /** Present on a refund: why the deposit is refunded. */
  refund_reason_code?: OpenEnum<RefundReasonCode>;
  /** Present on a refund created with a note. */
  refund_note?: string;
  replacement_of_withdrawal_id?: string;
  cancel_reason_code?: string;
  canceled_by?: 'merchant' | 'operator' | 'system';
  rejection?: { code: string };
  metadata?: Record<string, string>;
  livemode: boolean;
  created_at: Timestamp;
  closed_at?: Timestamp;
  /** On GET only. */
  fills?: Fill[];
  /** On `withdrawal.filled`: the chunk this event reports. */
  fill?: Fill;
}

export interface BeneficiaryAccount {
  bank_code: string;
  account_number: string;
  account_name_th: string;
  promptpay_id?: string;
}

export interface CreateWithdrawalParams {
  amount_minor: number;
  currency: 'THB';
  merchant_reference: string;
  end_user_ref: string;
  beneficiary_id?: string;
  beneficiary?: BeneficiaryAccount;
  client?: DepositClient;
  metadata?: Record<string, string>;
}

/** Filters of `withdrawals.list` (GET /v1/pay/withdrawals). A cursor is bound to the filters it came with; `limit` may change. */
export interface ListWithdrawalsParams {
  status?: WithdrawalStatus;
  /** The refunds of one deposit. */
  refund_of_deposit_id?: string;
  /** Exact match. */
  merchant_reference?: string;
  end_user_ref?: string;
  /** Inclusive, on `created_at`. */
  from?: Timestamp;
  /** Exclusive, on `created_at`. */
  to?: Timestamp;
  /** Newest first (`desc`) by default. */
  order?: 'asc' | 'desc';
  /** 1 to 100; 20 by default. */
  limit?: number;
  cursor?: string;
}

// Refunds (a refund is a withdrawal order with `refund_of_deposit_id`)

/** Why a deposit is refunded: a closed list on requests (a later version may add values to answers). */
export type RefundReasonCode = 'customer_request' | 'canceled_purchase' | 'duplicate_payment' | 'overpayment' | 'dispute_lost' | 'claim_resolution' | 'other';

export const REFUND_REASON_CODES: readonly RefundReasonCode[] = ['customer_request', 'canceled_purchase', 'duplicate_payment', 'overpayment', 'dispute_lost', 'claim_resolution', 'other'];

/**
 * The body of POST /v1/pay/deposits/{id}/refunds. There is no payee: a refund pays the account the bank verified as
 * the deposit's sender. Several refunds of one deposit may add up to its `amount_received_minor`.
 */
export interface CreateRefundParams {
  /** Whole baht in satang (a multiple of 100), greater than 0; the withdrawal fee is charged on top, to the merchant. */
  amount_minor: number;
  reason_code: RefundReasonCode;
  /** 1 to 500 characters. */
  note?: string;
  metadata?: Record<string, string>;
}

export interface Beneficiary {
  id: string;
  object: 'beneficiary';
  version: number;
  status: 'pending_verification' | 'verified' | 'rejected';
  bank_code: string;
  bank_name_th: string;
  account_number_masked: string;
  account_name_th: string;
  account_name_en?: string;
  promptpay_id_masked?: string;
  end_user_ref?: string;
  verification: { checked_at: Timestamp; name_match: boolean; failure_code?: string } | null;
  livemode: boolean;
  created_at: Timestamp;
  verified_at: Timestamp | null;
}

export interface CreateBeneficiaryParams extends BeneficiaryAccount {
  account_name_en?: string;
  end_user_ref?: string;
}

// Wallet

export type Bucket = 'available' | 'pending_clearing' | 'reserved';

export interface Balance {
  object: 'balance';
  /** The only number to decide withdrawals on. */
  available_minor: number;
  pending_clearing_minor: number;
  reserved_minor: number;
  currency: 'THB';
  livemode: boolean;
  as_of: Timestamp;
}

/** Immutable: no `version`; deduplicate by `id` and accumulate, never overwrite totals with `balance_after`. */
export interface BalanceTransaction {
  id: string;
  object: 'balance_transaction';
  type: OpenEnum<'deposit_settled' | 'clearing_released' | 'withdrawal_reserved' | 'withdrawal_settled' | 'withdrawal_released' | 'fee' | 'reversal' | 'adjustment'>;
  direction: 'credit' | 'debit';
  amount_minor: number;
  currency: 'THB';
  bucket_from: Bucket | null;
  bucket_to: Bucket | null;
  available_at?: Timestamp;
  balance_after: { available_minor: number; pending_clearing_minor: number; reserved_minor: number };
  source: { type: string; id: string };
  reverses_balance_transaction_id?: string;
  reason_code?: string;
  reason_display_th?: string;
  cleared_from_balance_transaction_id?: string;
  livemode: boolean;
  created_at: Timestamp;
}

export interface Bank {
  bank_code: string;
  name_th: string;
  name_en: string;
  available: boolean;
  /** For end users; present when unavailable. */
  message_th?: string;
  side: ('sender' | 'receiver')[];
}

// Lists

/** A page of a list with an opaque cursor. */
export interface CursorPage<Item> {
  object: 'list';
  data: Item[];
  has_more: boolean;
  next_cursor: string | null;
}

// Webhook signing keys and test vectors (public endpoints)

export interface WebhookSigningKey {
  kid: string;
  alg: 'Ed25519';
  /** SPKI DER, standard base64. */
  public_key: string;
  format: 'spki_der_base64';
  raw_public_key: string;
  status: OpenEnum<'active' | 'next' | 'retiring'>;
  not_before: Timestamp;
  not_after: Timestamp | null;
}

export interface ApiRequestVector {
  description: string;
  api_key: string;
  signing_secret: string;
  method: string;
  path: string;
  query: string;
  sorted_query: string;
  body: string;
  body_base64: string;
  body_sha256: string;
  timestamp: string;
  nonce: string;
  idempotency_key: string;
  api_version: string;
  canonical_string: string;
  signature: string;
  headers: Record<string, string>;
}

export interface WebhookVector {
  name: string;
  raw_body_base64: string;
  t: number;
  event_id: string;
  kid: string;
  signature: string;
  signature_header: string;
  public_key: string;
  raw_public_key: string;
  timestamp_validation: string;
}

export interface TestVectors {
  kind: string;
  timestamp_validation: string;
  vectors: Record<string, WebhookVector>;
  api_request_vectors: Record<string, ApiRequestVector>;
}
