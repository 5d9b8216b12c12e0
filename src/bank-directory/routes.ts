import { z } from 'zod';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { parseOrThrow } from '../http/validation.ts';
import { ApiError } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import * as repository from './repository.ts';
import { findBank } from '../banks/service.ts';
import { ensureSandboxDirectory } from './sandbox-adapter.ts';
import { sandboxBankAccountSchema } from './resources.ts';
import type { Clock } from '../platform/clock.ts';

export { seedSandboxDirectory } from './sandbox-adapter.ts';

/**
 * Sandbox-only endpoints of the sandbox bank (`/v1/test/bank/*`), for merchants' test keys. They do
 * not exist in live mode: a live key gets 404 `resource_not_found`, before its body is even looked
 * at, exactly as for an unknown path. The account number is the merchant's own test data, so answers
 * return it in full; it is never logged (the request log has the route template, and `account_number`
 * is a redacted field).
 */

const ACCOUNT_NUMBER = /^[0-9]{6,20}$/;
const BANK_CODE = /^[0-9]{3}$/;

const holderName = z.string().trim().min(1).max(100);

const createAccountSchema = z
  .object({
    bank_code: z.string().refine((text) => BANK_CODE.test(text), { params: { reason: 'unknown_bank', hint: 'a three-digit code from GET /v1/pay/banks' } }),
    account_number: z
      .string()
      .refine((text) => ACCOUNT_NUMBER.test(text), { params: { reason: 'must_be_digits', hint: '6 to 20 digits, without dashes or spaces' } }),
    holder_name_th: holderName,
    holder_name_en: holderName.nullable().optional(),
    account_type: z.enum(['personal', 'business']).default('personal'),
    status: z.enum(['open', 'closed', 'frozen']).default('open'),
  })
  .strict();

const lookupSchema = z.object({ bank_code: z.string().max(10), account_number: z.string().max(40) }).strict();

export function sandboxAccountView(row: repository.SandboxAccountRow) {
  return {
    object: 'sandbox_bank_account',
    livemode: false,
    bank_code: row.bank_code,
    account_number: row.account_number,
    holder_name_th: row.holder_name_th,
    holder_name_en: row.holder_name_en,
    account_type: row.account_type,
    status: row.status,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

/** What the sandbox bank directory routes call. */
export interface SandboxBankRouteDependencies {
  clock: Clock;
}

/** The sandbox bank directory routes, on the services they call. */
export function sandboxBankRoutes(services: SandboxBankRouteDependencies): RouteModule {
  return (registrar) => registerSandboxBankRoutes(registrar, services);
}

function registerSandboxBankRoutes(registrar: RouteRegistrar, services: SandboxBankRouteDependencies): void {
  /**
   * Adds an account to the brand's sandbox directory (201), or replaces the holder, type and status of
   * an existing one (200), so that a test can close or freeze an account. Idempotent like every POST.
   */
  registrar.merchant({
    method: 'POST',
    url: '/v1/test/bank/accounts',
    summary: 'Add or update a sandbox bank account',
    responses: { 201: { description: 'The new account.', schema: sandboxBankAccountSchema }, 200: { description: 'The existing account, updated.', schema: sandboxBankAccountSchema } },
    errors: ['resource_not_found'],
    documented_body: createAccountSchema,
    scope: 'pay:write',
    // Parsed in the handler, after the live-mode check: a live key learns nothing from validation.
    body: z.unknown(),
    async handler({ context, db, body }) {
      if (context.livemode) throw new ApiError('resource_not_found');
      const input = parseOrThrow(createAccountSchema, body);
      if (!(await findBank(db, input.bank_code))) {
        throw new ApiError('validation_error', {
          details: { fields: [{ path: 'bank_code', reason: 'unknown_bank', hint: 'a three-digit code from GET /v1/pay/banks' }] },
        });
      }
      const now = services.clock.now();
      // Seed first, so that the seed never overwrites what the merchant writes now.
      await ensureSandboxDirectory(db, context.white_label_id, now);
      const { row, created } = await repository.upsertAccount(
        db,
        {
          white_label_id: context.white_label_id,
          merchant_id: context.merchant_id,
          bank_code: input.bank_code,
          account_number: input.account_number,
          holder_name_th: input.holder_name_th,
          holder_name_en: input.holder_name_en ?? null,
          account_type: input.account_type,
          status: input.status,
        },
        now,
      );
      return { status: created ? 201 : 200, body: sandboxAccountView(row) };
    },
  });

  /**
   * Reads one account of the brand's sandbox directory. A POST with the number in the body, because a
   * full account number never goes into a URL (URLs end up in access logs and proxies).
   */
  registrar.merchant({
    method: 'POST',
    url: '/v1/test/bank/accounts/lookup',
    summary: 'Look up a sandbox bank account',
    responses: { 200: { description: 'The account.', schema: sandboxBankAccountSchema } },
    errors: ['resource_not_found'],
    documented_body: lookupSchema,
    scope: 'pay:read',
    body: z.unknown(),
    async handler({ context, db, body }) {
      if (context.livemode) throw new ApiError('resource_not_found');
      const { bank_code, account_number } = parseOrThrow(lookupSchema, body);
      // A malformed code or number names no account.
      if (!BANK_CODE.test(bank_code) || !ACCOUNT_NUMBER.test(account_number)) throw new ApiError('resource_not_found');
      await ensureSandboxDirectory(db, context.white_label_id, services.clock.now());
      const row = await repository.findAccount(db, { white_label_id: context.white_label_id, merchant_id: context.merchant_id, bank_code, account_number });
      if (!row) throw new ApiError('resource_not_found');
      return { status: 200, body: sandboxAccountView(row) };
    },
  });
}
