import type { RouteRegistrar } from '../http/context.ts';
import { listBanks } from './service.ts';

/** GET /v1/pay/banks: `{data: [bank…]}`, used to disable unavailable banks in the sender form. */
export function registerBankRoutes(registrar: RouteRegistrar): void {
  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/banks',
    scope: 'pay:read',
    async handler({ db }) {
      return { status: 200, body: { data: await listBanks(db) } };
    },
  });
}
