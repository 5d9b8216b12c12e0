import { anyId } from 'promptparse/generate';
import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { hmacSha256Hex, sha256Hex, type SecretBox } from '../platform/crypto.ts';
import { ApiError, fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, HOUR_MS, SECOND_MS } from '../platform/time.ts';
import { type EventsService } from '../events/service.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import { applyTransition, TransitionTable } from '../events/transition.ts';
import { scheduleJob, cancelJobsByKey, unscheduleJob, type JobHandler, type JobSpec } from '../jobs/index.ts';
import { findBank, listBanks } from '../banks/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { WithdrawalRow } from '../withdrawals/types.ts';
import type { MatchingService, NoMatch } from '../matching/service.ts';
import type { LedgerService } from '../ledger/service.ts';
import { CLEARING_PERIOD_MS } from '../ledger/service.ts';
import type { FeeService } from '../fees/service.ts';
import type { Payee } from '../beneficiaries/service.ts';
import type { CarriedRead, ReadPart } from '../platform/read-part.ts';
import { isUnitOfWork, keepCarried, takeCarried } from '../platform/unit-of-work.ts';
import * as repository from './repository.ts';
import type { DepositPolicy, DepositPolicyService } from './policy.ts';
import { claimUrl, SLIP_CLAIM_PERIOD_MS, slipUploadOf, slipUploadUrl, type SlipTokenSigner, type SlipUpload } from '../slips/capability.ts';
import { renderQrPng, type QrImageLinks } from './qr-image.ts';
import type { DepositScenariosFor } from './scenario-hooks.ts';
import {
  DEPOSIT_STATUSES,
  type CanceledBy,
  type DepositAccount,
  type DepositLegRow,
  type DepositRow,
  type DepositStatus,
  type FillPreference,
  type ClaimOpener,
  type ClaimRecord,
  type ClaimsPort,
  type ClaimView,
  type LateSlipClaimEvidence,
  type OverpaymentSnapshot,
  type RejectionObject,
  type ReversalSnapshot,
  type ReviewObject,
  type ReviewReason,
  type VerificationBooleans,
} from './types.ts';
import { maskAccount, maskName } from './masking.ts';
import { GATEWAY_ACCOUNT_PURPOSE } from './policy.ts';

/**
 * Deposit orders up to the slip: creation with its request rules, peer-to-peer matching against the
 * brand's open withdrawals (through the withdrawal service's leg functions, never its tables), the
 * liquidity wait, expiry and cancel. Every status change goes through `applyTransition` with
 * DEPOSIT_TRANSITIONS in the transaction of the change.
 */

export const MATCH_RETRY_TASK = 'deposits.match_retry';
export const EXPIRE_DEPOSIT_TASK = 'deposits.expire';
/** Matching is retried about every 10 seconds while an order waits for liquidity (spec, Limits). */
export const MATCH_RETRY_INTERVAL_MS = 10 * SECOND_MS;
/** The late-slip window: 24 hours after the transfer deadline (spec, Limits). */
export const LATE_SLIP_WINDOW_MS = 24 * HOUR_MS;
/** Open unpaid orders per end user: 2 per device with a complete `client`, else 1 (spec, Limits). */
export const OPEN_ORDER_CAP_WITH_CLIENT = 2;
export const OPEN_ORDER_CAP_WITHOUT_CLIENT = 1;
/** What `sender_bank_unavailable` suggests as a wait before trying the same bank again. */
export const SENDER_BANK_RETRY_HINT_SECONDS = 1800;
const DEFAULT_BANK_UNAVAILABLE_MESSAGE_TH = 'ธนาคารของท่านไม่พร้อมให้บริการชั่วคราว กรุณาเลือกบัญชีธนาคารอื่น';

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
  // A slip uploaded while the order is in review is attached to it (spec: "Evidence attached").
  { from: 'under_review', to: 'under_review', trigger: 'slip_attached' },
  // A withdrawer disputes a fill this order paid: its credit is held in clearing (clearing_available_at
  // null), then released when the dispute ends for the depositor (docs/decisions/disputes.md).
  { from: 'settled', to: 'settled', trigger: 'funds_held' },
  { from: 'settled', to: 'settled', trigger: 'funds_released' },
]);

const EVENT_OF_TRIGGER: Record<string, string> = {
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
};

/** Slips accepted per order, counting expired and not-yet-expired cases (spec, Limits). */
export const MAX_SLIP_UPLOADS = 3;

/** The review reason of a slip for a canceled order (spec: forced every time). */
export const CANCELED_ORDER_SLIP_REASON: ReviewReason = {
  code: 'CANCELED_ORDER_SLIP',
  display_th: 'รายการนี้ถูกยกเลิกแล้ว เจ้าหน้าที่กำลังตรวจสอบการโอนเงิน',
  display_en: 'This order was canceled; support is checking the transfer.',
  actionable_by: 'support',
};

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
 * expired or canceled order is final only once its late-slip window has passed, or when there was
 * never a destination (null window).
 */
export function depositView(row: DepositRow, legs: DepositLegRow[], options: ViewOptions): DepositView {
  const closedWithWindow = row.status === 'expired' || row.status === 'canceled';
  const windowPassed = row.late_slip_accepted_until === null || row.late_slip_accepted_until.getTime() <= options.now.getTime();
  const isTerminal = row.status === 'rejected' || row.status === 'reversed' || (closedWithWindow && windowPassed);
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
}

export interface CreateDepositInput {
  amount_minor: number;
  merchant_reference: string;
  end_user_ref: string;
  sender?: { bank_code: string; account_number: string; account_name_th: string; account_name_en?: string | undefined } | undefined;
  sender_id?: string | undefined;
  client?: { device_fingerprint?: string | undefined; ip?: string | undefined; user_agent?: string | undefined } | undefined;
  fill_preference?: FillPreference | undefined;
  min_ttl_seconds?: number | undefined;
  expires_in_seconds?: number | undefined;
  return_url?: string | undefined;
  metadata?: Record<string, string> | undefined;
}

export interface CreatedDeposit {
  deposit: DepositView;
  /** The capability to upload the slip: on the 201 path only. */
  slip_upload?: SlipUpload;
  /** 201 when matched at once, 202 when waiting for liquidity. */
  matched: boolean;
  retry_after_seconds?: number;
}

export interface DepositDependencies {
  events: EventsService;
  clock: Clock;
  secretBox: SecretBox;
  withdrawals: WithdrawalService;
  policies: DepositPolicyService;
  /** From `deriveAccountLookupKey(master_key)`: the HMAC key of account identities. */
  account_lookup_key: Buffer;
  matching: MatchingService;
  ledger: LedgerService;
  fees: FeeService;
  slip_tokens: SlipTokenSigner;
  qr_links: QrImageLinks;
  /** The service's own address, for `qr_image_url`. */
  public_base_url: () => string;
  /** The base of upload URLs (UPLOAD_BASE_URL, else the service's own address), read when a token is made. */
  upload_base_url: () => string;
  /** Opens claims inside this module's transactions (the review module owns them; see ClaimsPort). */
  claims: ClaimsPort;
  /** Where a test-mode order's sandbox scenario acts; live orders get hooks that do nothing. */
  scenarios: DepositScenariosFor;
  /** What slip intake holds of an order: cancel and expiry wait for, or refuse over, its receipts (src/slips/activity.ts). */
  slip_activity: SlipActivityProbe;
  /** A new review's estimated wait, from the review desk's pace (src/review/pace.ts). */
  review_estimate: ReviewEstimate;
  /** An order's `checkout_url` (src/checkout/addresses.ts). */
  checkout_links: CheckoutLinkProvider;
  /** Which late legs a resolved dispute's adjustment paid (the disputes module's covers). */
  leg_covers: LegCover;
}

/** An order's payer and payees in full (see `DepositService.paymentParties`). */
export interface PaymentParties {
  order: DepositRow;
  sender: { bank_code: string; account_number: string; name_th: string; name_en: string | null; registered: boolean };
  legs: (DepositLegRow & { receiver: Payee | null })[];
  /** Reviews of orders at or above this amount need two approvers; null: never (brand policy). */
  four_eyes_min_amount_minor: number | null;
}

/**
 * The review desk's estimate of a new review's wait (`review.estimated_resolution_bucket`), from the orders
 * in review ahead of it (counted here, as the review opens) and the desk's pace (the review module's
 * `ReviewPace`, given to this service's constructor: it reads only the desk's own decisions).
 */
export type ReviewEstimate = (
  db: Queryable,
  input: { white_label_id: string; livemode: boolean; four_eyes_required: boolean; escalated: boolean; in_review_ahead: number },
) => Promise<ReviewObject['estimated_resolution_bucket']>;

/** An order's hosted checkout link (`checkout_url`), from its brand's checkout origin, in the caller's transaction. */
export type CheckoutLinkProvider = (db: Queryable, order: { white_label_id: string; deposit_id: string }) => Promise<string>;

/** What slip intake holds of an order, asked by cancel and expiry (the slips module's `SlipActivity`). */
export type SlipActivityProbe = (db: Queryable, white_label_id: string, deposit_id: string) => Promise<{ total: number; unprocessed: number }>;

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

const SENDER_ACCOUNT_PURPOSE = 'deposit.sender_account_number';

/** Marks, in a transaction's memo, an order locked for its own change (`DepositService.lockForOwnChange`). */
function ownChangeMemoKey(white_label_id: string, deposit_id: string): string {
  return `deposits:own_change:${white_label_id}:${deposit_id}`;
}

/** Where a transaction keeps the legs a settlement lock read answered until a later statement confirms them (`settlementLockRead`). */
function unconfirmedLegsMemoKey(white_label_id: string, deposit_id: string): string {
  return `deposits:unconfirmed_legs:${white_label_id}:${deposit_id}`;
}

/**
 * Thrown at the feed-lock statement of a transaction whose settlement lock read (`settlementLockRead`) answered
 * legs older than the order it locked (its lock waited for a change of the legs that then committed): the
 * withdrawals it locked may not be the ones the legs name now. The transaction is rolled back and taken again.
 */
export class LegsChangedMeanwhile extends Error {
  override name = 'LegsChangedMeanwhile';
  constructor() {
    super("the order's legs changed while its lock was waited for");
  }
}

/** Marks, in a transaction's memo, an order locked with its withdrawals and feeds (`lockWithdrawalsAndFeedsOf`). */
function wideChangeMemoKey(white_label_id: string, deposit_id: string): string {
  return `deposits:wide_change:${white_label_id}:${deposit_id}`;
}

function validationError(path: string, reason: string, hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [hint ? { path, reason, hint } : { path, reason }] } });
}

export class DepositService {
  constructor(private readonly deps: DepositDependencies) {}

  /** The view with its `checkout_url`, placed after `expires_at` as the spec's field table has it. */
  private async withCheckoutUrl(db: Queryable, view: DepositView, white_label_id: string): Promise<DepositView> {
    const checkout_url = await this.deps.checkout_links(db, { white_label_id, deposit_id: view.id });
    const { id, object, version, status, is_terminal, merchant_reference, end_user_ref, amount_minor, currency, created_at, expires_at, ...rest } = view;
    return { id, object, version, status, is_terminal, merchant_reference, end_user_ref, amount_minor, currency, created_at, expires_at, checkout_url, ...rest };
  }

  private now(): Date {
    return this.deps.clock.now();
  }

  /** The end of an order's late-slip window: 24 h after its transfer deadline (none for sandbox scenario 112.00). */
  private lateSlipAcceptedUntil(row: DepositRow): Date {
    const window_ms = this.deps.scenarios(row.livemode).lateSlipWindowMs(row) ?? LATE_SLIP_WINDOW_MS;
    return new Date(row.expires_at.getTime() + window_ms);
  }

  private async view(db: Queryable, row: DepositRow, liquidity?: DepositView['liquidity']): Promise<DepositView> {
    const legs = await repository.listLegs(db, row.white_label_id, row.deposit_id);
    return depositView(row, legs, { now: this.now(), ...(liquidity ? { liquidity } : {}) });
  }

  /** Adds the QR payload to each live leg: built from the payee's account on every read, never stored. */
  private async withPaymentInstructions(
    db: Queryable,
    view: DepositView,
    white_label_id: string,
    known?: { rows: DepositLegRow[]; payees: Map<string, Payee> },
  ): Promise<DepositView> {
    if (view.status !== 'awaiting_payment') return view;
    const legs: LegView[] = [];
    // The creating request knows its legs and their payees already; every other read looks them up.
    const rows = known?.rows ?? (await repository.listLegs(db, white_label_id, view.id));
    for (const leg of view.legs) {
      const row = rows.find((candidate) => candidate.leg_ref === leg.leg_ref);
      const destination = row ? (known?.payees.get(row.leg_ref) ?? (await this.payeeOf(db, view.livemode, row))) : null;
      if (!row || !destination || row.status !== 'reserved' || row.paid_minor > 0) {
        legs.push(leg);
        continue;
      }
      const qr_image_url = this.deps.qr_links.url(this.deps.public_base_url(), {
        white_label_id,
        deposit_id: view.id,
        leg_ref: leg.leg_ref,
        expires: Math.floor(row.expires_at.getTime() / 1000),
      });
      legs.push({ ...leg, qr_payload: promptPayPayload(destination.bank_code, destination.account_number, leg.amount_minor), qr_image_url });
    }
    return { ...view, legs };
  }

  /** Who a leg pays, in full: the withdrawal's beneficiary, or the brand's gateway account. */
  private async payeeOf(
    db: Queryable,
    livemode: boolean,
    leg: DepositLegRow,
    known_policy?: DepositPolicy,
  ): Promise<{ bank_code: string; account_number: string; account_name_th: string } | null> {
    if (leg.destination === 'withdrawal') {
      invariant(leg.withdrawal_leg_ref, 'a withdrawal leg names its withdrawal leg');
      return this.deps.withdrawals.destinationOf(db, leg.white_label_id, leg.withdrawal_leg_ref);
    }
    // The caller may have read the brand's policy already in this transaction.
    const policy = known_policy ?? (await this.deps.policies.policyFor(db, leg.white_label_id, livemode));
    if (!policy.gateway) return null;
    return {
      bank_code: policy.gateway.bank_code,
      account_number: this.deps.secretBox.open(policy.gateway.account_sealed, GATEWAY_ACCOUNT_PURPOSE),
      account_name_th: policy.gateway.account_name_th,
    };
  }

  private async transition(
    tx: Queryable,
    input: {
      before: DepositRow | null;
      after: DepositRow;
      trigger: string;
      cause: EventCause;
      legs?: DepositLegRow[];
      jobs?: JobSpec[];
      liquidity?: DepositView['liquidity'];
      /** Shown in the event only, beside the order (e.g. the claim of a later transfer). */
      event_extra?: Record<string, unknown>;
    },
  ): Promise<DepositView> {
    const existingLegs = input.before ? await repository.listLegs(tx, input.after.white_label_id, input.after.deposit_id) : [];
    const legsAfter = [...existingLegs.map((leg) => input.legs?.find((changed) => changed.leg_ref === leg.leg_ref) ?? leg), ...(input.legs ?? []).filter((leg) => !existingLegs.some((old) => old.leg_ref === leg.leg_ref))];
    const now = this.now();
    const beforeView = input.before ? depositView(input.before, existingLegs, { now }) : null;
    const afterView = depositView(input.after, legsAfter, { now, ...(input.liquidity ? { liquidity: input.liquidity } : {}) });
    const result = await applyTransition(tx, this.deps, {
      table: DEPOSIT_TRANSITIONS,
      trigger: input.trigger,
      before: beforeView,
      after: afterView,
      persist: async (db) => {
        if (input.before) {
          if (!(await repository.updateOrder(db, input.after, input.before.version))) return false;
        } else {
          // The reference was free when the creation read it; one taken since makes the queued insert
          // change nothing, and the flush throws this, rolling back everything the creation wrote.
          const reference = input.after.merchant_reference;
          await repository.insertOrder(db, input.after, () => new ApiError('merchant_reference_in_use', { details: { merchant_reference: reference } }));
        }
        // The legs move under the order's lock: their guards can only fail through a bug, which the flush reports.
        for (const leg of input.legs ?? []) {
          const old = existingLegs.find((candidate) => candidate.leg_ref === leg.leg_ref);
          if (!old) await repository.insertLeg(db, leg);
          else if (old.status !== leg.status) await repository.setLockedLegStatus(db, leg, old.status);
        }
        return true;
      },
      event: {
        type: EVENT_OF_TRIGGER[input.trigger] ?? 'deposit.updated',
        white_label_id: input.after.white_label_id,
        merchant_id: input.after.merchant_id,
        livemode: input.after.livemode,
        cause: input.cause,
        ...(input.event_extra && beforeView
          ? { object: { ...afterView, ...input.event_extra }, before_object: { ...beforeView, ...input.event_extra } }
          : {}),
      },
      ...(input.jobs ? { jobs: input.jobs } : {}),
    });
    if (!result.ok) throw new ApiError('merchant_reference_in_use', { details: { merchant_reference: input.after.merchant_reference } });
    return result.view;
  }

  private senderHmac(bank_code: string, account_number: string): string {
    return hmacSha256Hex(this.deps.account_lookup_key, `${bank_code}:${account_number}`);
  }

  /**
   * Creates a deposit: request rules, open-order caps, duplicate check, then matching. Matched at once:
   * `awaiting_payment` with legs (201). Nothing to match: `awaiting_liquidity` with a durable retry
   * every 10 seconds (202). Refusals throw the spec's error; nothing is written then.
   */
  async create(
    tx: Queryable,
    account: DepositAccount,
    input: CreateDepositInput,
    cause: EventCause,
    options: {
      /**
       * Sandbox scenario 107.00 THB: a deposit of the sandbox counterparty that pays a chunk of this one
       * withdrawal. It is matched to that order alone (refused with `withdrawal_state_conflict` when the
       * order cannot take it, never left waiting for other liquidity), and a chunk may be smaller than the
       * brand's minimum amount. Test mode only.
       */
      fill_withdrawal_id?: string;
    } = {},
  ): Promise<CreatedDeposit> {
    const now = this.now();
    // One end user's creations are serialised (so two concurrent requests count each other), and the
    // brand's policy is read, in one round trip.
    const policy = await this.deps.policies.policyForCreation(tx, account, input.end_user_ref);
    const chunk = options.fill_withdrawal_id !== undefined;
    invariant(!chunk || !account.livemode, 'only sandbox scenario deposits name the withdrawal they fill');
    const withinPolicy = chunk ? input.amount_minor > 0 : input.amount_minor >= policy.min_amount_minor && input.amount_minor <= policy.max_amount_minor;
    if (input.amount_minor % 100 !== 0 || !withinPolicy) {
      throw new ApiError('amount_not_supported', { details: { min_minor: policy.min_amount_minor, max_minor: policy.max_amount_minor } });
    }
    if (!input.sender && !input.sender_id) throw new ApiError('sender_required');
    if (input.sender && input.sender_id !== undefined) throw validationError('sender_id', 'not_allowed_with', 'send sender or sender_id, not both');
    // The declared sender: the one in the body, or the registered sender the id names (its account stays sealed).
    let sender: { bank_code: string; account_sealed: string; account_hmac: string; account_last4: string; account_name_th: string; account_name_en: string | null; sender_id: string | null };
    if (input.sender_id !== undefined) {
      const registered = await repository.findSender(tx, account, input.sender_id);
      if (!registered || registered.end_user_ref !== input.end_user_ref) throw validationError('sender_id', 'unknown_sender', 'an id from GET /v1/pay/senders for this end_user_ref');
      sender = {
        bank_code: registered.bank_code,
        account_sealed: registered.account_sealed,
        account_hmac: registered.account_hmac,
        account_last4: registered.account_last4,
        account_name_th: registered.name_th,
        account_name_en: registered.name_en,
        sender_id: registered.sender_id,
      };
    } else {
      const declared = input.sender;
      invariant(declared, 'a sender is present');
      sender = {
        bank_code: declared.bank_code,
        account_sealed: this.deps.secretBox.seal(declared.account_number, SENDER_ACCOUNT_PURPOSE),
        account_hmac: this.senderHmac(declared.bank_code, declared.account_number),
        account_last4: declared.account_number.slice(-4),
        account_name_th: declared.account_name_th,
        account_name_en: declared.account_name_en ?? null,
        sender_id: null,
      };
    }
    const bank = await findBank(tx, sender.bank_code);
    if (!bank) throw validationError('sender.bank_code', 'unknown_bank', 'a three-digit code from GET /v1/pay/banks');
    if (!bank.available || !bank.sides.includes('sender')) {
      const alternatives = (await listBanks(tx)).filter((candidate) => candidate.available && candidate.side.includes('sender') && candidate.bank_code !== bank.bank_code);
      throw new ApiError('sender_bank_unavailable', {
        details: {
          bank_code: bank.bank_code,
          alternative_banks: alternatives.map((candidate) => ({ bank_code: candidate.bank_code, name_th: candidate.name_th, name_en: candidate.name_en })),
          public_message_th: bank.message_th ?? DEFAULT_BANK_UNAVAILABLE_MESSAGE_TH,
          retry_after_hint_seconds: SENDER_BANK_RETRY_HINT_SECONDS,
        },
      });
    }
    // A sandbox scenario may answer instead of creating (115.00 THB's key conflict: a merchant sees its
    // handling of the 409 with one request), and may fix the lifetime (104.00: about 4 minutes; the expiry
    // scenarios: 60 s).
    const scenario = this.deps.scenarios(account.livemode);
    const scenarioRefusal = scenario.refuseCreation({ amount_minor: input.amount_minor, request_id: cause.request_id });
    if (scenarioRefusal) throw scenarioRefusal;
    const expiresIn = scenario.lifetimeSeconds(input) ?? Math.min(input.expires_in_seconds ?? policy.default_expires_in_seconds, policy.max_expires_in_seconds);
    if (input.min_ttl_seconds !== undefined && input.min_ttl_seconds > expiresIn) {
      throw validationError('min_ttl_seconds', 'exceeds_order_lifetime', `at most ${expiresIn} seconds under this brand's policy`);
    }
    const hmac = sender.account_hmac;
    const client = input.client;
    const clientComplete = Boolean(client?.device_fingerprint && client.ip && client.user_agent);
    const deposit_id = newId('deposit');
    // The duplicate, open-order and reference checks ride on the matching queue's candidate statement, the
    // next statement this creation sends; they are decided right after matching, before this creation
    // writes anything of its own, and the reservations matching queued roll back with a refusal.
    const conflictsPart = repository.creationConflictsPart(account, {
      merchant_reference: input.merchant_reference,
      amount_minor: input.amount_minor,
      sender_account_hmac: hmac,
      end_user_ref: input.end_user_ref,
      device_fingerprint: clientComplete ? (client?.device_fingerprint ?? null) : null,
    });
    const conflictsRead: CarriedRead = { key: `deposits:creation-conflicts:${deposit_id}`, part: conflictsPart };
    const row: DepositRow = {
      ...account,
      deposit_id,
      version: 1,
      status: 'awaiting_liquidity',
      merchant_reference: input.merchant_reference,
      end_user_ref: input.end_user_ref,
      amount_minor: input.amount_minor,
      sender_bank_code: sender.bank_code,
      sender_account_sealed: sender.account_sealed,
      sender_account_hmac: hmac,
      sender_account_last4: sender.account_last4,
      sender_name_th: sender.account_name_th,
      sender_name_en: sender.account_name_en,
      sender_id: sender.sender_id,
      device_fingerprint: clientComplete ? (client?.device_fingerprint ?? null) : null,
      client: client ? (Object.fromEntries(Object.entries(client).filter(([, value]) => value !== undefined)) as Record<string, string>) : null,
      fill_preference: input.fill_preference ?? 'any',
      min_ttl_seconds: input.min_ttl_seconds ?? null,
      expires_in_seconds: expiresIn,
      return_url: input.return_url ?? null,
      metadata: input.metadata ?? null,
      liquidity_source: null,
      expires_at: now,
      wait_started_at: null,
      late_slip_accepted_until: null,
      expired_reason: null,
      canceled_by: null,
      cancel_reason_code: null,
      slip_received_at: null,
      slip_is_late: null,
      transferred_amount_minor: null,
      amount_received_minor: null,
      fee_total_minor: null,
      fee_breakdown: null,
      credited_amount_minor: null,
      partial: null,
      settled_via: null,
      balance_transaction_id: null,
      settled_at: null,
      clearing_available_at: null,
      overpayment: null,
      reversal: null,
      review: null,
      rejection: null,
      verification: null,
      slip_attempts: 0,
      created_at: now,
      updated_at: now,
    };

    const reservation = await this.reserve(tx, row, policy, cause, options.fill_withdrawal_id, [conflictsRead]);
    const carriedConflicts = takeCarried(tx, conflictsRead.key);
    const conflicts = carriedConflicts.found ? (carriedConflicts.value as repository.CreationConflicts) : await repository.readCreationConflicts(tx, conflictsPart);
    if (conflicts.reference_taken) throw new ApiError('merchant_reference_in_use', { details: { merchant_reference: input.merchant_reference } });
    if (conflicts.duplicate_ids.length > 0) throw new ApiError('duplicate_open_deposit', { details: { open_deposit_ids: conflicts.duplicate_ids } });
    const cap = clientComplete ? OPEN_ORDER_CAP_WITH_CLIENT : OPEN_ORDER_CAP_WITHOUT_CLIENT;
    if (conflicts.open_ids.length >= cap) throw new ApiError('too_many_open_deposits', { details: { open_deposit_ids: conflicts.open_ids, limit: cap } });
    if (chunk && !('legs' in reservation)) throw new ApiError('withdrawal_state_conflict', { details: { reason: 'not_matchable' } });
    if ('legs' in reservation) {
      const matched: DepositRow = { ...row, status: 'awaiting_payment', liquidity_source: reservation.source, expires_at: new Date(now.getTime() + expiresIn * SECOND_MS) };
      const legs = reservation.legs.map((leg) => ({ ...leg, expires_at: matched.expires_at }));
      const view = await this.transition(tx, { before: null, after: matched, trigger: 'create', cause, legs, jobs: [this.expireJob(matched), ...(chunk ? [] : this.deps.scenarios(matched.livemode).afterCreation(matched))] });
      const withInstructions = await this.withPaymentInstructions(tx, view, account.white_label_id, { rows: legs, payees: reservation.payees });
      return {
        deposit: await this.withCheckoutUrl(tx, withInstructions, account.white_label_id),
        slip_upload: this.slipUpload(matched, cause.api_version),
        matched: true,
      };
    }
    const waiting: DepositRow = { ...row, wait_started_at: now, expires_at: new Date(now.getTime() + policy.liquidity_wait_seconds * SECOND_MS) };
    const liquidity = await this.liquidityInfo(tx, waiting, policy);
    const view = await this.transition(tx, { before: null, after: waiting, trigger: 'create', cause, jobs: [this.retryJob(waiting, reservation.wait_until), ...this.deps.scenarios(waiting.livemode).afterCreation(waiting)], liquidity });
    return { deposit: await this.withCheckoutUrl(tx, view, account.white_label_id), matched: false, retry_after_seconds: MATCH_RETRY_INTERVAL_MS / SECOND_MS };
  }

  /**
   * A slip upload capability for an order with a destination: valid for the order's upload URL until a
   * week after its late-slip window closes (transfer deadline + 24 h + SLIP_CLAIM_PERIOD_MS; uploads in
   * that week answer 410 with a claim_url the same capability opens), bound to the reservation's hold time.
   */
  private slipUpload(row: DepositRow, api_version: string): SlipUpload {
    const htu = slipUploadUrl(this.deps.upload_base_url(), row.deposit_id);
    const claims = {
      wl: row.white_label_id,
      livemode: row.livemode,
      dep: row.deposit_id,
      htu,
      rate_subject: this.deps.slip_tokens.rateSubject(row.merchant_id, row.end_user_ref),
      api_version,
      hold_until: Math.floor(row.expires_at.getTime() / 1000),
      iat: Math.floor(this.now().getTime() / 1000),
      exp: Math.floor((row.expires_at.getTime() + LATE_SLIP_WINDOW_MS + SLIP_CLAIM_PERIOD_MS) / 1000),
    };
    return slipUploadOf(this.deps.slip_tokens.mint(claims), claims);
  }

  /**
   * POST /v1/pay/deposits/{id}/slip-token: a capability for an order that has a destination (awaiting
   * payment, or closed inside its late-slip window). A waiting order has none yet: `deposit_not_payable`.
   */
  async issueSlipToken(db: Queryable, account: DepositAccount, deposit_id: string, api_version: string): Promise<Result<SlipUpload> | null> {
    const row = await repository.findOrder(db, account, deposit_id);
    if (!row) return null;
    if (row.status !== 'awaiting_payment' && !((row.status === 'expired' || row.status === 'canceled') && this.windowOpenAt(row, this.now()))) {
      return fail('deposit_not_payable', { details: { status: row.status } });
    }
    return ok(this.slipUpload(row, api_version));
  }

  /** Matches the order (see src/matching/service.ts) and turns the reserved parts into its legs. */
  private async reserve(
    tx: Queryable,
    row: DepositRow,
    policy: DepositPolicy,
    cause: EventCause,
    fill_withdrawal_id?: string,
    /** Reads of the caller's that the matching queue's candidate statement carries (`MatchRequest.carried_reads`). */
    carried_reads: readonly CarriedRead[] = [],
  ): Promise<{ legs: DepositLegRow[]; source: 'internal' | 'external_gateway'; payees: Map<string, Payee> } | NoMatch> {
    const match = await this.deps.matching.match(
      tx,
      {
        white_label_id: row.white_label_id,
        livemode: row.livemode,
        merchant_id: row.merchant_id,
        deposit_id: row.deposit_id,
        amount_minor: row.amount_minor,
        fill_preference: row.fill_preference,
        order_created_at: row.created_at,
        fill_withdrawal_id,
        carried_reads,
      },
      { max_legs: policy.max_legs, gateway: policy.gateway },
      cause,
    );
    if (!('legs' in match)) return match;
    const now = this.now();
    const payees = new Map<string, Payee>();
    for (const leg of match.legs) if (leg.payee) payees.set(leg.leg_ref, leg.payee);
    return {
      source: match.source,
      payees,
      legs: match.legs.map((leg) => ({
        white_label_id: row.white_label_id,
        deposit_id: row.deposit_id,
        leg_ref: leg.leg_ref,
        sequence: leg.sequence,
        amount_minor: leg.amount_minor,
        expires_at: now,
        status: 'reserved',
        destination: leg.destination,
        withdrawal_id: leg.withdrawal_id,
        withdrawal_leg_ref: leg.withdrawal_leg_ref,
        receiver_bank_code: leg.receiver.bank_code,
        receiver_bank_name_th: leg.receiver.bank_name_th,
        receiver_account_last4: leg.receiver.account_last4,
        receiver_name_masked: maskName(leg.receiver.account_name_th),
        created_at: now,
        updated_at: now,
        paid_minor: 0,
      })),
    };
  }

  /** What a waiting order is told: when it started, how often matching runs, which amounts would match now. */
  private async liquidityInfo(tx: Queryable, row: DepositRow, policy: DepositPolicy): Promise<NonNullable<DepositView['liquidity']>> {
    const suggestions = await this.deps.matching.suggestedAmounts(tx, row, policy.min_amount_minor);
    const waitLeft = Math.max(0, row.expires_at.getTime() - this.now().getTime());
    return {
      wait_started_at: formatTimestamp(row.wait_started_at ?? row.created_at),
      // No history to estimate from yet: three retry rounds, bounded by the wait that is left.
      estimated_wait_ms: Math.min(3 * MATCH_RETRY_INTERVAL_MS, waitLeft),
      retry_interval_ms: MATCH_RETRY_INTERVAL_MS,
      suggested_amounts_minor: suggestions,
    };
  }

  /** The next matching retry: in 10 seconds, or sooner when liquidity is known to arrive sooner, never after the wait ends. */
  private retryJob(row: DepositRow, liquidity_arrives_at: Date | null): JobSpec {
    const runAt = new Date(Math.min(this.now().getTime() + MATCH_RETRY_INTERVAL_MS, row.expires_at.getTime(), liquidity_arrives_at?.getTime() ?? Number.POSITIVE_INFINITY));
    return {
      task: MATCH_RETRY_TASK,
      payload: { white_label_id: row.white_label_id, deposit_id: row.deposit_id },
      run_at: runAt,
      job_key: `${MATCH_RETRY_TASK}:${row.deposit_id}:${runAt.getTime()}`,
      white_label_id: row.white_label_id,
    };
  }

  private expireJob(row: DepositRow): JobSpec {
    return {
      task: EXPIRE_DEPOSIT_TASK,
      payload: { white_label_id: row.white_label_id, deposit_id: row.deposit_id },
      run_at: row.expires_at,
      job_key: `${EXPIRE_DEPOSIT_TASK}:${row.deposit_id}`,
      white_label_id: row.white_label_id,
    };
  }

  /**
   * The matching retry job of a waiting order: matched → `awaiting_payment` with legs and a new
   * `expires_at` (`deposit.matched`); the wait over → canceled `no_liquidity_available` with no
   * late-slip window (there was never a destination); otherwise the next retry in 10 seconds.
   */
  async retryMatching(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositStatus | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, deposit_id);
    if (!row || row.status !== 'awaiting_liquidity') return null;
    const now = this.now();
    if (row.expires_at.getTime() <= now.getTime()) {
      await this.transition(tx, {
        before: row,
        after: { ...row, version: row.version + 1, status: 'canceled', canceled_by: 'system', cancel_reason_code: 'no_liquidity_available', late_slip_accepted_until: null, updated_at: now },
        trigger: 'liquidity_timeout',
        cause: SYSTEM_CAUSE,
      });
      return 'canceled';
    }
    const policy = await this.deps.policies.policyFor(tx, row.white_label_id, row.livemode);
    const reservation = await this.reserve(tx, row, policy, SYSTEM_CAUSE);
    if (!('legs' in reservation)) {
      await scheduleJob(tx, this.deps.clock, this.retryJob(row, reservation.wait_until));
      return 'awaiting_liquidity';
    }
    const legs = reservation.legs;
    const matched: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'awaiting_payment',
      liquidity_source: reservation.source,
      expires_at: new Date(now.getTime() + row.expires_in_seconds * SECOND_MS),
      updated_at: now,
    };
    await this.transition(tx, { before: row, after: matched, trigger: 'matched', cause: SYSTEM_CAUSE, legs: legs.map((leg) => ({ ...leg, expires_at: matched.expires_at })), jobs: [this.expireJob(matched)] });
    return 'awaiting_payment';
  }

  /** Releases every reserved leg of an order back to its withdrawal. */
  private async releaseLegs(tx: Queryable, row: DepositRow, reason_code: string, cause: EventCause): Promise<DepositLegRow[]> {
    const legs = await repository.listLegs(tx, row.white_label_id, row.deposit_id);
    const changed: DepositLegRow[] = [];
    const now = this.now();
    for (const leg of legs) {
      if (leg.status !== 'reserved') continue;
      if (leg.destination === 'withdrawal') {
        invariant(leg.withdrawal_leg_ref, 'a withdrawal leg names its withdrawal leg');
        const released = await this.deps.withdrawals.releaseLeg(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, reason_code, cause });
        invariant(released.ok, 'a reserved leg of an unpaid deposit can be released');
      }
      changed.push({ ...leg, status: 'released', updated_at: now });
    }
    return changed;
  }

  /**
   * The expiry job: an unpaid order past its transfer deadline expires, and its reservations go back.
   * Two cases wait instead: an order with a slip not processed yet (the slip consumer decides, and hands
   * the deadline back by enqueueing this job again when it returns the order to awaiting payment), and
   * a multi-leg order some of whose legs verified slips paid, which settles short on what was paid.
   */
  async expire(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositView | null> {
    const row = await this.lockForChange(tx, white_label_id, deposit_id);
    if (!row || row.status !== 'awaiting_payment' || row.expires_at.getTime() > this.now().getTime()) return null;
    if ((await this.deps.slip_activity(tx, white_label_id, deposit_id)).unprocessed > 0) return null;
    const legs = await repository.listLegs(tx, white_label_id, deposit_id);
    const paid = legs.filter((leg) => leg.status === 'reserved' && leg.paid_minor > 0);
    if (paid.length > 0) {
      const settled = await this.settle(tx, {
        white_label_id,
        deposit_id,
        transferred_amount_minor: paid.reduce((sum, leg) => sum + leg.paid_minor, 0),
        paid_by_leg: Object.fromEntries(paid.map((leg) => [leg.leg_ref, leg.paid_minor])),
        settled_via: 'auto',
        sender_verified: senderVerified(row.verification),
        cause: SYSTEM_CAUSE,
      });
      invariant(settled.ok, 'a partially paid order settles at its deadline');
      return settled.value;
    }
    const released = await this.releaseLegs(tx, row, 'deposit_expired', SYSTEM_CAUSE);
    return this.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, status: 'expired', expired_reason: 'no_payment', late_slip_accepted_until: this.lateSlipAcceptedUntil(row), updated_at: this.now() },
      trigger: 'expire',
      cause: SYSTEM_CAUSE,
      legs: released,
    });
  }

  /**
   * Cancels an unpaid order for the merchant or the end user. Once a slip exists (any later status)
   * the answer is `deposit_not_cancelable`. A waiting order never had a destination, so it closes
   * for good (null window); a matched one keeps the late-slip window of its transfer deadline.
   */
  async cancel(tx: Queryable, account: DepositAccount, deposit_id: string, by: Exclude<CanceledBy, 'system'>, cause: EventCause): Promise<Result<DepositView> | null> {
    const found = await repository.findOrder(tx, account, deposit_id);
    if (!found) return null;
    const row = await this.lockForChange(tx, account.white_label_id, deposit_id);
    invariant(row, 'the order exists');
    if (row.status !== 'awaiting_liquidity' && row.status !== 'awaiting_payment') return fail('deposit_not_cancelable', { details: { status: row.status } });
    // Once a slip exists (uploaded, even unread or unreadable) the end user may have paid: no cancel (spec).
    if (row.slip_attempts > 0 || (await this.deps.slip_activity(tx, row.white_label_id, row.deposit_id)).total > 0) {
      return fail('deposit_not_cancelable', { details: { status: row.status, reason: 'slip_received' } });
    }
    const legs = row.status === 'awaiting_payment' ? await this.releaseLegs(tx, row, 'deposit_canceled', cause) : [];
    await cancelJobsByKey(tx, `${EXPIRE_DEPOSIT_TASK}:${row.deposit_id}`);
    const view = await this.transition(tx, {
      before: row,
      after: {
        ...row,
        version: row.version + 1,
        status: 'canceled',
        canceled_by: by,
        cancel_reason_code: by === 'merchant' ? 'merchant_request' : 'end_user_request',
        late_slip_accepted_until: row.status === 'awaiting_payment' ? this.lateSlipAcceptedUntil(row) : null,
        updated_at: this.now(),
      },
      trigger: 'cancel',
      cause,
      legs,
    });
    return ok(view);
  }

  /**
   * Locks the order, then every withdrawal its legs name, then the event feeds of its merchant and of
   * those withdrawals' owners, in the one lock order (src/platform/lock-order.ts): a change to the legs
   * releases, fills or reverses those withdrawals and writes events (and moves wallets) for all of them.
   * Taking the withdrawals before the feeds is what the withdrawal side and the matcher do too; taking
   * them after (as this did) closed a cycle with matching (issue 13, cycle A).
   */
  private async lockForChange(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    const row = await this.lockOrderRow(tx, white_label_id, deposit_id);
    if (row) await this.lockWithdrawalsAndFeedsOf(tx, row);
    return row;
  }

  /**
   * `lockForChange` for a change of the order and its legs alone that writes only the depositor's events
   * (a slip received, or attached to a review): the order, then the depositor's feed, with the legs read in
   * the feed-lock statement (its snapshot follows the order's lock, under which alone the legs change). The
   * withdrawals the legs name and their owners' feeds are not locked: such a change touches neither, and the
   * lock order lets a transaction skip ranks, never go back to one. The transaction may not widen the change
   * afterwards (`lockWithdrawalsAndFeedsOf` asserts it), since its withdrawal locks would then come after its feed.
   * A transaction that locked the order for a wider change first (the slip consumer's one transaction, which
   * receives a slip and settles it) holds every lock this takes, in order, and may go on to any other change.
   */
  private async lockForOwnChange(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    const row = await this.lockOrderRow(tx, white_label_id, deposit_id);
    if (!row) return null;
    if (isUnitOfWork(tx) && tx.memo.has(wideChangeMemoKey(white_label_id, deposit_id))) return row;
    if (isUnitOfWork(tx)) tx.memo.set(ownChangeMemoKey(white_label_id, deposit_id), true);
    const readLegs = repository.knownLegs(tx, white_label_id, deposit_id) === null;
    const answers = await this.deps.events.lockFeedsAndRead(tx, white_label_id, [row.merchant_id], row.livemode, readLegs ? [repository.legsPart(white_label_id, deposit_id)] : []);
    if (readLegs) repository.keepLegs(tx, white_label_id, deposit_id, answers[0] as DepositLegRow[]);
    return row;
  }

  /**
   * The withdrawal and feed locks of `lockForChange`. `carry` names reads that the feed-lock statement
   * sends along (src/platform/read-part.ts), answered in their order: it is called once the withdrawals are
   * locked, since some reads are offered only for orders the transaction holds.
   */
  private async lockWithdrawalsAndFeedsOf(tx: Queryable, row: DepositRow, carry: (legs: DepositLegRow[]) => readonly ReadPart<unknown>[] = () => []): Promise<unknown[]> {
    // The withdrawals come before the feeds in the lock order: after `lockForOwnChange`, locking them would wait out of order.
    invariant(!isUnitOfWork(tx) || !tx.memo.has(ownChangeMemoKey(row.white_label_id, row.deposit_id)), 'an order locked for its own change is not locked for a wider one');
    const { legs, owners, unconfirmed } = await this.lockWithdrawalsOf(tx, row);
    const parts = carry(legs);
    // Legs read before the order's lock was granted are read again here, after it, and must be the same.
    const answers = await this.deps.events.lockFeedsAndRead(tx, row.white_label_id, [row.merchant_id, ...owners], row.livemode, unconfirmed ? [...parts, repository.legsPart(row.white_label_id, row.deposit_id)] : parts);
    if (unconfirmed) {
      const current = answers.pop() as DepositLegRow[];
      if (JSON.stringify(current) !== JSON.stringify(legs)) throw new LegsChangedMeanwhile();
      repository.keepLegs(tx, row.white_label_id, row.deposit_id, current);
    }
    if (isUnitOfWork(tx)) tx.memo.set(wideChangeMemoKey(row.white_label_id, row.deposit_id), true);
    return answers;
  }

  /**
   * The order's legs and the withdrawals they name, locked. Legs the transaction has not read yet are read
   * in the statement that locks those withdrawals, which names them through the legs (the legs change only
   * under the order's lock, which an earlier statement of the transaction took, so its snapshot sees them as
   * they are); legs it knows already name the withdrawals to lock themselves.
   */
  private async lockWithdrawalsOf(tx: Queryable, row: DepositRow): Promise<{ legs: DepositLegRow[]; owners: string[]; unconfirmed?: true }> {
    const known = repository.knownLegs(tx, row.white_label_id, row.deposit_id);
    const unconfirmed = known === null && isUnitOfWork(tx) ? (tx.memo.get(unconfirmedLegsMemoKey(row.white_label_id, row.deposit_id)) as DepositLegRow[] | undefined) : undefined;
    if (unconfirmed !== undefined && isUnitOfWork(tx)) {
      // The settlement lock read locked the withdrawals these legs name: locking them again costs nothing.
      tx.memo.delete(unconfirmedLegsMemoKey(row.white_label_id, row.deposit_id));
      const withdrawals = unconfirmed.flatMap((leg) => (leg.withdrawal_id ? [leg.withdrawal_id] : []));
      return { legs: unconfirmed, owners: await this.deps.withdrawals.lockOrdersOf(tx, row.white_label_id, withdrawals), unconfirmed: true };
    }
    if (known === null && repository.holdsOrder(tx, row.white_label_id, row.deposit_id)) {
      const locked = await this.deps.withdrawals.lockOrdersNamedBy(tx, row.white_label_id, repository.legWithdrawalIdsPart(row.white_label_id, row.deposit_id), [
        repository.legsPart(row.white_label_id, row.deposit_id),
      ]);
      const legs = locked.carried[0] as DepositLegRow[];
      repository.keepLegs(tx, row.white_label_id, row.deposit_id, legs);
      return { legs, owners: locked.owners };
    }
    const legs = known ?? (await repository.listLegs(tx, row.white_label_id, row.deposit_id));
    const withdrawals = legs.flatMap((leg) => (leg.withdrawal_id ? [leg.withdrawal_id] : []));
    return { legs, owners: await this.deps.withdrawals.lockOrdersOf(tx, row.white_label_id, withdrawals) };
  }

  /** True when an expired or canceled order still takes a slip received at `at` (its late-slip window). */
  private windowOpenAt(row: DepositRow, at: Date): boolean {
    return row.late_slip_accepted_until !== null && row.late_slip_accepted_until.getTime() > at.getTime();
  }

  private lateSlipWindowClosed(row: DepositRow): Result<never> {
    return fail('late_slip_window_closed', {
      details: {
        deposit_id: row.deposit_id,
        late_slip_accepted_until: row.late_slip_accepted_until ? formatTimestamp(row.late_slip_accepted_until) : null,
        claim_url: claimUrl(this.deps.upload_base_url(), row.deposit_id),
      },
    });
  }

  /**
   * Whether an order takes a slip uploaded at `at` (the slip intake asks before storing anything). The
   * order is locked for the rest of the intake's transaction, so that uploads to one order are counted
   * one after another and a cancel or a transition waits for the upload (the order row is the first
   * lock of every deposit path, see docs/decisions/locks.md). Null when the order is not in this
   * brand and environment. An order in review or settled takes a slip too: it is attached to the review,
   * or verified as a transfer after settlement.
   */
  async admitSlip(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; livemode: boolean; hold_until_seconds: number; at: Date },
  ): Promise<Result<{ merchant_id: string }> | null> {
    const row = await repository.lockOrderInBrand(tx, input.white_label_id, input.deposit_id);
    if (!row || row.livemode !== input.livemode) return null;
    // The capability is bound to the reservation it was issued for (its `hold_until`, the order's deadline).
    if (Math.floor(row.expires_at.getTime() / 1000) !== input.hold_until_seconds) return fail('slip_token_invalid');
    const admitted = ok({ merchant_id: row.merchant_id });
    switch (row.status) {
      case 'awaiting_payment':
      case 'slip_processing':
      case 'under_review':
      case 'settled':
        return admitted;
      case 'expired':
      case 'canceled':
        return this.windowOpenAt(row, input.at) ? admitted : this.lateSlipWindowClosed(row);
      default:
        return fail('deposit_not_payable', { details: { status: row.status } });
    }
  }

  /**
   * The slip consumer claimed a receipt (at most 3 per order), received at `received_at`:
   * `awaiting_payment` → `slip_processing`; `expired` inside its late-slip window → `slip_processing`,
   * with `slip.is_late` when the slip came after the deadline; `canceled` inside its window →
   * `under_review` with CANCELED_ORDER_SLIP, every time; after the window (or with none) →
   * `late_slip_window_closed`. The window is judged at `received_at`, when the slip became durable, so a
   * consumer that runs late (a retry, a queue backlog) never turns an accepted slip into a closed one.
   */
  async markSlipReceived(tx: Queryable, input: { white_label_id: string; deposit_id: string; received_at: Date; cause: EventCause }): Promise<Result<DepositView>> {
    // Every branch below changes the order alone and writes the depositor's event only.
    const row = await this.lockForOwnChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'slip_processing') return ok(await this.view(tx, row));
    const closed = row.status === 'expired' || row.status === 'canceled';
    if (closed && !this.windowOpenAt(row, input.received_at)) return this.lateSlipWindowClosed(row);
    if (row.status !== 'awaiting_payment' && !closed) return fail('deposit_state_conflict', { details: { status: row.status } });
    if (row.slip_attempts >= MAX_SLIP_UPLOADS) return fail('deposit_state_conflict', { details: { status: row.status, reason: 'slip_limit_reached' } });
    const late = row.status === 'canceled' || (row.status === 'expired' && input.received_at.getTime() >= row.expires_at.getTime());
    const received = { ...row, version: row.version + 1, slip_received_at: input.received_at, slip_is_late: late, slip_attempts: row.slip_attempts + 1, updated_at: this.now() };
    if (row.status === 'canceled') {
      return ok(await this.transition(tx, { before: row, after: { ...received, status: 'under_review', review: await this.newReview(tx, row, [CANCELED_ORDER_SLIP_REASON], false) }, trigger: 'review', cause: input.cause }));
    }
    return ok(await this.transition(tx, { before: row, after: { ...received, status: 'slip_processing' }, trigger: 'slip_received', cause: input.cause }));
  }

  /**
   * A slip that arrived while the order is in review is attached to the review (spec: "Evidence
   * attached": `version` moves, status and review clock do not; `deposit.review_updated`).
   */
  async attachSlipToReview(tx: Queryable, input: { white_label_id: string; deposit_id: string; received_at: Date; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.lockForOwnChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'under_review') return fail('deposit_state_conflict', { details: { status: row.status } });
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      slip_received_at: input.received_at,
      slip_attempts: Math.min(row.slip_attempts + 1, MAX_SLIP_UPLOADS),
      updated_at: this.now(),
    };
    return ok(await this.transition(tx, { before: row, after, trigger: 'slip_attached', cause: input.cause }));
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
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'slip_processing') return fail('deposit_state_conflict', { details: { status: row.status } });
    const now = this.now();
    const legs: DepositLegRow[] = [];
    for (const leg of await repository.listLegs(tx, row.white_label_id, row.deposit_id)) {
      const paid = input.paid_by_leg[leg.leg_ref];
      if (paid === undefined || paid === leg.paid_minor) continue;
      invariant(leg.status === 'reserved' && Number.isSafeInteger(paid) && paid > leg.paid_minor, 'a reserved leg is paid more, never less');
      legs.push({ ...leg, paid_minor: paid, updated_at: now });
    }
    invariant(legs.length > 0, 'a leg payment pays a leg');
    const after: DepositRow = { ...row, version: row.version + 1, status: 'awaiting_payment', verification: input.verification, updated_at: now };
    // The expiry job may have run while the slip was processed and left the deadline to this consumer.
    const view = await this.transition(tx, { before: row, after, trigger: 'leg_paid', cause: input.cause, legs, jobs: [this.expireJob(row)] });
    // Written after the transition, which reads the legs as they were for `previous_attributes`.
    for (const leg of legs) invariant(await repository.setLegPaid(tx, leg, leg.paid_minor, now), 'the leg is locked through its order');
    return ok(view);
  }

  /**
   * A new review object. `estimated_resolution_bucket` comes from the review desk's real state (the
   * queue ahead of this order and the desk's recent pace, see ReviewEstimate), asked in this transaction.
   */
  private async newReview(db: Queryable, row: DepositRow, reasons: ReviewReason[], four_eyes_required: boolean): Promise<ReviewObject> {
    invariant(reasons.length > 0, 'a review has a reason');
    return {
      opened_at: formatTimestamp(this.now()),
      escalated: false,
      four_eyes_required,
      estimated_resolution_bucket: await this.deps.review_estimate(db, {
        white_label_id: row.white_label_id,
        livemode: row.livemode,
        four_eyes_required,
        escalated: false,
        in_review_ahead: await repository.countInReview(db, row.white_label_id, row.livemode),
      }),
      reasons,
    };
  }

  /** Verification sends the order to review (`deposit.under_review` with `review.reasons[]`). */
  async sendToReview(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; reasons: ReviewReason[]; four_eyes_required?: boolean; verification?: VerificationBooleans; cause: EventCause },
  ): Promise<Result<DepositView>> {
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'under_review') return ok(await this.view(tx, row));
    if (row.status !== 'slip_processing') return fail('deposit_state_conflict', { details: { status: row.status } });
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'under_review',
      review: await this.newReview(tx, row, input.reasons, input.four_eyes_required ?? false),
      verification: input.verification ?? row.verification,
      updated_at: this.now(),
    };
    return ok(await this.transition(tx, { before: row, after, trigger: 'review', cause: input.cause }));
  }

  /**
   * The first locks another module takes before it changes an order through this service (a review
   * decision, a claim, a dispute on a fill the order paid): the order row, the withdrawals its legs name,
   * then the feeds of every merchant involved, before any dispute row or wallet (src/platform/lock-order.ts).
   */
  lockOrder(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    return this.lockForChange(tx, white_label_id, deposit_id);
  }

  /**
   * Holds a settled order's credit in pending clearing while a withdrawer disputes a fill it paid
   * (spec, Wallet effects): the credit gets no release time, `clearing_available_at` becomes null
   * (`deposit.funds_held`; the order says nothing about the dispute). `held` is false when there is no
   * credit still in clearing to hold. Holding an order held already changes nothing.
   */
  async holdFunds(tx: Queryable, input: { white_label_id: string; deposit_id: string; hold_reason: string; cause: EventCause }): Promise<Result<{ held: boolean }>> {
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    if (!row.balance_transaction_id) return ok({ held: false });
    const account = { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
    if (!(await this.deps.ledger.holdClearing(tx, account, row.balance_transaction_id, input.hold_reason))) return ok({ held: false });
    if (row.clearing_available_at !== null) {
      await this.transition(tx, { before: row, after: { ...row, version: row.version + 1, clearing_available_at: null, updated_at: this.now() }, trigger: 'funds_held', cause: input.cause });
    }
    return ok({ held: true });
  }

  /**
   * Lifts the hold of `holdFunds`: the credit clears at its original time, or at once when that has
   * passed (the ledger's rule), and `clearing_available_at` says when again (`deposit.funds_released`).
   */
  async releaseFunds(tx: Queryable, input: { white_label_id: string; deposit_id: string; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    invariant(row.balance_transaction_id && row.settled_at, 'only a credited order has funds to release');
    const account = { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
    if (!(await this.deps.ledger.releaseHold(tx, account, row.balance_transaction_id))) return ok(await this.view(tx, row));
    // The credit's release time was fixed at settlement (settled_at + 72 h); past it, the ledger releases now.
    const original = row.settled_at.getTime() + CLEARING_PERIOD_MS;
    const clearing_available_at = new Date(Math.max(original, this.now().getTime()));
    return ok(await this.transition(tx, { before: row, after: { ...row, version: row.version + 1, clearing_available_at, updated_at: this.now() }, trigger: 'funds_released', cause: input.cause }));
  }

  /** An order of a brand as the back office reads it (any merchant of the brand, either environment). */
  /**
   * The sandbox payer's copy of the order's upload capability, the one its end user got with the order:
   * the sandbox scenarios upload their slips with it through the ordinary intake. Test mode only; null
   * for an order that never had a destination.
   */
  async sandboxPayerCapability(db: Queryable, white_label_id: string, deposit_id: string): Promise<SlipUpload | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    invariant(!row.livemode, 'only the sandbox pays on behalf of an end user');
    if ((await repository.listLegs(db, white_label_id, deposit_id)).length === 0) return null;
    return this.slipUpload(row, CURRENT_API_VERSION);
  }

  async viewInBrand(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ row: DepositRow; view: DepositView } | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    return { row, view: await this.view(db, row) };
  }

  /** The brand's orders in review, oldest entry first, with their legs read in one statement. */
  async reviewQueue(db: Queryable, white_label_id: string, filters: repository.ReviewQueueFilters): Promise<{ row: DepositRow; view: DepositView }[]> {
    const rows = await repository.listInReview(db, white_label_id, filters);
    const legs = rows.length === 0 ? [] : await repository.listLegsOfOrders(db, white_label_id, rows.map((row) => row.deposit_id));
    const now = this.now();
    return rows.map((row) => ({ row, view: depositView(row, legs.filter((leg) => leg.deposit_id === row.deposit_id), { now }) }));
  }

  /** How many orders of a brand and environment wait in review. */
  countInReview(db: Queryable, white_label_id: string, livemode: boolean): Promise<number> {
    return repository.countInReview(db, white_label_id, livemode);
  }

  /** Escalation moves `version` only: money and status stay (`deposit.review_updated`). */
  async escalateReview(tx: Queryable, input: { white_label_id: string; deposit_id: string; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'under_review' || !row.review) return fail('deposit_state_conflict', { details: { status: row.status } });
    if (row.review.escalated) return ok(await this.view(tx, row));
    const after: DepositRow = { ...row, version: row.version + 1, review: { ...row.review, escalated: true, estimated_resolution_bucket: 'extended' }, updated_at: this.now() };
    return ok(await this.transition(tx, { before: row, after, trigger: 'escalate', cause: input.cause }));
  }

  /**
   * A reviewer does not approve: `rejected` (`deposit.rejected`), with display texts and never the
   * reviewer's notes; reserved legs go back to their withdrawals. There is no automatic refund.
   */
  async rejectReview(tx: Queryable, input: { white_label_id: string; deposit_id: string; rejection: RejectionObject; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'rejected') return ok(await this.view(tx, row));
    if (row.status !== 'under_review') return fail('deposit_state_conflict', { details: { status: row.status } });
    const legs = await this.releaseLegs(tx, row, 'deposit_rejected', input.cause);
    const after: DepositRow = { ...row, version: row.version + 1, status: 'rejected', rejection: input.rejection, updated_at: this.now() };
    return ok(await this.transition(tx, { before: row, after, trigger: 'reject', cause: input.cause, legs }));
  }

  /**
   * The slip image could not be read: back to `awaiting_payment` while the order has not expired (or
   * when verified slips already paid some of its legs, which the deadline then settles), else `expired`
   * (legs released, late-slip window from the deadline). `deposit.slip_rejected` says the slip, not the
   * money, was refused: its `slip_rejection` has `retryable` true and the uploads left.
   */
  async markSlipUnreadable(tx: Queryable, input: { white_label_id: string; deposit_id: string; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'slip_processing') return fail('deposit_state_conflict', { details: { status: row.status } });
    const now = this.now();
    const rejection = { slip_rejection: { retryable: true, reason_code: 'SLIP_UNREADABLE', attempts_left: MAX_SLIP_UPLOADS - row.slip_attempts } };
    const partlyPaid = (await repository.listLegs(tx, row.white_label_id, row.deposit_id)).some((leg) => leg.status === 'reserved' && leg.paid_minor > 0);
    if (partlyPaid || (!row.slip_is_late && row.expires_at.getTime() > now.getTime())) {
      return ok(
        await this.transition(tx, {
          before: row,
          after: { ...row, version: row.version + 1, status: 'awaiting_payment', updated_at: now },
          trigger: 'slip_unreadable',
          cause: input.cause,
          event_extra: rejection,
          // The expiry job may have run while the slip was processed and left the deadline to this consumer.
          jobs: [this.expireJob(row)],
        }),
      );
    }
    const legs = row.slip_is_late ? [] : await this.releaseLegs(tx, row, 'deposit_expired', input.cause);
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'expired',
      expired_reason: row.expired_reason ?? 'no_payment',
      late_slip_accepted_until: row.late_slip_accepted_until ?? this.lateSlipAcceptedUntil(row),
      updated_at: now,
    };
    return ok(await this.transition(tx, { before: row, after, trigger: 'slip_unreadable', cause: input.cause, legs, event_extra: rejection }));
  }

  /**
   * Settles an order whose slip verified V satang transferred (the verification issue calls this):
   * A = min(V, X) is accepted, the fee of the deposit channel is taken from A, the merchant is credited
   * A − fee into pending_clearing for 72 hours, the reserved withdrawal legs are filled by A in leg order
   * (a short payment fills by V and returns the rest to the withdrawals' remaining), and an excess E =
   * V − X opens a claim (`overpayment`, no automatic refund). `deposit.settled` is written before the
   * `balance.credited` of its movement. Idempotent: a settled order is returned unchanged.
   */
  async settle(
    tx: Queryable,
    input: {
      white_label_id: string;
      deposit_id: string;
      transferred_amount_minor: number;
      settled_via: 'auto' | 'review';
      /** True when the slip proved the declared sender (bank, account and name all matched): it is registered. */
      sender_verified?: boolean;
      verification?: VerificationBooleans;
      /**
       * What the verified slips paid into each leg (by `leg_ref`), when they said which receiver they
       * paid: the fills follow the money. Without it, A is filled across the legs in their order.
       */
      paid_by_leg?: Record<string, number>;
      cause: EventCause;
    },
  ): Promise<Result<DepositView>> {
    const transferred = input.transferred_amount_minor;
    invariant(Number.isSafeInteger(transferred) && transferred > 0, 'a verified transfer is a positive number of satang');
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'settled' || row.status === 'reversed') return ok(await this.view(tx, row));
    // awaiting_payment: a multi-leg order settling short at its deadline on the legs its slips paid.
    const settles = row.status === 'slip_processing' || row.status === 'under_review' || (row.status === 'awaiting_payment' && input.paid_by_leg !== undefined);
    if (!settles) return fail('deposit_state_conflict', { details: { status: row.status } });

    const now = this.now();
    const account = { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
    const received = Math.min(transferred, row.amount_minor);
    const excess = transferred > row.amount_minor ? transferred - row.amount_minor : 0;
    const fee = await this.deps.fees.quote(tx, { ...account, channel: 'deposit' }, received);
    const credited = received - fee.fee_total_minor;

    // What each leg receives of A: the verified amount of each leg when the slips said which receiver
    // they paid (multi-leg orders), else A across the legs in their order. A leg paid in part is a
    // short fill whose rest returns to that withdrawal; a leg that gets nothing goes back whole.
    let left = received;
    const plan: { leg: DepositLegRow; fill_minor: number }[] = [];
    for (const leg of await repository.listLegs(tx, row.white_label_id, row.deposit_id)) {
      if (leg.status === 'filled') continue;
      const wanted = input.paid_by_leg ? (input.paid_by_leg[leg.leg_ref] ?? 0) : left;
      const fill_minor = Math.min(leg.amount_minor, wanted, left);
      left -= fill_minor;
      plan.push({ leg, fill_minor });
    }
    invariant(left === 0, 'the legs of an order cover its amount');

    // Legs released at expiry or cancel that a (late) slip paid anyway: reserve the same withdrawals
    // again. If one of them can no longer take its leg, the money landed where it is not owed any more,
    // unless a resolved dispute made the withdrawer pay for it (LegCover): the leg then counts as paid.
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
        invariant(await repository.setLegStatus(tx, leg, 'released', 'reserved', now), 'the leg is locked through its order');
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
        cause: input.cause,
      });
      // Thrown, not returned: legs reserved again before this one must roll back with the transaction.
      if (!again.ok) throw new ApiError('alloc_state_conflict', { details: { leg_ref: leg.leg_ref, withdrawal_id: leg.withdrawal_id } });
      invariant(await repository.relinkLeg(tx, leg, again.value.leg_ref, now), 'the leg is locked through its order');
      leg.status = 'reserved';
      leg.withdrawal_leg_ref = again.value.leg_ref;
    }

    // The merchant's credit comes after the fills: its wallet is locked with the first withdrawer's, in one statement.
    if (credited > 0) this.deps.ledger.expectDepositCredit(tx, account, row.deposit_id);
    // Pay the withdrawals by the plan.
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
        const filled = await this.deps.withdrawals.recordFill(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, amount_minor: paid, cause: input.cause });
        invariant(filled.ok, 'a reserved leg of a deposit being settled can be filled');
        legs.push({ ...leg, status: 'filled', updated_at: now });
      } else {
        const released = await this.deps.withdrawals.releaseLeg(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, reason_code: 'deposit_short_paid', cause: input.cause });
        invariant(released.ok, 'a reserved leg can be released');
        legs.push({ ...leg, status: 'released', updated_at: now });
      }
    }

    let overpayment: OverpaymentSnapshot | null = null;
    if (excess > 0) {
      const opened = await this.deps.claims.open(tx, {
        ...account,
        deposit_id: row.deposit_id,
        cause: 'same_transfer_excess',
        amount_minor: excess,
        slip_received_at: row.slip_received_at ?? now,
        dedupe_key: `same_transfer_excess:${row.deposit_id}`,
        evidence: null,
        opened_by: { type: 'system' },
        cause_of_event: input.cause,
      });
      overpayment = claimSnapshot(opened.claim);
    }
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
    await unscheduleJob(tx, `${EXPIRE_DEPOSIT_TASK}:${row.deposit_id}`);
    if (input.sender_verified) {
      await repository.upsertSender(tx, {
        ...account,
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
    const view = await this.transition(tx, { before: row, after, trigger: 'settle', cause: input.cause, legs });
    if (balanceTransactionId !== null) {
      const movement = await this.deps.ledger.creditSettledDeposit(tx, { account, deposit_id: row.deposit_id, amount_minor: credited, cause: input.cause, balance_transaction_id: balanceTransactionId });
      invariant(movement.id === balanceTransactionId, 'the credit carries the id the settlement named');
    }
    return ok(view);
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
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'reversed') return ok(await this.view(tx, row));
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    const account = { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
    for (const leg of await repository.listLegs(tx, row.white_label_id, row.deposit_id)) {
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
    const now = this.now();
    const view = await this.transition(tx, {
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
   * Money transferred again after settlement: a claim (`additional_transfer`), `deposit.overpaid`, the
   * status stays `settled`, and neither V nor A changes (invariant 5). `transfer_key` (the transfer's
   * bank reference) makes it happen once.
   */
  async recordAdditionalTransfer(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; amount_minor: number; slip_received_at: Date; transfer_key: string; cause: EventCause },
  ): Promise<Result<DepositView>> {
    invariant(Number.isSafeInteger(input.amount_minor) && input.amount_minor > 0, 'an additional transfer is a positive amount');
    const row = await this.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
    const now = this.now();
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
    if (!opened.created) return ok(await this.view(tx, row));
    const snapshot = claimSnapshot(opened.claim);
    const view = await this.transition(tx, {
      before: row,
      after: { ...row, version: row.version + 1, overpayment: row.overpayment ?? snapshot, updated_at: now },
      trigger: 'overpaid',
      cause: input.cause,
      event_extra: { additional_transfer: snapshot },
    });
    return ok(view);
  }

  /**
   * Who pays and who is paid for an order, in full: its declared sender (the sealed number opened) and
   * each leg's receiver. For the slip pipeline's checks and the sandbox bank; never returned by the API,
   * never logged. With `lock`, the order (and its feeds) is locked first, as every change does, and
   * `carried` reads of the caller (src/platform/read-part.ts) ride on the feed-lock statement, kept for it in
   * the transaction (`keepCarried`).
   */
  async paymentParties(db: Queryable, white_label_id: string, deposit_id: string, options: { lock: boolean; carried?: readonly CarriedRead[] }): Promise<PaymentParties | null> {
    if (options.lock) return this.lockPaymentParties(db, white_label_id, deposit_id, options.carried ?? []);
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    const legs: PaymentParties['legs'] = [];
    for (const leg of await repository.listLegs(db, white_label_id, deposit_id)) {
      legs.push({ ...leg, receiver: await this.payeeOf(db, row.livemode, leg) });
    }
    const policy = await this.deps.policies.policyFor(db, white_label_id, row.livemode);
    return this.partiesOf(row, legs, policy);
  }

  /**
   * `paymentParties` with the order locked as `lockForChange` locks it. The reads that follow the locks
   * take none, so they ride on the feed-lock statement instead of a round trip each
   * (src/platform/read-part.ts): the brand's policy and each withdrawal leg's payee, which the parties
   * need, and what settling the order reads next (the deposit fee schedule, the reserved withdrawal legs
   * and their orders' next fill numbers), kept for their owners to take (`keepCarried`): a slip that gets
   * this far usually settles the order in the same transaction.
   */
  private async lockPaymentParties(tx: Queryable, white_label_id: string, deposit_id: string, carried: readonly CarriedRead[]): Promise<PaymentParties | null> {
    const row = await this.lockOrderRow(tx, white_label_id, deposit_id);
    if (!row) return null;
    const policyPart = this.deps.policies.policyPart(white_label_id, row.livemode);
    const feeRead = this.deps.fees.scheduleRead({ white_label_id, merchant_id: row.merchant_id, livemode: row.livemode, channel: 'deposit' });
    let destinations: (ReadPart<Payee | null | undefined> | null)[] = [];
    let fillReads: CarriedRead[] = [];
    let walletsRead: CarriedRead | null = null;
    let listed: DepositLegRow[] = [];
    const answers = await this.lockWithdrawalsAndFeedsOf(tx, row, (legs) => {
      listed = legs;
      destinations = legs.map((leg) =>
        leg.destination === 'withdrawal' && leg.withdrawal_id && leg.withdrawal_leg_ref
          ? this.deps.withdrawals.destinationPart(tx, white_label_id, leg.withdrawal_id, leg.withdrawal_leg_ref)
          : null,
      );
      const reserved = legs.flatMap((leg) => (leg.status === 'reserved' && leg.withdrawal_id && leg.withdrawal_leg_ref ? [{ withdrawal_id: leg.withdrawal_id, leg_ref: leg.withdrawal_leg_ref }] : []));
      fillReads = this.deps.withdrawals.fillReads(tx, white_label_id, reserved);
      // The wallets a settlement posts on (the depositor's credit, each reserved leg's fill), locked by this
      // statement once it holds their merchants' feeds. Their keys are posted only under this order's lock and
      // those withdrawals' locks, which earlier statements of this transaction took (`walletsLockRead`).
      walletsRead = this.deps.ledger.walletsLockRead({ white_label_id, livemode: row.livemode }, [
        { merchant_id: row.merchant_id, movement_keys: this.deps.ledger.depositCreditKeys(deposit_id) },
        ...this.deps.withdrawals.fillWallets(tx, white_label_id, reserved),
      ]);
      return [
        policyPart,
        feeRead.part,
        walletsRead.part,
        ...fillReads.map((read) => read.part),
        ...carried.map((read) => read.part),
        ...destinations.flatMap((part) => (part ? [part] : [])),
      ];
    });
    // The answers come parsed by each part, in the order given.
    const policy = answers[0] as DepositPolicy;
    keepCarried(tx, feeRead.key, answers[1] ?? null);
    const wallets = walletsRead as CarriedRead | null;
    invariant(wallets !== null, 'the feed-lock statement carried the wallets');
    keepCarried(tx, wallets.key, answers[2] ?? null);
    fillReads.forEach((read, index) => keepCarried(tx, read.key, answers[3 + index] ?? null));
    carried.forEach((read, index) => keepCarried(tx, read.key, answers[3 + fillReads.length + index] ?? null));
    let next = 3 + fillReads.length + carried.length;
    const legs: PaymentParties['legs'] = [];
    for (const [index, leg] of listed.entries()) {
      const payee = destinations[index] ? answers[next++] : undefined;
      // A leg whose payee was not carried (a gateway leg, or one not of the order it names) is read as before.
      legs.push({ ...leg, receiver: payee !== undefined ? (payee as Payee | null) : await this.payeeOf(tx, row.livemode, leg, policy) });
    }
    return this.partiesOf(row, legs, policy);
  }

  /**
   * Parties read with the order locked (`paymentParties` with `lock`), with the order as the transaction has
   * changed it since: the slip consumer receives a slip (a transition of the order alone) after reading them.
   * The legs and the sender do not change in such a transition, and the order is the lock's copy, so this
   * costs no round trip.
   */
  async partiesAfterOwnChange(tx: Queryable, parties: PaymentParties): Promise<PaymentParties> {
    invariant(repository.holdsOrder(tx, parties.order.white_label_id, parties.order.deposit_id), 'parties are refreshed only for an order the transaction holds');
    const order = await repository.lockOrderInBrand(tx, parties.order.white_label_id, parties.order.deposit_id);
    invariant(order !== null && order.sender_id === parties.order.sender_id, 'the order is still there, with its sender');
    return { ...parties, order };
  }

  private partiesOf(row: DepositRow, legs: PaymentParties['legs'], policy: DepositPolicy): PaymentParties {
    return {
      order: row,
      sender: {
        bank_code: row.sender_bank_code,
        account_number: this.deps.secretBox.open(row.sender_account_sealed, SENDER_ACCOUNT_PURPOSE),
        name_th: row.sender_name_th,
        name_en: row.sender_name_en,
        registered: row.sender_id !== null,
      },
      legs,
      four_eyes_min_amount_minor: policy.four_eyes_min_amount_minor,
    };
  }

  /**
   * The order a slip belongs to, locked, for the slip consumer's claim: its status decides the claim's
   * transition, and its tenant must be the one the capability named. Null when there is no such order.
   */
  async lockForSlip(tx: Queryable, white_label_id: string, deposit_id: string): Promise<Pick<DepositRow, 'status' | 'merchant_id' | 'livemode'> | null> {
    return this.lockOrderRow(tx, white_label_id, deposit_id);
  }

  /**
   * The order's lock as a read that the slip consumer's head-receipt statement carries (the receipt comes
   * before the order in the lock order, and the statement takes them in that order): `lockForSlip` and every
   * later lock of the order in the transaction then cost no round trip.
   */
  orderLockRead(white_label_id: string, deposit_id: string): CarriedRead {
    return { key: repository.orderLockReadKey(white_label_id, deposit_id), part: repository.lockOrderInBrandPart(white_label_id, deposit_id) };
  }

  /**
   * `orderLockRead` for a transaction that goes on to settle the order (the slip consumer's decision): the
   * statement also locks the withdrawals the order's legs name, after the order (`lockOrderWithLegsPart`), so
   * that the settlement's next statement is the feeds'. The legs it reads for that are confirmed by the
   * feed-lock statement (`lockWithdrawalsAndFeedsOf`); should they have changed while the order's lock was
   * waited for, the transaction fails with `LegsChangedMeanwhile` before it changes anything.
   */
  settlementLockRead(white_label_id: string, deposit_id: string): CarriedRead {
    return {
      key: repository.settlementLockReadKey(white_label_id, deposit_id),
      part: repository.lockOrderWithLegsPart(white_label_id, deposit_id, (ids) => this.deps.withdrawals.lockOrdersNamedByPart(white_label_id, ids)),
    };
  }

  /**
   * The order's row lock (`repository.lockOrderInBrand`), for every lock of a change of the order: what a settlement
   * lock read carried for it (`keepSettlementLocks`) is taken first, so that the order's lock comes from there.
   */
  private lockOrderRow(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    this.keepSettlementLocks(tx, white_label_id, deposit_id);
    return repository.lockOrderInBrand(tx, white_label_id, deposit_id);
  }

  /**
   * Takes what a settlement lock read answered (`settlementLockRead`), once: the order's lock as `orderLockRead`
   * leaves it for `lockOrderInBrand`, the withdrawals' locks for their module, and the legs, unconfirmed, for
   * `lockWithdrawalsOf`.
   */
  private keepSettlementLocks(tx: Queryable, white_label_id: string, deposit_id: string): void {
    const carried = takeCarried(tx, repository.settlementLockReadKey(white_label_id, deposit_id));
    if (!carried.found) return;
    const answer = carried.value as repository.OrderWithLegs<WithdrawalRow[]>;
    keepCarried(tx, repository.orderLockReadKey(white_label_id, deposit_id), answer?.order ?? null);
    if (answer === null || !isUnitOfWork(tx)) return;
    this.deps.withdrawals.keepLockedOrders(tx, answer.named);
    tx.memo.set(unconfirmedLegsMemoKey(white_label_id, deposit_id), answer.legs);
  }

  /**
   * A claim for a slip that came after the late-slip window: opened at `claim_url` by the end user (the
   * order's capability) or by a back-office operator for them (POST /v1/bo/claims). Only for an expired or
   * canceled order whose window has closed, or that never had one, where an upload answers 410; inside the
   * window `late_slip_window_open` says to upload the slip instead. The same transfer (its `trans_ref`),
   * or the same evidence when there is no reference, opens one claim: a repeat returns it with `created`
   * false. Null when the order is not in this brand (and environment, when one is given).
   */
  async openLateSlipClaim(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; livemode: boolean | null; evidence: LateSlipClaimEvidence; opened_by: ClaimOpener; cause: EventCause },
  ): Promise<Result<{ claim: ClaimView; created: boolean }> | null> {
    const row = await repository.lockOrderInBrand(tx, input.white_label_id, input.deposit_id);
    if (!row || (input.livemode !== null && row.livemode !== input.livemode)) return null;
    const now = this.now();
    if (row.status !== 'expired' && row.status !== 'canceled') return fail('deposit_state_conflict', { details: { status: row.status } });
    if (this.windowOpenAt(row, now)) {
      invariant(row.late_slip_accepted_until, 'an open window has an end');
      return fail('late_slip_window_open', {
        details: { deposit_id: row.deposit_id, status: row.status, late_slip_accepted_until: formatTimestamp(row.late_slip_accepted_until) },
      });
    }
    const opened = await this.deps.claims.open(tx, {
      white_label_id: row.white_label_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      deposit_id: row.deposit_id,
      cause: 'late_slip',
      amount_minor: input.evidence.amount_minor ?? null,
      slip_received_at: now,
      dedupe_key: lateSlipClaimKey(row.deposit_id, input.evidence),
      evidence: input.evidence,
      opened_by: input.opened_by,
      cause_of_event: input.cause,
    });
    return ok({ claim: claimView(opened.claim), created: opened.created });
  }

  /**
   * One page of the caller's orders (no payment instructions in a list: they are read per order).
   * Returns one row more than asked when there is a next page.
   */
  async list(db: Queryable, account: DepositAccount, filters: repository.ListFilters): Promise<{ views: DepositView[]; last: DepositRow | null }> {
    const rows = await repository.listOrders(db, account, filters);
    const legs = await repository.listLegsOfOrders(db, account.white_label_id, rows.map((row) => row.deposit_id));
    const now = this.now();
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
    return this.deps.qr_links.verify(target, input.signature, this.now());
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
    const payee = await this.payeeOf(db, row.livemode, leg);
    if (!payee) return null;
    return renderQrPng(promptPayPayload(payee.bank_code, payee.account_number, leg.amount_minor));
  }

  /** The caller's order, with payment instructions while it awaits payment and its `checkout_url`; null outside its scope. */
  async get(db: Queryable, account: DepositAccount, deposit_id: string): Promise<DepositView | null> {
    const found = await this.forCheckout(db, account, deposit_id);
    return found ? this.withCheckoutUrl(db, found.view, account.white_label_id) : null;
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
    const view = await this.view(db, row, policy ? await this.liquidityInfo(db, row, policy) : undefined);
    return { view: await this.withPaymentInstructions(db, view, row.white_label_id), return_url: row.return_url };
  }
}

/** True when a slip proved the declared sender: bank, account and name all matched. */
export function senderVerified(verification: VerificationBooleans | null): boolean {
  return verification !== null && verification.sender_bank_match && verification.sender_account_match && verification.sender_name_match;
}

/**
 * What makes a claim for a transfer after settlement happen once: the transfer's bank identity
 * (`transfer_key`, the sending bank and reference the slip pipeline verified).
 */
export function additionalTransferClaimKey(deposit_id: string, transfer_key: string): string {
  return `additional_transfer:${deposit_id}:${transfer_key}`;
}

/**
 * What makes a late-slip claim happen once: the transfer's reference when the payer gave one (whoever
 * opens it, end user or operator), else the evidence itself, so that the same submission repeated is the
 * same claim while a different account of another transfer is a claim of its own.
 */
export function lateSlipClaimKey(deposit_id: string, evidence: LateSlipClaimEvidence): string {
  if (evidence.trans_ref !== undefined) return `late_slip:${deposit_id}:ref:${evidence.trans_ref.toUpperCase()}`;
  const canonical = JSON.stringify(Object.entries(evidence).sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)));
  return `late_slip:${deposit_id}:evidence:${sha256Hex(canonical)}`;
}

function claimSnapshot(claim: ClaimRecord): OverpaymentSnapshot {
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

/** The job handlers of deposit deadlines; each is one short transaction and a no-op once the order moved on. */
export function createDepositJobHandlers(database: Database, deposits: DepositService): Record<string, JobHandler> {
  const target = (payload: Record<string, unknown>) => ({ white_label_id: String(payload.white_label_id), deposit_id: String(payload.deposit_id) });
  return {
    [MATCH_RETRY_TASK]: async (job) => {
      const { white_label_id, deposit_id } = target(job.payload);
      await database.transaction((tx) => deposits.retryMatching(tx, white_label_id, deposit_id));
    },
    [EXPIRE_DEPOSIT_TASK]: async (job) => {
      const { white_label_id, deposit_id } = target(job.payload);
      await database.transaction((tx) => deposits.expire(tx, white_label_id, deposit_id));
    },
  };
}

export { SENDER_ACCOUNT_PURPOSE };
