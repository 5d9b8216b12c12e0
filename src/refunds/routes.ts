import { z } from 'zod';
import { ApiError, unwrap } from '../platform/errors.ts';
import { accountOfContext, type BackofficeContext, type RouteModule, type RouteRegistrar } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { requireStaffNote, staffNoteSchema } from '../http/staff-note.ts';
import { idText } from '../tenancy/schemas.ts';
import { amountMinorSchema, metadataSchema } from '../http/order-fields.ts';
import { listSchema } from '../http/response-fields.ts';
import { withdrawalOrderSchema } from '../withdrawals/resources.ts';
import { REFUND_REASON_CODES } from '../withdrawals/service.ts';
import { REFUND_ERROR_CODES, type RefundService } from './service.ts';
import type { Queryable } from '../platform/db.ts';
import type { BackofficeRefunds, RefundStaff } from './backoffice.ts';

/**
 * POST /v1/pay/deposits/{id}/refunds (201 with the refund's withdrawal order) and GET of the same path (the deposit's
 * refunds). The payee is never in the body: it is the account the bank verified as the deposit's sender. The back
 * office has the same pair at /v1/bo/deposits/{id}/refunds, for the brand's deposits.
 */

/**
 * Opening a refund for a merchant is the operators' (and the platform administrator's): it spends a merchant's wallet,
 * which is brand administration; reviewers decide payments coming in and only read refunds (separation of duties).
 */
const BACKOFFICE_CREATE_ROLES = ['platform_admin', 'operator'] as const;
const BACKOFFICE_READ_ROLES = ['platform_admin', 'operator', 'reviewer'] as const;


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

/** An operator's refund: `note` is internal (the audit log), `refund_note` the refund's own, which its merchant reads. */
export const backofficeRefundSchema = z
  .object({
    white_label_id: idText.optional(),
    amount_minor: amountMinorSchema,
    reason_code: z.enum(REFUND_REASON_CODES),
    note: staffNoteSchema,
    refund_note: z.string().trim().min(1).max(500).optional(),
  })
  .strict();

const brandQuerySchema = z.object({ white_label_id: idText.optional() }).strict();

const refundListSchema = listSchema(withdrawalOrderSchema).meta({ id: 'refund_list' });

export interface RefundRouteDependencies {
  refunds: RefundService;
  backoffice: BackofficeRefunds;
  /** Reads outside a request transaction. */
  database: Queryable;
}

function staffOf(context: BackofficeContext): RefundStaff {
  return { actor: actorOf(context), credential_id: context.credential_id, request_id: context.request_id, idempotency_key: context.idempotency_key };
}

export function refundRoutes(services: RefundRouteDependencies): RouteModule {
  return (registrar) => registerRefundRoutes(registrar, services);
}

function registerRefundRoutes(registrar: RouteRegistrar, services: RefundRouteDependencies): void {
  registerMerchantRoutes(registrar, services);
  registerBackofficeRoutes(registrar, services);
}

function registerMerchantRoutes(registrar: RouteRegistrar, services: RefundRouteDependencies): void {
  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/refunds',
    summary: 'Refund a deposit to its payer',
    responses: { 201: { description: 'The refund: a withdrawal order with `refund_of_deposit_id`, paid to the account the bank verified as the sender; its amount and fee are reserved.', schema: withdrawalOrderSchema } },
    errors: REFUND_ERROR_CODES,
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

function registerBackofficeRoutes(registrar: RouteRegistrar, services: RefundRouteDependencies): void {
  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/deposits/:id/refunds',
    summary: "Refund a brand's deposit for its merchant",
    responses: {
      201: { description: "The refund, as the merchant's own: a withdrawal order paid from the merchant's wallet to the verified sender.", schema: withdrawalOrderSchema },
      200: { description: 'The refund this credential made with the same Idempotency-Key before (`Idempotent-Replay: true`).', schema: withdrawalOrderSchema },
    },
    errors: [...REFUND_ERROR_CODES, 'review_note_required', 'idempotency_key_reused'],
    roles: BACKOFFICE_CREATE_ROLES,
    body: backofficeRefundSchema,
    async handler({ context, body, params }) {
      const brand = brandToActOn(context, body.white_label_id);
      // The note rule is checked before anything is read, so a short note changes nothing and reveals nothing.
      const note = requireStaffNote(body.note);
      const request = { amount_minor: body.amount_minor, reason_code: body.reason_code, note, refund_note: body.refund_note ?? null };
      const opened = unwrap(await services.backoffice.open(brand, params.id ?? '', request, staffOf(context)));
      const headers: Record<string, string> = opened.replayed ? { 'Idempotent-Replay': 'true' } : {};
      return { status: opened.replayed ? 200 : 201, body: opened.refund, headers };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/deposits/:id/refunds',
    summary: "List a brand's deposit's refunds",
    responses: { 200: { description: "The deposit's refunds, oldest first (at most 40).", schema: refundListSchema, cache_control: 'no-store' } },
    errors: ['resource_not_found'],
    roles: BACKOFFICE_READ_ROLES,
    query: brandQuerySchema,
    async handler({ context, query, params }) {
      const brand = brandToActOn(context, query.white_label_id);
      const refunds = await services.backoffice.list(services.database, brand, params.id ?? '');
      if (refunds === null) throw new ApiError('resource_not_found');
      return { status: 200, body: { object: 'list', data: refunds }, headers: { 'Cache-Control': 'no-store' } };
    },
  });
}
