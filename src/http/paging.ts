import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { parseTimestamp } from '../platform/time.ts';

/**
 * The paging parts every list route shares: the `limit` query parameter (1 to a maximum), and opaque
 * cursors (base64url JSON, each route with its own schema binding the position and the filters it was
 * issued for). A damaged or foreign cursor is just invalid: `validation_error` on `cursor`.
 */

/** `limit` as a query string: 1 to `maximum`, digits only. */
export function limitParameter(maximum: number) {
  return z
    .string()
    .refine((text) => /^[0-9]{1,4}$/.test(text) && Number(text) >= 1 && Number(text) <= maximum, { params: { reason: 'out_of_range', hint: `1 to ${maximum}` } });
}

/** A timestamp as a query string (`from`, `to`): RFC 3339, at most 40 characters. */
export const timestampParameter = z.string().max(40).refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp' } });

export function encodeCursor(position: unknown): string {
  return Buffer.from(JSON.stringify(position), 'utf8').toString('base64url');
}

export function decodeCursor<Schema extends z.ZodType>(schema: Schema, text: string): z.infer<Schema> {
  try {
    const parsed = schema.safeParse(JSON.parse(Buffer.from(text, 'base64url').toString('utf8')));
    if (parsed.success) return parsed.data as z.infer<Schema>;
  } catch {
    // Falls through to the validation error below.
  }
  throw new ApiError('validation_error', { details: { fields: [{ path: 'cursor', reason: 'invalid_cursor' }] } });
}
