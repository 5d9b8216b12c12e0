import { z } from 'zod';
import { ApiError, validationError } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { FeeService, MAX_FEE_BASE_MINOR } from './service.ts';
import { feeQuoteSchema } from './resources.ts';
import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';

/**
 * GET /v1/pay/quote?channel=deposit|withdrawal&amount_minor=N (scope `pay:read`): the fee the
 * caller's merchant would pay now, under its own schedule, its brand's default or the platform
 * default, in the caller's environment. The answer (shape ours; docs/decisions/fees.md):
 *
 *   { object: 'fee_quote', channel, amount_minor, currency: 'THB', fee_total_minor, fee_breakdown,
 *     net_amount_minor (deposit: amount - fee, what the wallet is credited)
 *     | total_debit_minor (withdrawal: amount + fee, what available_minor must cover),
 *     livemode, quoted_at }
 *
 * A quote is informative, not a lock: the withdrawal's fee is locked when the order is created.
 */
const WHOLE_BAHT_MINOR = 100;

const querySchema = z
  .object({
    // A string first, so a missing channel is `required` and a wrong one `not_allowed_value`.
    channel: z.string().pipe(z.enum(['deposit', 'withdrawal'])),
    amount_minor: z
      .string()
      .max(40)
      .refine((text) => /^-?[0-9]+$/.test(text), { params: { reason: 'must_be_integer', hint: 'must_be_integer_minor_units' } }),
  })
  .strict();

/** Range of the quoted amount: a positive safe integer, at most the fee engine's domain. */
function parseAmount(text: string): number {
  const value = Number(text);
  if (value <= 0) throw validationError([{ path: 'amount_minor', reason: 'too_small', hint: 'must_be_positive' }]);
  if (!Number.isSafeInteger(value) || value > MAX_FEE_BASE_MINOR) {
    throw validationError([{ path: 'amount_minor', reason: 'too_large', hint: `at_most_${MAX_FEE_BASE_MINOR}` }]);
  }
  return value;
}

/** What the fee routes call. */
export interface FeeRouteDependencies {
  clock: Clock;
  /**
   * The brand's deposit amount range in this environment (the deposit module's policy, given by the composition
   * root): a deposit quote follows the same rule as a creation.
   */
  depositAmountRange: (db: Queryable, white_label_id: string, livemode: boolean) => Promise<{ min_amount_minor: number; max_amount_minor: number }>;
}

/** The fee routes, on the services they call. */
export function feeRoutes(services: FeeRouteDependencies): RouteModule {
  return (registrar) => registerFeeRoutes(registrar, services);
}

function registerFeeRoutes(registrar: RouteRegistrar, services: FeeRouteDependencies): void {
  const fees = new FeeService(services.clock);
  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/quote',
    summary: 'Quote a fee',
    responses: { 200: { description: 'The fee the merchant would pay now.', schema: feeQuoteSchema } },
    errors: ['amount_not_supported'],
    scope: 'pay:read',
    query: querySchema,
    async handler({ context, db, query }) {
      const amount = parseAmount(query.amount_minor);
      const channel = query.channel;
      if (channel === 'deposit') {
        // The same rule as deposit creation: whole baht inside the brand's deposit policy range.
        const policy = await services.depositAmountRange(db, context.white_label_id, context.livemode);
        if (amount % WHOLE_BAHT_MINOR !== 0 || amount < policy.min_amount_minor || amount > policy.max_amount_minor) {
          throw new ApiError('amount_not_supported', { details: { min_minor: policy.min_amount_minor, max_minor: policy.max_amount_minor } });
        }
      }
      const fee = await fees.quote(
        db,
        { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode, channel },
        amount,
      );
      const settlement =
        channel === 'deposit' ? { net_amount_minor: amount - fee.fee_total_minor } : { total_debit_minor: amount + fee.fee_total_minor };
      return {
        status: 200,
        body: {
          object: 'fee_quote',
          channel,
          amount_minor: amount,
          currency: 'THB',
          fee_total_minor: fee.fee_total_minor,
          fee_breakdown: fee.fee_breakdown,
          ...settlement,
          livemode: context.livemode,
          quoted_at: formatTimestamp(services.clock.now()),
        },
      };
    },
  });
}
