import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import type { RouteRegistrar, Services } from '../http/context.ts';
import { creationBuckets } from '../http/rate-limit.ts';
import { amountMinorSchema, clientSchema, currencySchema, endUserRefSchema, merchantReferenceSchema, metadataSchema } from '../http/order-fields.ts';
import { beneficiaryAccountFields } from '../beneficiaries/routes.ts';
import { parseTimestamp } from '../platform/time.ts';
import { DEPOSIT_STATUSES } from './types.ts';

/**
 * POST /v1/pay/deposits (201 matched, 202 waiting for liquidity), GET /v1/pay/deposits/:id and
 * POST /v1/pay/deposits/:id/cancel. The business rules live in the service; the schema here checks
 * shapes only, so that each refusal carries the spec's code.
 */

const senderSchema = z
  .object({
    bank_code: beneficiaryAccountFields.bank_code,
    account_number: beneficiaryAccountFields.account_number,
    account_name_th: beneficiaryAccountFields.account_name_th,
    account_name_en: z.string().trim().min(1).max(100).optional(),
  })
  .strict();

export const createDepositSchema = z
  .object({
    amount_minor: amountMinorSchema,
    currency: currencySchema,
    merchant_reference: merchantReferenceSchema,
    end_user_ref: endUserRefSchema,
    sender: senderSchema.optional(),
    sender_id: z.string().min(1).max(100).optional(),
    client: clientSchema.optional(),
    fill_preference: z.enum(['any', 'internal_only']).optional(),
    min_ttl_seconds: z.number().int().min(0).max(86_400).optional(),
    expires_in_seconds: z.number().int().min(60).max(86_400).optional(),
    return_url: z
      .string()
      .max(2000)
      .refine((text) => URL.canParse(text) && ['https:', 'http:'].includes(new URL(text).protocol), { params: { reason: 'invalid_format', hint: 'an absolute http(s) URL' } })
      .optional(),
    metadata: metadataSchema.optional(),
  })
  .strict();

const LIST_MAX_LIMIT = 100;
const LIST_DEFAULT_LIMIT = 20;
const timestampText = z.string().max(40).refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp' } });

const listQuerySchema = z
  .object({
    status: z.enum(DEPOSIT_STATUSES).optional(),
    end_user_ref: z.string().min(1).max(64).optional(),
    from: timestampText.optional(),
    to: timestampText.optional(),
    order: z.enum(['asc', 'desc']).optional(),
    limit: z.string().refine((text) => /^[0-9]{1,3}$/.test(text) && Number(text) >= 1 && Number(text) <= LIST_MAX_LIMIT, { params: { reason: 'out_of_range', hint: `1 to ${LIST_MAX_LIMIT}` } }).optional(),
    cursor: z.string().min(1).max(1000).optional(),
  })
  .strict();

/** The filters a list cursor is bound to: changing any of them mid-cursor is cursor_filter_mismatch. */
const cursorSchema = z
  .object({
    v: z.literal(1),
    created_at: z.number().int().min(0).max(253_402_300_799_999),
    id: z.string().min(1).max(100),
    filters: z.object({ status: z.string().nullable(), end_user_ref: z.string().nullable(), from: z.string().nullable(), to: z.string().nullable(), order: z.enum(['asc', 'desc']) }),
  })
  .strict();
type ListCursor = z.infer<typeof cursorSchema>;

function decodeListCursor(text: string): ListCursor {
  try {
    const parsed = cursorSchema.safeParse(JSON.parse(Buffer.from(text, 'base64url').toString('utf8')));
    if (parsed.success) return parsed.data;
  } catch {
    // Falls through to the validation error below: a cursor is opaque, and a damaged one is just invalid.
  }
  throw new ApiError('validation_error', { details: { fields: [{ path: 'cursor', reason: 'invalid_cursor' }] } });
}

export function registerDepositRoutes(registrar: RouteRegistrar, services: Services): void {
  const deposits = services.deposits;

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/deposits',
    scope: 'pay:read',
    query: listQuerySchema,
    async handler({ context, db, query }) {
      const account = { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
      const filters: ListCursor['filters'] = {
        status: query.status ?? null,
        end_user_ref: query.end_user_ref ?? null,
        from: query.from ?? null,
        to: query.to ?? null,
        order: query.order ?? 'desc',
      };
      let after: { created_at: Date; deposit_id: string } | null = null;
      if (query.cursor !== undefined) {
        const cursor = decodeListCursor(query.cursor);
        if (JSON.stringify(cursor.filters) !== JSON.stringify(filters)) throw new ApiError('cursor_filter_mismatch');
        after = { created_at: new Date(cursor.created_at), deposit_id: cursor.id };
      }
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const { views } = await deposits.list(db, account, {
        status: query.status ?? null,
        end_user_ref: filters.end_user_ref,
        created_from: filters.from ? parseTimestamp(filters.from) : null,
        created_to: filters.to ? parseTimestamp(filters.to) : null,
        descending: filters.order === 'desc',
        after,
        limit: limit + 1,
      });
      const page = views.slice(0, limit);
      const last = page.at(-1);
      const nextCursor =
        views.length > limit && last
          ? Buffer.from(JSON.stringify({ v: 1, created_at: Date.parse(last.created_at), id: last.id, filters } satisfies ListCursor), 'utf8').toString('base64url')
          : null;
      return { status: 200, body: { object: 'list', data: page, has_more: nextCursor !== null, next_cursor: nextCursor } };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits',
    scope: 'pay:write',
    body: createDepositSchema,
    extraBuckets: (body, context) => creationBuckets(body, context),
    async handler({ context, db, body }) {
      const account = { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
      const created = await deposits.create(db, account, body, context.cause);
      if (created.matched) return { status: 201, body: { ...created.deposit, slip_upload: created.slip_upload }, headers: { 'Cache-Control': 'no-store' } };
      return { status: 202, body: { ...created.deposit, retry_after_seconds: created.retry_after_seconds } };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/senders',
    scope: 'pay:read',
    query: z.object({ end_user_ref: z.string().min(1).max(64) }).strict(),
    async handler({ context, db, query }) {
      const account = { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
      return { status: 200, body: { object: 'list', data: await deposits.senders(db, account, query.end_user_ref) } };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/deposits/:id',
    scope: 'pay:read',
    async handler({ context, db, params }) {
      const account = { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
      const found = await deposits.get(db, account, params.id ?? '');
      if (!found) throw new ApiError('resource_not_found');
      return { status: 200, body: found };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/slip-token',
    scope: 'pay:write',
    async handler({ context, db, params }) {
      const account = { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
      const result = await deposits.issueSlipToken(db, account, params.id ?? '', context.api_version);
      if (!result) throw new ApiError('resource_not_found');
      if (!result.ok) throw result.error;
      return { status: 200, body: result.value, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/cancel',
    scope: 'pay:write',
    async handler({ context, db, params }) {
      const account = { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
      const result = await deposits.cancel(db, account, params.id ?? '', 'merchant', context.cause);
      if (!result) throw new ApiError('resource_not_found');
      if (!result.ok) throw result.error;
      return { status: 200, body: result.value };
    },
  });
}
