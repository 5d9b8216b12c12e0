import { z } from 'zod';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import type { SlipUpload } from './capability.ts';

/** The response schema of a slip upload capability (spec, slip_upload), which deposit answers carry. */

export const slipUploadSchema = z
  .object({
    token: z.string().meta({ description: 'Bearer capability for one deposit. Secret: never log it, never put it in a URL.' }),
    expires_at: timestampSchema,
    upload_url: z.string().meta({ description: 'The exact address to POST the slip to; never build it.' }),
    max_bytes: z.number().int().meta({ description: 'Largest decoded evidence, in bytes.' }),
    content_types: z.array(z.string()),
  })
  .meta({ id: 'slip_upload' });

const _slipUpload: Describes<typeof slipUploadSchema, SlipUpload> = true;
void _slipUpload;
