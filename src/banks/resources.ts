import { z } from 'zod';
import type { Describes } from '../http/response-fields.ts';
import type { BankView } from './service.ts';

/** The bank record of the spec (Resources, "Bank record"), and the list GET /v1/pay/banks answers. */
export const bankSchema = z
  .object({
    bank_code: z.string().meta({ description: '3 digits.' }),
    name_th: z.string(),
    name_en: z.string(),
    available: z.boolean(),
    message_th: z.string().optional().meta({ description: 'Present when unavailable; for end users.' }),
    side: z.array(z.enum(['sender', 'receiver'])),
  })
  .meta({ id: 'bank' });

export const bankListSchema = z.object({ data: z.array(bankSchema) });

const _bank: Describes<typeof bankSchema, Omit<BankView, 'side'> & { side: ('sender' | 'receiver')[] }> = true;
void _bank;
