import { z } from 'zod';

/**
 * Request fields that deposit and withdrawal creation share (spec, POST /v1/pay/deposits and
 * POST /v1/pay/withdrawals; Limits). One definition, so the two endpoints cannot drift apart.
 */

/** The largest amount any order accepts (10 billion baht); a brand's policy may lower it. */
export const MAX_ORDER_AMOUNT_MINOR = 1_000_000_000_000;
export const METADATA_MAX_KEYS = 20;
export const METADATA_VALUE_MAX_BYTES = 500;
/** Metadata keys are the merchant's own names; 40 characters keeps them names, not payloads. */
export const METADATA_KEY_MAX_LENGTH = 40;

/** A positive whole number of satang within the safe-integer range (spec, conventions rule 1). */
export const amountMinorSchema = z
  .number()
  .int()
  .refine((value) => value > 0, { params: { reason: 'too_small', hint: 'must_be_positive' } })
  .refine((value) => value <= MAX_ORDER_AMOUNT_MINOR, { params: { reason: 'too_large', hint: 'at_most_1000000000000' } });

export const currencySchema = z.literal('THB');

export const merchantReferenceSchema = z.string().min(1).max(64);
export const endUserRefSchema = z.string().min(1).max(64);

/** `client`: the end user's device facts; each is optional, and an incomplete object falls back to the coarse rate bucket. */
export const clientSchema = z
  .object({
    device_fingerprint: z.string().min(1).max(200).optional(),
    ip: z.string().min(1).max(64).optional(),
    user_agent: z.string().min(1).max(500).optional(),
  })
  .strict();

/** `metadata`: at most 20 keys, string values of at most 500 UTF-8 bytes, returned unchanged. */
export const metadataSchema = z
  .record(z.string().min(1).max(METADATA_KEY_MAX_LENGTH), z.string())
  .superRefine((record, context) => {
    const keys = Object.keys(record);
    if (keys.length > METADATA_MAX_KEYS) {
      context.addIssue({ code: 'custom', path: [], params: { reason: 'too_many_keys', hint: `at_most_${METADATA_MAX_KEYS}_keys` }, message: 'too many keys' });
    }
    for (const key of keys) {
      if (Buffer.byteLength(record[key] ?? '', 'utf8') > METADATA_VALUE_MAX_BYTES) {
        context.addIssue({ code: 'custom', path: [key], params: { reason: 'too_long', hint: `at_most_${METADATA_VALUE_MAX_BYTES}_bytes` }, message: 'value too long' });
      }
    }
  });

/**
 * Evidence a merchant attaches (to a deposit in review, or to a withdrawal dispute): JSON only, a
 * pointer into the merchant's own evidence store, never a file, base64 or a document URL (spec).
 */
export const merchantEvidenceSchema = z
  .object({
    kind: z.enum(['bank_statement_line', 'chat_transcript', 'id_document_ref', 'other']),
    reference: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .refine((text) => !/^[a-z][a-z0-9+.-]*:/i.test(text) && !text.includes('//'), { params: { reason: 'must_not_be_url', hint: 'a reference in your own evidence store' } }),
    note: z.string().trim().min(1).max(2000),
  })
  .strict();
