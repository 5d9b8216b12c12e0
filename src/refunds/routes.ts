import { z } from 'zod';
import { ApiError, unwrap } from '../platform/errors.ts';
import { accountOfContext, type RouteModule, type RouteRegistrar } from '../http/context.ts';
import { amountMinorSchema, metadataSchema } from '../http/order-fields.ts';
import { listSchema } from '../http/response-fields.ts';
import { withdrawalOrderSchema } from '../withdrawals/resources.ts';
import { REFUND_REASON_CODES } from '../withdrawals/service.ts';
import type { RefundService } from './service.ts';

/**
 * POST /v1/pay/deposits/{id}/refunds (201 with the refund's withdrawal order) and GET of the same path (the deposit's
 * refunds). The payee is never in the body: it is the account the bank verified as the deposit's sender.
 */

export const createRefundSchema = z
  .object({
    amount_minor: amountMinorSchema.meta({
      description: "Whole baht in satang, at most what the deposit may still refund (its `refunds.amount_refundable_minor`); the payer receives it whole, the withdrawal fee is charged on top to the merchant.",
    }),
    reason_code: z.enum(REFUND_REASON_CODES).meta({ description: 'Why the deposit is refunded (a closed list; `note` carries the rest).' }),
    note: z.string().trim().min(1).max(500).optional().meta({ description: 'Free text kept on the refund as `refund_note`, shown as text.' }),
    metadata: metadataSchema.optional(),
  })
  .strict();

const refundListSchema = listSchema(withdrawalOrderSchema).meta({ id: 'refund_list' });

export interface RefundRouteDependencies {
  refunds: RefundService;
}

export function refundRoutes(services: RefundRouteDependencies): RouteModule {
  return (registrar) => registerRefundRoutes(registrar, services);
}

function registerRefundRoutes(registrar: RouteRegistrar, services: RefundRouteDependencies): void {
  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/refunds',
    summary: 'Refund a deposit to its payer',
    responses: { 201: { description: 'The refund: a withdrawal order with `refund_of_deposit_id`, paid to the account the bank verified as the sender; its amount and fee are reserved.', schema: withdrawalOrderSchema } },
    errors: [
      'resource_not_found',
      'deposit_not_refundable',
      'refund_exceeds_refundable',
      'refund_limit_reached',
      'refund_payee_unverified',
      'insufficient_balance',
      'amount_not_supported',
      'beneficiary_not_verified',
      'withdrawal_state_conflict',
    ],
    scope: 'pay:write',
    body: createRefundSchema,
    async handler({ context, db, body, params }) {
      const created = await services.refunds.create(db, accountOfContext(context), params.id ?? '', body, context.cause);
      return { status: 201, body: unwrap(created) };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/deposits/:id/refunds',
    summary: "List a deposit's refunds",
    responses: { 200: { description: "The deposit's refunds, oldest first (at most 40: 20 refunds and the replacements of their reversed fills).", schema: refundListSchema } },
    scope: 'pay:read',
    async handler({ context, db, params }) {
      const refunds = await services.refunds.list(db, accountOfContext(context), params.id ?? '');
      if (refunds === null) throw new ApiError('resource_not_found');
      return { status: 200, body: { object: 'list', data: refunds } };
    },
  });
}
