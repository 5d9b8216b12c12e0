import { anyId } from 'promptparse/generate';
import { invariant } from '../platform/assert.ts';
import { formatTimestamp } from '../platform/time.ts';
import { maskAccount, maskName } from './masking.ts';
import { MAX_SLIP_UPLOADS } from './transitions.ts';
import type {
  CanceledBy,
  ClaimRecord,
  ClaimView,
  DepositLegRow,
  DepositRow,
  DepositStatus,
  OverpaymentSnapshot,
  RejectionObject,
  ReversalSnapshot,
  ReviewObject,
  VerificationBooleans,
} from './types.ts';

/**
 * How a deposit order is shown: the API's and the events' object, its legs with masked receivers, the
 * settlement fields with the spec's invariants asserted as they are shown, and the claim objects. Pure
 * functions of rows: no I/O here.
 */

export interface LegView {
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  expires_at: string;
  leg_status: 'pending' | 'complete';
  method: 'promptpay_qr';
  qr_payload?: string;
  qr_image_url?: string;
  receiver: { bank_code: string; bank_name_th: string; account_number_masked: string; account_name_masked: string };
}

export type DepositView = {
  id: string;
  object: 'deposit_order';
  version: number;
  status: DepositStatus;
  is_terminal: boolean;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  currency: 'THB';
  created_at: string;
  expires_at: string;
  /** The hosted payment page (src/checkout/): in API answers of one order only, never in an event or a list. */
  checkout_url?: string;
  liquidity_source?: 'internal' | 'external_gateway';
  leg_count?: number;
  legs: LegView[];
  sender: { bank_code: string; account_number_masked: string; account_name_th_masked: string };
  metadata?: Record<string, string>;
  liquidity?: { wait_started_at: string; estimated_wait_ms: number; retry_interval_ms: number; suggested_amounts_minor: number[] };
  late_slip_accepted_until?: string | null;
  expired_reason?: string;
  canceled_by?: CanceledBy;
  cancel_reason_code?: string;
  slip?: { received_at: string; is_late: boolean; attempts_left: number };
  ordered_amount_minor?: number;
  transferred_amount_minor?: number;
  amount_received_minor?: number;
  overpayment?: OverpaymentSnapshot | null;
  fee_total_minor?: number;
  fee_breakdown?: { component: string; amount_minor: number; rate_bps?: number }[];
  credited_amount_minor?: number;
  partial?: boolean;
  settled_via?: 'auto' | 'review';
  balance_transaction_id?: string | null;
  settled_at?: string;
  clearing_available_at?: string | null;
  reversal?: ReversalSnapshot;
  review?: ReviewObject;
  rejection?: RejectionObject;
  verification?: VerificationBooleans;
  /** On GET of a settled or reversed order only: what its refunds have taken (src/withdrawals `refundSummary`). */
  refunds?: { amount_refundable_minor: number; amount_refunded_minor: number; refund_ids: string[] };
  livemode: boolean;
};

/** The PromptPay AnyID payload for a transfer to a bank account (tag 29, proxy 04: bank code + account). */
export function promptPayPayload(bank_code: string, account_number: string, amount_minor: number): string {
  invariant(amount_minor > 0 && Number.isSafeInteger(amount_minor), 'a QR carries a positive whole number of satang');
  // Baht with two decimals: the only place satang become a decimal, and only for the QR text.
  const baht = Number(`${Math.trunc(amount_minor / 100)}.${String(amount_minor % 100).padStart(2, '0')}`);
  return anyId({ type: 'BANKACC', target: `${bank_code}${account_number}`, amount: baht });
}

function legView(leg: DepositLegRow): LegView {
  return {
    leg_ref: leg.leg_ref,
    sequence: leg.sequence,
    amount_minor: leg.amount_minor,
    expires_at: formatTimestamp(leg.expires_at),
    // A leg of a multi-leg order is complete once its verified slips paid it, before the order settles.
    leg_status: leg.status === 'filled' || (leg.status === 'reserved' && leg.paid_minor >= leg.amount_minor) ? 'complete' : 'pending',
    method: 'promptpay_qr',
    receiver: {
      bank_code: leg.receiver_bank_code,
      bank_name_th: leg.receiver_bank_name_th,
      account_number_masked: maskAccount(leg.receiver_account_last4),
      account_name_masked: leg.receiver_name_masked,
    },
  };
}

export interface ViewOptions {
  now: Date;
  liquidity?: DepositView['liquidity'];
}

/**
 * The order as the API and events show it. `is_terminal` follows `late_slip_accepted_until`: an
 * expired or canceled order is final once the close job has closed its late-slip window (a change with its
 * own version and event, `deposit.closed`), or at once when there was never a destination (null window).
 * It is read from the stored order, never from the clock, so that it never changes without a new version.
 */
export function depositView(row: DepositRow, legs: DepositLegRow[], options: ViewOptions): DepositView {
  const closedWithWindow = row.status === 'expired' || row.status === 'canceled';
  // A row from a read that does not name the column has it undefined: that is not a closed window.
  const windowClosed = row.late_slip_accepted_until === null || (row.window_closed_at ?? null) !== null;
  const isTerminal = row.status === 'rejected' || row.status === 'reversed' || (closedWithWindow && windowClosed);
  const activeLegs = legs.filter((leg) => leg.status !== 'released' || closedWithWindow);
  return {
    id: row.deposit_id,
    object: 'deposit_order',
    version: row.version,
    status: row.status,
    is_terminal: isTerminal,
    merchant_reference: row.merchant_reference,
    end_user_ref: row.end_user_ref,
    amount_minor: row.amount_minor,
    currency: 'THB',
    created_at: formatTimestamp(row.created_at),
    expires_at: formatTimestamp(row.expires_at),
    ...(row.liquidity_source ? { liquidity_source: row.liquidity_source } : {}),
    ...(activeLegs.length > 0 ? { leg_count: activeLegs.length } : {}),
    legs: activeLegs.map(legView),
    sender: {
      bank_code: row.sender_bank_code,
      account_number_masked: maskAccount(row.sender_account_last4),
      account_name_th_masked: maskName(row.sender_name_th),
    },
    ...(row.metadata ? { metadata: row.metadata } : {}),
    ...(row.status === 'awaiting_liquidity' && options.liquidity ? { liquidity: options.liquidity } : {}),
    ...(closedWithWindow ? { late_slip_accepted_until: row.late_slip_accepted_until ? formatTimestamp(row.late_slip_accepted_until) : null } : {}),
    ...(row.expired_reason ? { expired_reason: row.expired_reason } : {}),
    ...(row.canceled_by ? { canceled_by: row.canceled_by } : {}),
    ...(row.cancel_reason_code ? { cancel_reason_code: row.cancel_reason_code } : {}),
    ...(row.slip_received_at ? { slip: { received_at: formatTimestamp(row.slip_received_at), is_late: row.slip_is_late === true, attempts_left: MAX_SLIP_UPLOADS - row.slip_attempts } } : {}),
    ...(row.verification ? { verification: row.verification } : {}),
    ...(row.status === 'under_review' && row.review ? { review: row.review } : {}),
    ...(row.rejection ? { rejection: row.rejection } : {}),
    ...(row.settled_at ? settlementFields(row) : {}),
    ...(row.reversal ? { reversal: row.reversal } : {}),
    livemode: row.livemode,
  };
}

/** The fields present from settlement on (spec), with the five invariants asserted as they are shown. */
function settlementFields(row: DepositRow): Partial<DepositView> {
  invariant(
    row.transferred_amount_minor !== null && row.amount_received_minor !== null && row.fee_total_minor !== null && row.credited_amount_minor !== null && row.settled_at,
    'a settled order has its amounts',
  );
  assertSettlementInvariants({
    ordered: row.amount_minor,
    transferred: row.transferred_amount_minor,
    received: row.amount_received_minor,
    fee: row.fee_total_minor,
    credited: row.credited_amount_minor,
    overpayment: row.overpayment?.cause === 'same_transfer_excess' ? row.overpayment.amount_minor : null,
  });
  return {
    ordered_amount_minor: row.amount_minor,
    transferred_amount_minor: row.transferred_amount_minor,
    amount_received_minor: row.amount_received_minor,
    overpayment: row.overpayment,
    fee_total_minor: row.fee_total_minor,
    fee_breakdown: row.fee_breakdown ?? [],
    credited_amount_minor: row.credited_amount_minor,
    partial: row.partial === true,
    settled_via: row.settled_via ?? 'auto',
    balance_transaction_id: row.balance_transaction_id,
    settled_at: formatTimestamp(row.settled_at),
    clearing_available_at: row.clearing_available_at ? formatTimestamp(row.clearing_available_at) : null,
  };
}

/**
 * The spec's settlement invariants: 0 < A = min(V, X); 0 <= fee <= A; A - fee = credited; a same-slip
 * overpayment has V = A + E and A = X. (The fifth, that a later transfer changes neither V nor A, holds
 * because `recordAdditionalTransfer` writes neither.)
 */
export function assertSettlementInvariants(amounts: { ordered: number; transferred: number; received: number; fee: number; credited: number; overpayment: number | null }): void {
  invariant(amounts.received > 0 && amounts.received === Math.min(amounts.transferred, amounts.ordered), 'invariant 1: 0 < A = min(V, X)');
  invariant(amounts.fee >= 0 && amounts.fee <= amounts.received, 'invariant 2: 0 <= fee <= A');
  invariant(amounts.received - amounts.fee === amounts.credited, 'invariant 3: A - fee = credited');
  if (amounts.overpayment !== null) {
    invariant(amounts.transferred === amounts.received + amounts.overpayment && amounts.received === amounts.ordered, 'invariant 4: V = A + E and A = X');
  }
}

/** A registered sender as `GET /v1/pay/senders` shows it (the spec leaves the fields to us). */
export interface SenderView {
  id: string;
  object: 'sender';
  end_user_ref: string;
  bank_code: string;
  bank_name_th: string;
  account_number_masked: string;
  account_name_th_masked: string;
  created_at: string;
  last_used_at: string;
  livemode: boolean;
}

/** True when a slip proved the declared sender: bank, account and name all matched. */
export function senderVerified(verification: VerificationBooleans | null): boolean {
  return verification !== null && verification.sender_bank_match && verification.sender_account_match && verification.sender_name_match;
}

export function claimSnapshot(claim: ClaimRecord): OverpaymentSnapshot {
  invariant(claim.cause !== 'late_slip' && claim.amount_minor !== null, 'an overpayment claim has its excess');
  return {
    claim_id: claim.claim_id,
    cause: claim.cause,
    amount_minor: claim.amount_minor,
    slip_received_at: formatTimestamp(claim.slip_received_at),
    status: 'open',
    action_required: 'contact_support',
  };
}

export function claimView(claim: ClaimRecord): ClaimView {
  return {
    id: claim.claim_id,
    object: 'claim',
    deposit_id: claim.deposit_id,
    cause: claim.cause,
    status: claim.status,
    amount_minor: claim.amount_minor,
    created_at: formatTimestamp(claim.created_at),
    livemode: claim.livemode,
  };
}
