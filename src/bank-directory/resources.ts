import { z } from 'zod';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import type { sandboxAccountView } from './routes.ts';

/** An account of the brand's sandbox bank directory (the merchant's own test data: the number is in full). */
export const sandboxBankAccountSchema = z
  .object({
    object: z.literal('sandbox_bank_account'),
    livemode: z.literal(false),
    bank_code: z.string(),
    account_number: z.string(),
    holder_name_th: z.string(),
    holder_name_en: z.string().nullable(),
    account_type: z.enum(['personal', 'business']),
    status: z.enum(['open', 'closed', 'frozen']),
    created_at: timestampSchema,
    updated_at: timestampSchema,
  })
  .meta({ id: 'sandbox_bank_account' });

const _account: Describes<typeof sandboxBankAccountSchema, Omit<ReturnType<typeof sandboxAccountView>, 'object' | 'livemode'> & { object: 'sandbox_bank_account'; livemode: false }> = true;
void _account;
