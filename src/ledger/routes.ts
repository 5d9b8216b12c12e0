import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { formatNullableTimestamp } from '../platform/time.ts';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { idText } from '../tenancy/schemas.ts';
import { balanceSchema, walletSchema } from './resources.ts';
import type { LedgerService } from './service.ts';
import type { Queryable } from '../platform/db.ts';
import type { TenancyService } from '../tenancy/service.ts';

/**
 * GET /v1/pay/balance: the caller's wallet in its environment (spec, Wallet balance).
 * GET /v1/bo/wallet: the same numbers for a brand operator or reviewer, for one merchant and mode,
 * with the next clearing time and whether the wallet row agrees with the fold of its movements.
 */
/** What the ledger routes call. */
export interface LedgerRouteDependencies {
  /** Reads outside a request transaction. */
  database: Queryable;
  ledger: LedgerService;
  tenancy: TenancyService;
}

/** The ledger routes, on the services they call. */
export function ledgerRoutes(services: LedgerRouteDependencies): RouteModule {
  return (registrar) => registerLedgerRoutes(registrar, services);
}

function registerLedgerRoutes(registrar: RouteRegistrar, services: LedgerRouteDependencies): void {
  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/balance',
    summary: 'Read the wallet balance',
    responses: { 200: { description: "The wallet balance in the key's environment.", schema: balanceSchema } },
    scope: 'pay:read',
    async handler({ context, db }) {
      const balance = await services.ledger.balance(db, {
        white_label_id: context.white_label_id,
        merchant_id: context.merchant_id,
        livemode: context.livemode,
      });
      return { status: 200, body: balance };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/wallet',
    summary: "Read a merchant's wallet",
    responses: { 200: { description: "A merchant's wallet and its ledger check.", schema: walletSchema } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator', 'reviewer'],
    query: z.object({ merchant_id: idText, mode: z.enum(['test', 'live']) }).strict(),
    async handler({ context, query }) {
      const scope = context.role === 'platform_admin' ? null : context.white_label_id;
      const merchant = await services.tenancy.getMerchant(query.merchant_id, scope);
      if (!merchant) throw new ApiError('resource_not_found');
      const account = { white_label_id: merchant.white_label_id, merchant_id: merchant.id, livemode: query.mode === 'live' };
      const balance = await services.ledger.balance(services.database, account);
      const check = await services.ledger.verify(services.database, account);
      const nextClearing = await services.ledger.nextClearingAt(services.database, account);
      return {
        status: 200,
        body: {
          ...balance,
          object: 'wallet',
          merchant_id: merchant.id,
          white_label_id: merchant.white_label_id,
          next_clearing_at: formatNullableTimestamp(nextClearing),
          movements: check.movements,
          ledger_consistent: check.consistent,
        },
      };
    },
  });
}
