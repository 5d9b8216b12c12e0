import { z } from 'zod';
import { accountOfContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { ApiError } from '../platform/errors.ts';
import { ACCOUNT_NUMBER_PATTERN, BANK_CODE_PATTERN, PROMPTPAY_ID_PATTERN, startsWithHonorific, type BeneficiaryService } from './service.ts';
import { beneficiarySchema } from './resources.ts';

/**
 * POST /v1/pay/beneficiaries (pay:write): 201 with a new beneficiary, pending verification; 200 with
 * the existing one when the merchant already has this account in this environment.
 * GET /v1/pay/beneficiaries/:id (pay:read): the caller's own beneficiary; any other id is 404.
 */

const name = z.string().trim().min(1).max(100);

/** The fields shared by the beneficiary body and a withdrawal's inline `beneficiary`. */
export const beneficiaryAccountFields = {
  bank_code: z
    .string()
    .refine((text) => BANK_CODE_PATTERN.test(text), { params: { reason: 'unknown_bank', hint: 'a three-digit code from GET /v1/pay/banks' } }),
  account_number: z
    .string()
    .refine((text) => ACCOUNT_NUMBER_PATTERN.test(text), { params: { reason: 'must_be_digits', hint: '6 to 20 digits, without dashes or spaces' } }),
  account_name_th: name.refine((text) => !startsWithHonorific(text), {
    params: { reason: 'must_not_contain_title', hint: 'the holder name without นาย, นาง, นางสาว, Mr., …' },
  }),
  promptpay_id: z
    .string()
    .refine((text) => PROMPTPAY_ID_PATTERN.test(text), { params: { reason: 'must_be_digits', hint: '10 digits (phone) or 13 digits (national id)' } })
    .optional(),
};

/** A withdrawal's inline `beneficiary` object (issue 3, item 7). */
export const inlineBeneficiarySchema = z.object(beneficiaryAccountFields).strict();

export const createBeneficiarySchema = z
  .object({
    ...beneficiaryAccountFields,
    account_name_en: name.optional(),
    end_user_ref: z.string().min(1).max(64).optional(),
  })
  .strict();

/** What the beneficiary routes call. */
export interface BeneficiaryRouteDependencies {
  beneficiaries: BeneficiaryService;
}

/** The beneficiary routes, on the services they call. */
export function beneficiaryRoutes(services: BeneficiaryRouteDependencies): RouteModule {
  return (registrar) => registerBeneficiaryRoutes(registrar, services);
}

function registerBeneficiaryRoutes(registrar: RouteRegistrar, services: BeneficiaryRouteDependencies): void {
  const beneficiaries = services.beneficiaries;
  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/beneficiaries',
    summary: 'Create a beneficiary',
    responses: { 201: { description: 'A new beneficiary, pending verification.', schema: beneficiarySchema }, 200: { description: 'The existing beneficiary of this account.', schema: beneficiarySchema } },
    scope: 'pay:write',
    body: createBeneficiarySchema,
    async handler({ context, db, body }) {
      const account = accountOfContext(context);
      const { beneficiary, created } = await beneficiaries.create(db, account, body, context.cause);
      return { status: created ? 201 : 200, body: beneficiary };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/beneficiaries/:id',
    summary: 'Read a beneficiary',
    responses: { 200: { description: 'The beneficiary.', schema: beneficiarySchema } },
    scope: 'pay:read',
    async handler({ context, db, params }) {
      const account = accountOfContext(context);
      const beneficiary = await beneficiaries.get(db, account, params.id ?? '');
      if (!beneficiary) throw new ApiError('resource_not_found');
      return { status: 200, body: beneficiary };
    },
  });
}
