import { z } from 'zod';
import { cursorListSchema, listSchema, minorSchema, openEnum, timestampSchema, type Describes } from '../http/response-fields.ts';
import { feeBreakdownItemSchema } from '../fees/resources.ts';
import type { FillView, WithdrawalView } from './views.ts';
import type { WithdrawalPolicy } from './policy.ts';
import { REFUND_REASON_CODES, WITHDRAWAL_STATUSES } from './types.ts';

/** Response schemas of the withdrawals module (spec, withdrawal_order, fills[] and the dispute snapshot of a fill; the dispute objects are src/disputes/resources.ts). */

/** The reasons a withdrawer disputes a fill for (also the disputes module's). */
export const disputeReasonCode = openEnum(['FUNDS_NOT_RECEIVED', 'AMOUNT_DIFFERS', 'ALLOCATION_CONFLICT']);

export const withdrawalFillSchema = z
  .object({
    leg_ref: z.string().meta({ description: 'Unique key of the fill.' }),
    sequence: z.number().int(),
    amount_minor: minorSchema,
    fee_recognized_minor: minorSchema,
    settled_at: timestampSchema,
    balance_transaction_id: z.string(),
    auto_confirm_at: timestampSchema.meta({ description: 'Receipt is assumed at this time if the withdrawer does nothing (3 hours).' }),
    receipt_state: z.enum(['awaiting_confirmation', 'confirmed', 'disputed', 'reversed']).optional(),
  })
  .meta({ id: 'withdrawal_fill' });

const withdrawalDisputeSnapshotSchema = z.object({
  id: z.string(),
  reason_code: disputeReasonCode,
  amount_minor: minorSchema,
  opened_at: timestampSchema,
  respond_by: timestampSchema.meta({ description: 'Evidence is due before it.' }),
  evidence_url: z.string().optional(),
  leg_ref: z.string(),
  status: z.enum(['open', 'resolved']),
  resolution: z.object({ outcome: z.enum(['withdrawer', 'depositor']), resolved_at: timestampSchema }).optional(),
});

const withdrawalOrderFields = {
  id: z.string(),
  object: z.literal('withdrawal_order'),
  version: z.number().int(),
  status: z.enum(WITHDRAWAL_STATUSES),
  merchant_reference: z.string(),
  end_user_ref: z.string(),
  beneficiary_id: z.string(),
  currency: z.literal('THB'),
  amount_total_minor: minorSchema.meta({ description: 'Amount ordered, fee not included.' }),
  fee_total_minor: minorSchema,
  total_locked_minor: minorSchema,
  fee_breakdown: z.array(feeBreakdownItemSchema),
  fee_recognized_minor: minorSchema,
  filled_minor: minorSchema.meta({ description: 'Amount actually paid out; overwrite from the latest version, never add up.' }),
  reserved_minor: minorSchema.meta({ description: 'The part of this order being transferred now (not the wallet bucket).' }),
  remaining_minor: minorSchema.meta({ description: 'Amount still open; 0 once the order is closed.' }),
  refunded_minor: minorSchema
    .optional()
    .meta({ description: 'Present once the order is closed: the amount returned to the balance (the unpaid remainder plus the unused fee, and any reversed fill of the closed order with its fee), equal to its credits.' }),
  settled_splits: z.number().int(),
  max_splits: z.number().int(),
  expires_at: timestampSchema,
  approval_expires_at: timestampSchema.optional(),
  dispute: withdrawalDisputeSnapshotSchema.optional(),
  funds_on_hold: z.boolean(),
  refund_of_deposit_id: z.string().optional().meta({ description: 'Present when the order is a refund of a deposit (POST /v1/pay/deposits/{id}/refunds): the deposit it pays back.' }),
  refund_reason_code: z.enum(REFUND_REASON_CODES).optional().meta({ description: 'Present on a refund: why the deposit is refunded.' }),
  refund_note: z.string().optional().meta({ description: 'Present on a refund with a note: the note given with it.' }),
  replacement_of_withdrawal_id: z.string().optional(),
  cancel_reason_code: z.string().optional().meta({ description: 'Open enum.' }),
  canceled_by: z.enum(['merchant', 'operator', 'system']).optional(),
  rejection: z.object({ code: z.string().meta({ description: 'Open enum.' }) }).optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  livemode: z.boolean(),
  created_at: timestampSchema,
  closed_at: timestampSchema.optional(),
  fills: z.array(withdrawalFillSchema).optional().meta({ description: 'Settled fills; present on GET.' }),
};

export const withdrawalOrderSchema = z.object(withdrawalOrderFields).meta({ id: 'withdrawal_order' });

/** The back office reads the reviewer's note beside the order; merchants and events never do. */
export const backofficeWithdrawalOrderSchema = z
  .object({ ...withdrawalOrderFields, review_note: z.string().optional() })
  .meta({ id: 'backoffice_withdrawal_order' });

export const withdrawalApprovalListSchema = listSchema(withdrawalOrderSchema);

/** A page of GET /v1/pay/withdrawals: the orders as GET /v1/pay/withdrawals/{id} shows them, without `fills`. */
export const withdrawalListSchema = cursorListSchema(withdrawalOrderSchema);

export const withdrawalPolicySchema = z
  .object({
    object: z.literal('withdrawal_policy'),
    white_label_id: z.string(),
    mode: z.enum(['test', 'live']),
    approval_threshold_minor: minorSchema.nullable(),
    approval_ttl_seconds: z.number().int(),
    expires_in_seconds: z.number().int(),
    max_splits: z.number().int(),
    min_amount_minor: minorSchema,
    max_amount_minor: minorSchema,
    source: z.enum(['brand', 'default']),
  })
  .meta({ id: 'withdrawal_policy' });

const _fill: Describes<typeof withdrawalFillSchema, FillView> = true;
const _withdrawal: Describes<typeof withdrawalOrderSchema, WithdrawalView> = true;
const _policy: Describes<typeof withdrawalPolicySchema, WithdrawalPolicy & { object: 'withdrawal_policy'; white_label_id: string; mode: 'test' | 'live'; source: 'brand' | 'default' }> = true;
void [_fill, _withdrawal, _policy];
