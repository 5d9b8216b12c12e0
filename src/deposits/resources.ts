import { z } from 'zod';
import { cursorListSchema, listSchema, minorSchema, openEnum, timestampSchema, type Describes } from '../http/response-fields.ts';
import { feeBreakdownItemSchema } from '../fees/resources.ts';
import { slipUploadSchema } from '../slip-capability/resources.ts';
import type { DepositView, LegView, SenderView } from './service.ts';
import { DEPOSIT_STATUSES, type ClaimView } from './types.ts';

/**
 * Response schemas of the deposits module (spec, deposit_order and its parts). Fields the spec marks
 * Always are required; optional ones may be absent (never null) unless the spec says null.
 */

export const depositLegSchema = z
  .object({
    leg_ref: z.string(),
    sequence: z.number().int(),
    amount_minor: minorSchema,
    expires_at: timestampSchema,
    leg_status: z.enum(['pending', 'complete']).meta({ description: 'Progress display only, never a money status.' }),
    method: z.literal('promptpay_qr'),
    qr_payload: z.string().optional().meta({ description: 'Raw QR string. Render and discard; never log, store or forward.' }),
    qr_image_url: z.string().optional(),
    receiver: z.object({ bank_code: z.string(), bank_name_th: z.string(), account_number_masked: z.string(), account_name_masked: z.string() }),
  })
  .meta({ id: 'deposit_leg' });

const reviewReasonSchema = z.object({
  code: openEnum(
    ['SENDER_NAME_MISMATCH', 'AMOUNT_MISMATCH', 'NO_SLIP_IMAGE', 'DUPLICATE_SLIP', 'CANCELED_ORDER_SLIP', 'LATE_SLIP', 'BANK_DISABLED', 'ALLOCATION_CONFLICT', 'AMBIGUOUS_MATCH', 'RECEIVER_MISMATCH'],
  ),
  display_th: z.string().meta({ description: 'Text for end users, to be displayed as given.' }),
  display_en: z.string(),
  actionable_by: z.enum(['end_user', 'support']),
  detail: z.record(z.string(), z.unknown()).optional(),
});

export const depositReviewSchema = z
  .object({
    opened_at: timestampSchema,
    escalated: z.boolean(),
    four_eyes_required: z.boolean(),
    estimated_resolution_bucket: z.enum(['under_15m', 'under_1h', 'under_4h', 'extended']),
    reasons: z.array(reviewReasonSchema).meta({ description: 'Ordered by importance; `reasons[0]` is the one to display.' }),
  })
  .meta({ id: 'deposit_review' });

export const overpaymentSchema = z
  .object({
    claim_id: z.string(),
    cause: z.enum(['same_transfer_excess', 'additional_transfer']),
    amount_minor: minorSchema,
    slip_received_at: timestampSchema,
    status: z.literal('open'),
    action_required: z.literal('contact_support'),
  })
  .meta({ id: 'overpayment', description: 'An immutable snapshot of the claim at its creation; there is no automatic refund.' });

export const depositOrderSchema = z
  .object({
    id: z.string(),
    object: z.literal('deposit_order'),
    version: z.number().int().meta({ description: 'Increases on every change; no two events of one object share a version.' }),
    status: z.enum(DEPOSIT_STATUSES),
    is_terminal: z.boolean().meta({ description: 'True only when the order is really final; read it instead of the status name.' }),
    merchant_reference: z.string(),
    end_user_ref: z.string(),
    amount_minor: minorSchema,
    currency: z.literal('THB'),
    created_at: timestampSchema,
    expires_at: timestampSchema.meta({ description: 'Deadline to transfer; use this value, never a constant.' }),
    checkout_url: z.string().optional().meta({ description: 'The hosted payment page; in the answers about one order only.' }),
    liquidity_source: z.enum(['internal', 'external_gateway']).optional(),
    leg_count: z.number().int().optional(),
    legs: z.array(depositLegSchema).meta({ description: 'Empty while `awaiting_liquidity`.' }),
    sender: z.object({ bank_code: z.string(), account_number_masked: z.string(), account_name_th_masked: z.string() }),
    metadata: z.record(z.string(), z.string()).optional(),
    liquidity: z
      .object({ wait_started_at: timestampSchema, estimated_wait_ms: z.number().int(), retry_interval_ms: z.number().int(), suggested_amounts_minor: z.array(minorSchema) })
      .optional(),
    late_slip_accepted_until: timestampSchema.nullable().optional().meta({ description: 'On expired and canceled orders; null: there was never a destination.' }),
    expired_reason: z.string().optional(),
    canceled_by: z.enum(['merchant', 'end_user', 'system']).optional(),
    cancel_reason_code: openEnum(['no_liquidity_available', 'merchant_request', 'end_user_request', 'approval_ttl_expired']).optional(),
    slip: z.object({ received_at: timestampSchema, is_late: z.boolean(), attempts_left: z.number().int() }).optional(),
    ordered_amount_minor: minorSchema.optional(),
    transferred_amount_minor: minorSchema.optional(),
    amount_received_minor: minorSchema.optional(),
    overpayment: overpaymentSchema.nullable().optional(),
    fee_total_minor: minorSchema.optional(),
    fee_breakdown: z.array(feeBreakdownItemSchema).optional(),
    credited_amount_minor: minorSchema.optional(),
    partial: z.boolean().optional(),
    settled_via: z.enum(['auto', 'review']).optional(),
    balance_transaction_id: z.string().nullable().optional(),
    settled_at: timestampSchema.optional(),
    clearing_available_at: timestampSchema.nullable().optional(),
    reversal: z
      .object({
        reason_code: openEnum(['BANK_RECALL', 'ACCOUNT_FROZEN', 'SLIP_INVALIDATED_AFTER_SETTLEMENT', 'DUPLICATE_CREDIT', 'OPS_ERROR', 'MERCHANT_DISPUTE_LOST']),
        reverses_balance_transaction_id: z.string().nullable(),
        balance_transaction_id: z.string().nullable(),
        reversed_at: timestampSchema,
      })
      .optional(),
    review: depositReviewSchema.optional().meta({ description: 'Present when `status` is `under_review`.' }),
    rejection: z.object({ code: z.string().meta({ description: 'Open enum.' }), display_th: z.string(), display_en: z.string() }).optional(),
    verification: z
      .object({
        amount_exact: z.boolean(),
        within_time_window: z.boolean(),
        sender_bank_match: z.boolean(),
        sender_account_match: z.boolean(),
        sender_name_match: z.boolean(),
        receiver_match: z.boolean(),
      })
      .optional(),
    refunds: z
      .object({
        amount_refundable_minor: minorSchema.meta({ description: 'What may still be refunded: the amount received, less every live refund and what closed refunds paid; 0 once reversed.' }),
        amount_refunded_minor: minorSchema.meta({ description: 'What refunds have paid out to the payer so far.' }),
        refund_ids: z.array(z.string()).meta({ description: 'The refunds (withdrawal ids), oldest first.' }),
      })
      .optional()
      .meta({ description: 'On GET of a settled or reversed order only, never in events: its refunds (POST /v1/pay/deposits/{id}/refunds).' }),
    livemode: z.boolean(),
  })
  .meta({ id: 'deposit_order' });

/** The 201 of POST /v1/pay/deposits: matched at once, with the slip capability (never in an event). */
export const createdDepositSchema = depositOrderSchema.extend({ slip_upload: slipUploadSchema }).meta({ id: 'deposit_order_created' });

/** The 202 of POST /v1/pay/deposits: waiting for liquidity, with the lower bound for polling. */
export const waitingDepositSchema = depositOrderSchema
  .extend({ retry_after_seconds: z.number().int().meta({ description: 'Lower bound for polling.' }) })
  .meta({ id: 'deposit_order_waiting' });

export const depositListSchema = cursorListSchema(depositOrderSchema);

export const senderSchema = z
  .object({
    id: z.string().meta({ description: 'Use as `sender_id` when creating a deposit.' }),
    object: z.literal('sender'),
    end_user_ref: z.string(),
    bank_code: z.string(),
    bank_name_th: z.string(),
    account_number_masked: z.string(),
    account_name_th_masked: z.string(),
    created_at: timestampSchema,
    last_used_at: timestampSchema,
    livemode: z.boolean(),
  })
  .meta({ id: 'sender' });

export const senderListSchema = listSchema(senderSchema);

/** The brand's deposit policy as the back office reads it, the gateway account masked. */
export const depositPolicySchema = z
  .object({
    object: z.literal('deposit_policy'),
    white_label_id: z.string(),
    mode: z.enum(['test', 'live']),
    min_amount_minor: minorSchema,
    max_amount_minor: minorSchema,
    default_expires_in_seconds: z.number().int(),
    max_expires_in_seconds: z.number().int(),
    max_legs: z.number().int(),
    liquidity_wait_seconds: z.number().int(),
    four_eyes_min_amount_minor: minorSchema.nullable(),
    qr_payload_enabled: z.boolean().meta({ description: "Whether the brand's orders show each leg's qr_payload; qr_image_url is shown either way." }),
    policy_hold_min_amount_minor: minorSchema.nullable().meta({ description: 'Orders of at least this amount never settle without a reviewer (review reason POLICY_HOLD); null: no hold.' }),
    source: z.enum(['brand', 'default']),
    gateway: z.object({ bank_code: z.string(), account_number_masked: z.string(), account_name_th: z.string() }).nullable(),
  })
  .meta({ id: 'deposit_policy' });

/** The causes and statuses of a claim about a deposit (spec, claims), as every claim schema shows them. */
export const claimCause = z.enum(['same_transfer_excess', 'additional_transfer', 'late_slip']);
export const claimStatus = z.enum(['open', 'investigating', 'resolved', 'rejected']);

/** A claim as the payer who opened it at `claim_url` sees it. */
export const openedClaimSchema = z
  .object({
    id: z.string(),
    object: z.literal('claim'),
    deposit_id: z.string(),
    cause: claimCause,
    status: claimStatus,
    amount_minor: minorSchema.nullable(),
    created_at: timestampSchema,
    livemode: z.boolean(),
  })
  .meta({ id: 'opened_claim' });

const _leg: Describes<typeof depositLegSchema, LegView> = true;
const _deposit: Describes<typeof depositOrderSchema, DepositView> = true;
const _sender: Describes<typeof senderSchema, SenderView> = true;
const _openedClaim: Describes<typeof openedClaimSchema, ClaimView> = true;
void [_leg, _deposit, _sender, _openedClaim];
