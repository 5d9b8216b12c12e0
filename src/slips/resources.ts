import { z } from 'zod';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import type { SlipReceiptView } from './types.ts';

/** Response schemas of slip intake (spec, slip_upload and Slip receipt). */

export const slipReceiptSchema = z
  .object({
    receipt_id: z.string(),
    status: z.literal('accepted').meta({ description: 'Always `accepted`; not the deposit status.' }),
    received_at: timestampSchema,
    livemode: z.boolean(),
  })
  .meta({ id: 'slip_receipt', description: 'The evidence is durably stored; the outcome comes later, by webhook or by reading the order.' });

/** The three body shapes of a slip upload (spec, POST /v1/pay/deposits/{id}/slip), as documented request bodies. */
export const slipMultipartSchema = z.object({
  file: z.string().meta({ format: 'binary', description: 'The slip image (JPEG, PNG or WebP, by its magic bytes), at most `max_bytes`.' }),
  payload: z.string().max(512).optional().meta({ description: 'The mini-QR text read from the slip; raises accuracy.' }),
});

export const slipJsonSchema = z.union([
  z.object({ image_base64: z.string().meta({ description: 'Standard base64 of the image bytes; `max_bytes` measures the decoded bytes.' }), payload: z.string().max(512).optional() }).strict(),
  z
    .object({ trans_ref: z.string().regex(/^[A-Za-z0-9]{1,50}$/), sending_bank_code: z.string().regex(/^[0-9]{3}$/), occurred_at: timestampSchema })
    .strict()
    .meta({ description: 'Reference only: always ends in review with NO_SLIP_IMAGE.' }),
]);

const _slipReceipt: Describes<typeof slipReceiptSchema, SlipReceiptView> = true;
void _slipReceipt;
