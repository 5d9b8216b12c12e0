import { z } from 'zod';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import type { BeneficiaryView } from './service.ts';

/** A beneficiary (the spec leaves its fields to us: docs/decisions/beneficiaries.md). Account numbers are masked. */
export const beneficiarySchema = z
  .object({
    id: z.string(),
    object: z.literal('beneficiary'),
    version: z.number().int(),
    status: z.enum(['pending_verification', 'verified', 'rejected']),
    bank_code: z.string(),
    bank_name_th: z.string(),
    account_number_masked: z.string(),
    account_name_th: z.string(),
    account_name_en: z.string().optional(),
    promptpay_id_masked: z.string().optional(),
    end_user_ref: z.string().optional(),
    verification: z
      .object({
        checked_at: timestampSchema,
        name_match: z.boolean(),
        failure_code: z.enum(['account_not_found', 'account_closed', 'account_frozen', 'name_mismatch', 'bank_unavailable']).optional(),
      })
      .nullable(),
    livemode: z.boolean(),
    created_at: timestampSchema,
    verified_at: timestampSchema.nullable(),
  })
  .meta({ id: 'beneficiary' });

const _beneficiary: Describes<typeof beneficiarySchema, BeneficiaryView> = true;
void _beneficiary;
