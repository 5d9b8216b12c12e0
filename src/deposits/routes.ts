import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import type { RouteRegistrar, Services } from '../http/context.ts';
import { creationBuckets } from '../http/rate-limit.ts';
import { amountMinorSchema, clientSchema, currencySchema, endUserRefSchema, merchantReferenceSchema, metadataSchema } from '../http/order-fields.ts';
import { beneficiaryAccountFields } from '../beneficiaries/routes.ts';

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

export function registerDepositRoutes(registrar: RouteRegistrar, services: Services): void {
  const deposits = services.deposits;

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
