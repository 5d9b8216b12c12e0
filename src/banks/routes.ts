import type { RouteRegistrar } from '../http/context.ts';
import { listBanks } from './service.ts';
import { bankListSchema } from './resources.ts';

/** GET /v1/pay/banks: `{data: [bank…]}`, used to disable unavailable banks in the sender form. */
export function registerBankRoutes(registrar: RouteRegistrar): void {
  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/banks',
    summary: 'List banks',
    responses: { 200: { description: 'The bank list.', schema: bankListSchema } },
    scope: 'pay:read',
    async handler({ db }) {
      return { status: 200, body: { data: await listBanks(db) } };
    },
  });
}
