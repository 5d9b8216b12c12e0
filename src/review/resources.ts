import { z } from 'zod';
import { cursorListSchema, minorSchema, timestampSchema, type Describes } from '../http/response-fields.ts';
import { claimCause, claimStatus, depositOrderSchema } from '../deposits/resources.ts';
import type { ReviewDetail, ReviewQueueItem } from './service.ts';
import type { BackofficeClaimView, MerchantClaimView } from './claims.ts';
import { CLAIM_RESOLUTION_CODES } from './claims-repository.ts';

/** Response schemas of the review desk and the claims (back office, and a merchant's read of its claims). */

const resolutionBucket = z.enum(['under_15m', 'under_1h', 'under_4h', 'extended']);

export const reviewQueueItemSchema = z
  .object({
    object: z.literal('review'),
    deposit_id: z.string(),
    merchant_id: z.string(),
    livemode: z.boolean(),
    amount_minor: minorSchema,
    opened_at: timestampSchema,
    escalated: z.boolean(),
    four_eyes_required: z.boolean(),
    reasons: z.array(z.string()).meta({ description: 'Reason codes, most important first.' }),
    estimated_resolution_bucket: resolutionBucket,
  })
  .meta({ id: 'review_queue_item' });

export const reviewQueueSchema = cursorListSchema(reviewQueueItemSchema);

const reviewedParty = z.object({ bank_code: z.string(), account_number_masked: z.string(), name_th: z.string().nullable(), name_en: z.string().nullable() });

export const reviewDetailSchema = z
  .object({
    object: z.literal('review_detail'),
    deposit_id: z.string(),
    merchant_id: z.string(),
    livemode: z.boolean(),
    deposit: depositOrderSchema,
    bank_verified_amount_minor: minorSchema,
    approvals_required: z.number().int(),
    approvals: z.array(
      z.object({
        reviewer_id: z.string(),
        staff_id: z
          .string()
          .nullable()
          .meta({ description: "The person behind the credential that approved; null when the service approved itself (the sandbox's own desk, reviewer_id `sandbox_scenario`), which has no person." }),
        verified_amount_minor: minorSchema.nullable(),
        amount_source: z.string().nullable(),
        created_at: timestampSchema,
      }),
    ),
    slips: z.array(
      z.object({
        receipt_id: z.string(),
        received_at: timestampSchema,
        shape: z.enum(['multipart', 'json_base64', 'reference']),
        media_type: z.enum(['image/jpeg', 'image/png', 'image/webp']).nullable(),
        size_bytes: z.number().int().nullable(),
        evidence_purged_at: timestampSchema.nullable(),
        status: z.enum(['accepted', 'claimed', 'processed']),
        outcome: z.string().nullable(),
        verification: z.record(z.string(), z.unknown()).nullable(),
        bank_transfer: z
          .object({ sending_bank_code: z.string(), trans_ref: z.string(), amount_minor: minorSchema, occurred_at: timestampSchema, sender: reviewedParty, receiver: reviewedParty })
          .nullable(),
        image_url: z.string().nullable(),
      }),
    ),
    evidence: z.array(z.object({ evidence_id: z.string(), kind: z.string(), reference: z.string(), note: z.string(), created_at: timestampSchema })),
    force_complete_requests: z.array(
      z.object({ request_id: z.string(), claimed_verified_amount_minor: minorSchema, derived_verified_amount_minor: minorSchema, note: z.string(), created_at: timestampSchema }),
    ),
    decisions: z.array(
      z.object({
        decision_id: z.string(),
        action: z.enum(['approve', 'reject', 'escalate']),
        effect: z.enum(['approval_recorded', 'settled', 'rejected', 'escalated']),
        reviewer_id: z.string(),
        staff_id: z
          .string()
          .nullable()
          .meta({ description: "The person behind the credential that decided; null when the service decided itself (the sandbox's own desk, reviewer_id `sandbox_scenario`), which has no person." }),
        note: z.string().nullable(),
        rejection_code: z.string().nullable(),
        verified_amount_minor: minorSchema.nullable(),
        amount_source: z.string().nullable(),
        review_opened_at: timestampSchema,
        created_at: timestampSchema,
      }),
    ),
  })
  .meta({ id: 'review_detail' });

export const reviewDecisionSchema = z
  .object({
    object: z.literal('review_decision'),
    decision_id: z.string().nullable(),
    effect: z.enum(['approval_recorded', 'settled', 'rejected', 'escalated']),
    replayed: z.boolean(),
    review: reviewDetailSchema,
  })
  .meta({ id: 'review_decision' });

/** A claim as the back office reads it: everything, the internal note included. */
export const backofficeClaimSchema = z
  .object({
    id: z.string(),
    object: z.literal('claim'),
    white_label_id: z.string(),
    merchant_id: z.string(),
    deposit_id: z.string(),
    livemode: z.boolean(),
    cause: claimCause,
    status: claimStatus,
    version: z.number().int(),
    amount_minor: minorSchema.nullable(),
    slip_received_at: timestampSchema,
    evidence: z
      .object({
        trans_ref: z.string().optional(),
        sending_bank_code: z.string().optional(),
        occurred_at: z.string().optional(),
        amount_minor: minorSchema.optional(),
        note: z.string().optional(),
      })
      .nullable(),
    opened_by: z.discriminatedUnion('type', [
      z.object({ type: z.literal('end_user'), credential_id: z.null() }),
      z.object({ type: z.literal('backoffice'), credential_id: z.string() }),
      z.object({ type: z.literal('system'), credential_id: z.null() }),
    ]),
    investigated_by: z.string().nullable(),
    investigated_at: timestampSchema.nullable(),
    resolution_code: z.enum(CLAIM_RESOLUTION_CODES).nullable(),
    resolution_note: z.string().nullable(),
    resolved_by: z.string().nullable(),
    resolved_at: timestampSchema.nullable(),
    refund_id: z.string().nullable().meta({ description: 'The refund of the service (a withdrawal order) that resolved the claim `refunded_in_service`; null otherwise.' }),
    created_at: timestampSchema,
    updated_at: timestampSchema,
  })
  .meta({ id: 'backoffice_claim' });

export const backofficeClaimListSchema = cursorListSchema(backofficeClaimSchema);

/** A claim as its merchant reads it (GET /v1/pay/claims/{id}): the outcome, never the internal note. */
export const claimSchema = z
  .object({
    id: z.string(),
    object: z.literal('claim'),
    version: z.number().int(),
    deposit_id: z.string(),
    cause: claimCause,
    status: claimStatus,
    amount_minor: minorSchema.nullable(),
    slip_received_at: timestampSchema,
    opened_by: z.enum(['end_user', 'backoffice', 'system']),
    resolution_code: z.enum(CLAIM_RESOLUTION_CODES).nullable(),
    resolved_at: timestampSchema.nullable(),
    refund_id: z.string().nullable().meta({ description: 'The refund (a withdrawal order) that resolved the claim `refunded_in_service`; null otherwise.' }),
    created_at: timestampSchema,
    updated_at: timestampSchema,
    livemode: z.boolean(),
  })
  .meta({ id: 'claim' });

const _queueItem: Describes<typeof reviewQueueItemSchema, ReviewQueueItem> = true;
const _detail: Describes<typeof reviewDetailSchema, ReviewDetail> = true;
const _backofficeClaim: Describes<typeof backofficeClaimSchema, BackofficeClaimView> = true;
const _claim: Describes<typeof claimSchema, MerchantClaimView> = true;
void [_queueItem, _detail, _backofficeClaim, _claim];
