import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { parseTimestamp } from '../platform/time.ts';
import { accountOfContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { parseOrThrow } from '../http/validation.ts';
import { amountMinorSchema } from '../http/order-fields.ts';
import { beneficiaryAccountFields } from '../beneficiaries/routes.ts';
import { sandboxTransferSchema } from './resources.ts';
import type { SandboxBank } from './bank.ts';

/**
 * POST /v1/test/bank/transfers (test keys only; a live key gets 404 as for an unknown path): a sandbox
 * payer transfers to a leg of one of the merchant's test deposits, and gets the slip image to upload.
 * Every field but `deposit_id` has a default from the order, and each one changed makes one of the
 * verification outcomes: another amount (short or over), another sender name or account, another
 * receiver, a time after the deadline. The slip comes back as base64 with its media type and the
 * mini-QR text it carries. Account numbers here are the merchant's own test data.
 */

const holderName = z.string().trim().min(1).max(100);

const transferSchema = z
  .object({
    deposit_id: z.string().min(1).max(100),
    leg_ref: z.string().min(1).max(100).optional(),
    amount_minor: amountMinorSchema.optional(),
    sender: z
      .object({
        bank_code: beneficiaryAccountFields.bank_code,
        account_number: beneficiaryAccountFields.account_number,
        account_name_th: holderName,
        account_name_en: holderName.optional(),
      })
      .strict()
      .optional(),
    receiver: z
      .object({ bank_code: beneficiaryAccountFields.bank_code, account_number: beneficiaryAccountFields.account_number, account_name_th: holderName })
      .strict()
      .optional(),
    occurred_at: z
      .string()
      .max(40)
      .refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp', hint: 'RFC 3339 UTC with milliseconds' } })
      .optional(),
    image_format: z.enum(['png', 'jpeg']).optional(),
  })
  .strict();

/** What the sandbox routes call. */
export interface SandboxRouteDependencies {
  sandboxBank: SandboxBank;
}

/** The sandbox routes, on the services they call. */
export function sandboxRoutes(services: SandboxRouteDependencies): RouteModule {
  return (registrar) => registerSandboxRoutes(registrar, services);
}

function registerSandboxRoutes(registrar: RouteRegistrar, services: SandboxRouteDependencies): void {
  registrar.merchant({
    method: 'POST',
    url: '/v1/test/bank/transfers',
    summary: 'Make a sandbox bank transfer',
    responses: { 201: { description: 'The transfer and its slip.', schema: sandboxTransferSchema } },
    errors: ['resource_not_found', 'deposit_not_payable'],
    documented_body: transferSchema,
    scope: 'pay:write',
    // Parsed in the handler, after the live-mode check: a live key learns nothing from validation.
    body: z.unknown(),
    async handler({ context, db, body }) {
      if (context.livemode) throw new ApiError('resource_not_found');
      const input = parseOrThrow(transferSchema, body);
      const made = await services.sandboxBank.transfer(db, accountOfContext(context), {
        ...input,
        occurred_at: input.occurred_at === undefined ? undefined : (parseTimestamp(input.occurred_at) ?? undefined),
      });
      if (!made) throw new ApiError('resource_not_found');
      if (!made.ok) throw made.error;
      return { status: 201, body: made.value };
    },
  });
}
