import { z } from 'zod';
import { minorSchema, pagedListSchema, timestampSchema, type Describes } from '../http/response-fields.ts';
import { disputeReasonCode } from '../withdrawals/resources.ts';
import type { DisputeDetail, DisputeRecord, MerchantDisputeView } from './service.ts';

/** Response schemas of the disputes module (spec, dispute; the back office's dispute objects). */

/** A dispute as the withdrawing merchant reads it (202 of POST /v1/pay/disputes/{id}/evidence). */
export const merchantDisputeSchema = z
  .object({
    object: z.literal('dispute'),
    id: z.string(),
    withdrawal_id: z.string(),
    leg_ref: z.string(),
    reason_code: disputeReasonCode,
    amount_minor: minorSchema,
    currency: z.literal('THB'),
    status: z.enum(['open', 'resolved']),
    opened_at: timestampSchema,
    respond_by: timestampSchema,
    evidence_count: z.number().int(),
    resolution: z.object({ outcome: z.enum(['withdrawer', 'depositor']), resolved_at: timestampSchema }).optional(),
    livemode: z.boolean(),
  })
  .meta({ id: 'dispute' });

const disputeRecordFields = {
  object: z.literal('dispute'),
  id: z.string(),
  kind: z.enum(['non_receipt', 'allocation_conflict']),
  status: z.enum(['open', 'awaiting_decision', 'resolved']),
  reason_code: disputeReasonCode,
  amount_minor: minorSchema,
  currency: z.literal('THB'),
  livemode: z.boolean(),
  withdrawal_id: z.string(),
  withdrawal_merchant_id: z.string(),
  leg_ref: z.string(),
  deposit_id: z.string(),
  deposit_merchant_id: z.string(),
  deposit_leg_ref: z.string().nullable(),
  note: z.string().nullable(),
  funds_on_hold: z.boolean(),
  opened_at: timestampSchema,
  respond_by: timestampSchema,
  evidence_count: z.number().int(),
  resolution: z
    .object({
      outcome: z.enum(['withdrawer', 'depositor']),
      resolved_by: z.enum(['operator', 'system']),
      resolver_id: z.string().nullable(),
      note: z.string().nullable(),
      resolved_at: timestampSchema,
      adjustment_balance_transaction_id: z.string().nullable(),
      adjustment_reversal_balance_transaction_id: z.string().nullable(),
    })
    .nullable(),
};

/** A dispute as an operator reads it (back office). */
export const backofficeDisputeSchema = z.object(disputeRecordFields).meta({ id: 'backoffice_dispute' });

const disputeEvidenceSchema = z.object({
  evidence_id: z.string(),
  kind: z.enum(['bank_statement_line', 'chat_transcript', 'id_document_ref', 'other']),
  reference: z.string(),
  note: z.string(),
  created_at: timestampSchema,
});

export const backofficeDisputeDetailSchema = z
  .object({ ...disputeRecordFields, evidence: z.array(disputeEvidenceSchema) })
  .meta({ id: 'backoffice_dispute_detail' });

/** POST /v1/bo/disputes/{id}/resolve: the dispute after the decision, and whether this repeated one already made. */
export const disputeResolutionSchema = z.object({ ...disputeRecordFields, evidence: z.array(disputeEvidenceSchema), replayed: z.boolean() });

export const backofficeDisputeListSchema = pagedListSchema(backofficeDisputeSchema);

const _merchantDispute: Describes<typeof merchantDisputeSchema, MerchantDisputeView> = true;
const _dispute: Describes<typeof backofficeDisputeSchema, DisputeRecord> = true;
const _disputeDetail: Describes<typeof backofficeDisputeDetailSchema, DisputeDetail> = true;
void [_merchantDispute, _dispute, _disputeDetail];
