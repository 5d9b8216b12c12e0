import { z } from 'zod';
import { minorSchema, openEnum, timestampSchema } from '../http/response-fields.ts';

/** One item of `fee_breakdown[]` (spec: split by component only; `rate_bps` for rate-based components). */
export const feeBreakdownItemSchema = z
  .object({
    component: openEnum(['processing_fee', 'fixed_fee', 'vat']),
    amount_minor: minorSchema,
    rate_bps: z.number().int().optional().meta({ description: 'Integer basis points, only for rate-based components.' }),
  })
  .meta({ id: 'fee_breakdown_item' });

/** GET /v1/pay/quote (shape ours; docs/decisions/fees.md). */
export const feeQuoteSchema = z
  .object({
    object: z.literal('fee_quote'),
    channel: z.enum(['deposit', 'withdrawal']),
    amount_minor: minorSchema,
    currency: z.literal('THB'),
    fee_total_minor: minorSchema,
    fee_breakdown: z.array(feeBreakdownItemSchema),
    net_amount_minor: minorSchema.optional().meta({ description: 'Deposits: amount minus fee, what the wallet is credited.' }),
    total_debit_minor: minorSchema.optional().meta({ description: 'Withdrawals: amount plus fee, what available_minor must cover.' }),
    livemode: z.boolean(),
    quoted_at: timestampSchema,
  })
  .meta({ id: 'fee_quote' });
