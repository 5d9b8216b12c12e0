import { z } from 'zod';
import { minorSchema, timestampSchema, type Describes } from '../http/response-fields.ts';
import type { SandboxTransferView } from './bank.ts';

/** POST /v1/test/bank/transfers: the sandbox payer's transfer and the slip to upload. */
export const sandboxTransferSchema = z
  .object({
    object: z.literal('sandbox_bank_transfer'),
    trans_ref: z.string(),
    sending_bank_code: z.string(),
    amount_minor: minorSchema,
    occurred_at: timestampSchema,
    deposit_id: z.string(),
    leg_ref: z.string().nullable(),
    livemode: z.literal(false),
    slip: z.object({
      media_type: z.enum(['image/png', 'image/jpeg']),
      image_base64: z.string(),
      payload: z.string().meta({ description: 'The mini-QR text the slip carries.' }),
    }),
  })
  .meta({ id: 'sandbox_bank_transfer' });

const _transfer: Describes<typeof sandboxTransferSchema, SandboxTransferView> = true;
void _transfer;
