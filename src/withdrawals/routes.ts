import { z } from 'zod';
import { ApiError, unwrap } from '../platform/errors.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import type { EventCause } from '../platform/cause.ts';
import { accountOfContext, type BackofficeContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { creationBuckets } from '../http/rate-limit.ts';
import { decodeCursor, encodeCursor, limitParameter, timestampParameter } from '../http/paging.ts';
import { amountMinorSchema, clientSchema, currencySchema, endUserRefSchema, merchantReferenceSchema, metadataSchema } from '../http/order-fields.ts';
import { inlineBeneficiarySchema } from '../beneficiaries/routes.ts';
import { idText } from '../tenancy/schemas.ts';
import { requireStaffNote } from '../http/staff-note.ts';
import { POLICY_LIMITS, type WithdrawalPolicyService } from './policy.ts';
import { listSchema } from '../http/response-fields.ts';
import { backofficeWithdrawalOrderSchema, withdrawalListSchema, withdrawalOrderSchema, withdrawalPolicySchema } from './resources.ts';
import { parseTimestamp } from '../platform/time.ts';
import { WITHDRAWAL_STATUSES } from './types.ts';
import type { Queryable } from '../platform/db.ts';
import { mapPlannedCommand } from '../platform/read-part.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { OrderListFilters, WithdrawalService, WithdrawalView } from './service.ts';

/**
 * Merchant routes: POST /v1/pay/withdrawals (201 with the order), GET /v1/pay/withdrawals (a page of the
 * merchant's orders, without `fills[]`), GET /v1/pay/withdrawals/:id (with `fills[]`),
 * POST /v1/pay/withdrawals/:id/cancel. Back-office routes: the approval queue, approve,
 * reject, one order, and the brand's withdrawal policy. Every back-office change writes its audit row
 * in the transaction of the change.
 */

export const createWithdrawalSchema = z
  .object({
    amount_minor: amountMinorSchema,
    currency: currencySchema,
    merchant_reference: merchantReferenceSchema,
    end_user_ref: endUserRefSchema,
    beneficiary_id: z.string().min(1).max(100).optional(),
    beneficiary: inlineBeneficiarySchema.optional(),
    client: clientSchema.optional(),
    metadata: metadataSchema.optional(),
  })
  .strict()
  .superRefine((body, context) => {
    if (body.beneficiary_id === undefined && body.beneficiary === undefined) {
      context.addIssue({ code: 'custom', path: ['beneficiary_id'], params: { reason: 'required', hint: 'beneficiary_id or beneficiary' }, message: 'required' });
    }
    if (body.beneficiary_id !== undefined && body.beneficiary !== undefined) {
      context.addIssue({ code: 'custom', path: ['beneficiary'], params: { reason: 'not_allowed_with', hint: 'send beneficiary_id or beneficiary, not both' }, message: 'both' });
    }
  });

const LIST_MAX_LIMIT = 100;
const LIST_DEFAULT_LIMIT = 20;

/** GET /v1/pay/withdrawals: the deposit list's paging and limits (src/deposits/routes.ts), with the withdrawal's filters. */
const listQuerySchema = z
  .object({
    status: z.enum(WITHDRAWAL_STATUSES).optional(),
    refund_of_deposit_id: idText.optional(),
    merchant_reference: merchantReferenceSchema.optional(),
    end_user_ref: endUserRefSchema.optional(),
    from: timestampParameter.optional(),
    to: timestampParameter.optional(),
    order: z.enum(['asc', 'desc']).optional(),
    limit: limitParameter(LIST_MAX_LIMIT).optional(),
    cursor: z.string().min(1).max(1000).optional(),
  })
  .strict();

/** The filters a list cursor is bound to: changing any of them mid-cursor is cursor_filter_mismatch (`limit` may change). */
const listFiltersSchema = z
  .object({
    status: z.string().nullable(),
    refund_of_deposit_id: z.string().nullable(),
    merchant_reference: z.string().nullable(),
    end_user_ref: z.string().nullable(),
    from: z.string().nullable(),
    to: z.string().nullable(),
    order: z.enum(['asc', 'desc']),
  })
  .strict();
type ListFilters = z.infer<typeof listFiltersSchema>;
const LIST_FILTER_NAMES = Object.keys(listFiltersSchema.shape) as (keyof ListFilters)[];

const cursorSchema = z
  .object({ v: z.literal(1), created_at: z.number().int().min(0).max(253_402_300_799_999), id: z.string().min(1).max(100), filters: listFiltersSchema })
  .strict();
type ListCursor = z.infer<typeof cursorSchema>;

function listFiltersOf(query: z.infer<typeof listQuerySchema>): ListFilters {
  return {
    status: query.status ?? null,
    refund_of_deposit_id: query.refund_of_deposit_id ?? null,
    merchant_reference: query.merchant_reference ?? null,
    end_user_ref: query.end_user_ref ?? null,
    from: query.from ?? null,
    to: query.to ?? null,
    order: query.order ?? 'desc',
  };
}

/** Where a cursor's page starts; a cursor of other filters is refused, and a damaged one is just an invalid value. */
function cursorPosition(text: string, filters: ListFilters): OrderListFilters['after'] {
  const cursor = decodeCursor(cursorSchema, text);
  const bound = cursor.filters;
  if (LIST_FILTER_NAMES.some((name) => bound[name] !== filters[name])) throw new ApiError('cursor_filter_mismatch');
  return { created_at: new Date(cursor.created_at), withdrawal_id: cursor.id };
}

function nextCursor(last: WithdrawalView, filters: ListFilters): string {
  return encodeCursor({ v: 1, created_at: Date.parse(last.created_at), id: last.id, filters } satisfies ListCursor);
}

/** The service's filters for one request: a page and one more row, which tells whether another page follows. */
function serviceFilters(query: z.infer<typeof listQuerySchema>, filters: ListFilters, limit: number): OrderListFilters {
  return {
    status: query.status ?? null,
    refund_of_deposit_id: filters.refund_of_deposit_id,
    merchant_reference: filters.merchant_reference,
    end_user_ref: filters.end_user_ref,
    created_from: filters.from === null ? null : parseTimestamp(filters.from),
    created_to: filters.to === null ? null : parseTimestamp(filters.to),
    descending: filters.order === 'desc',
    after: query.cursor === undefined ? null : cursorPosition(query.cursor, filters),
    limit: limit + 1,
  };
}

const noteSchema = z.string().trim().max(1000);
const modeSchema = z.enum(['test', 'live']);

function backofficeCause(context: BackofficeContext): EventCause {
  return { request_id: context.request_id, idempotency_key: null, api_version: CURRENT_API_VERSION };
}

/** A brand-scoped credential's brand; the platform administrator acts on brands through tenancy. */
function ownBrand(context: BackofficeContext): string {
  if (!context.white_label_id) throw new ApiError('scope_denied');
  return context.white_label_id;
}

/** What the withdrawal routes call. */
export interface WithdrawalRouteDependencies {
  /** Reads outside a request transaction. */
  database: Queryable;
  tenancy: TenancyService;
  withdrawalPolicies: WithdrawalPolicyService;
  withdrawals: WithdrawalService;
}

/** The withdrawal routes, on the services they call. */
export function withdrawalRoutes(services: WithdrawalRouteDependencies): RouteModule {
  return (registrar) => registerWithdrawalRoutes(registrar, services);
}

function registerWithdrawalRoutes(registrar: RouteRegistrar, services: WithdrawalRouteDependencies): void {
  const withdrawals = services.withdrawals;

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    summary: 'Create a withdrawal',
    responses: { 201: { description: 'The new withdrawal order; its amount and fee are reserved.', schema: withdrawalOrderSchema } },
    errors: ['insufficient_balance', 'amount_not_supported', 'merchant_reference_in_use', 'beneficiary_not_verified', 'resource_not_found', 'withdrawal_state_conflict', 'alloc_state_conflict'],
    scope: 'pay:write',
    body: createWithdrawalSchema,
    extraBuckets: (body, context) => creationBuckets(body, context),
    // The beneficiary and the creation's policy, reference and fee reads ride on the idempotency statement.
    command: ({ context, body }) => mapPlannedCommand(withdrawals.planForMerchant(accountOfContext(context), body, context.cause), (created) => ({ status: 201, body: created })),
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/withdrawals',
    summary: 'List withdrawals',
    responses: {
      200: {
        description:
          "A page of the merchant's withdrawal orders in this mode, newest first unless `order=asc`. Each item is the order as GET /v1/pay/withdrawals/{id} shows it, without `fills[]`: a list reads no order's fills; read one order for them.",
        schema: withdrawalListSchema,
      },
    },
    errors: ['cursor_filter_mismatch'],
    scope: 'pay:read',
    query: listQuerySchema,
    async handler({ context, db, query }) {
      const filters = listFiltersOf(query);
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const views = await withdrawals.list(db, accountOfContext(context), serviceFilters(query, filters, limit));
      const page = views.slice(0, limit);
      const last = page.at(-1);
      const next_cursor = views.length > limit && last ? nextCursor(last, filters) : null;
      return { status: 200, body: { object: 'list', data: page, has_more: next_cursor !== null, next_cursor } };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/withdrawals/:id',
    summary: 'Read a withdrawal',
    responses: { 200: { description: 'The order with its fills.', schema: withdrawalOrderSchema } },
    scope: 'pay:read',
    async handler({ context, db, params }) {
      const account = accountOfContext(context);
      const found = await withdrawals.get(db, account, params.id ?? '');
      if (!found) throw new ApiError('resource_not_found');
      return { status: 200, body: found };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/withdrawals/:id/cancel',
    summary: 'Cancel a withdrawal',
    responses: { 200: { description: 'The canceled order.', schema: withdrawalOrderSchema } },
    errors: ['withdrawal_has_pending_fill', 'withdrawal_not_cancelable', 'withdrawal_state_conflict'],
    scope: 'pay:write',
    async handler({ context, db, params }) {
      const account = accountOfContext(context);
      const result = await withdrawals.cancel(db, account, params.id ?? '', context.cause);
      if (!result) throw new ApiError('resource_not_found');
      return { status: 200, body: unwrap(result) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/withdrawal-approvals',
    summary: 'List withdrawals waiting for approval',
    responses: { 200: { description: 'Orders waiting for approval, oldest first.', schema: listSchema(withdrawalOrderSchema) } },
    roles: ['operator', 'reviewer'],
    query: z.object({ mode: modeSchema, limit: z.coerce.number().int().min(1).max(200).optional() }).strict(),
    async handler({ context, query }) {
      const data = await withdrawals.pendingApproval(services.database, ownBrand(context), query.mode === 'live', query.limit ?? 50);
      return { status: 200, body: { object: 'list', data } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/withdrawals/:id',
    summary: 'Read a withdrawal (back office)',
    responses: { 200: { description: "The order with its fills and the reviewer's note.", schema: backofficeWithdrawalOrderSchema } },
    roles: ['operator', 'reviewer'],
    async handler({ context, params }) {
      const found = await withdrawals.getInBrand(services.database, ownBrand(context), params.id ?? '');
      if (!found) throw new ApiError('resource_not_found');
      return { status: 200, body: found };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/withdrawals/:id/approve',
    summary: 'Approve a withdrawal',
    responses: { 200: { description: 'The approved order.', schema: withdrawalOrderSchema } },
    errors: ['withdrawal_not_pending_approval', 'withdrawal_state_conflict'],
    roles: ['operator', 'reviewer'],
    body: z.object({ note: noteSchema.optional() }).strict(),
    async handler({ context, params, body }) {
      const brand = ownBrand(context);
      const approved = await withdrawals.decideApprovalByStaff({
        white_label_id: brand,
        withdrawal_id: params.id ?? '',
        decision: 'approve',
        note: body.note || null,
        actor: actorOf(context),
        cause: backofficeCause(context),
      });
      if (!approved) throw new ApiError('resource_not_found');
      return { status: 200, body: approved };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/withdrawals/:id/reject',
    summary: 'Reject a withdrawal',
    responses: { 200: { description: 'The rejected order with the note.', schema: backofficeWithdrawalOrderSchema } },
    errors: ['withdrawal_not_pending_approval', 'withdrawal_state_conflict', 'review_note_required'],
    roles: ['operator', 'reviewer'],
    body: z.object({ note: noteSchema }).strict(),
    async handler({ context, params, body }) {
      const brand = ownBrand(context);
      requireStaffNote(body.note);
      const rejected = await withdrawals.decideApprovalByStaff({
        white_label_id: brand,
        withdrawal_id: params.id ?? '',
        decision: 'reject',
        note: body.note,
        actor: actorOf(context),
        cause: backofficeCause(context),
      });
      if (!rejected) throw new ApiError('resource_not_found');
      // The answer is the back office's: the note beside the order, as GET /v1/bo/withdrawals/{id} shows it.
      return { status: 200, body: { ...rejected, review_note: body.note } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/withdrawal-policy',
    summary: 'Read the withdrawal policy',
    responses: { 200: { description: "The brand's withdrawal policy.", schema: withdrawalPolicySchema } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator', 'reviewer'],
    query: z.object({ mode: modeSchema, white_label_id: idText.optional() }).strict(),
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      if (!(await services.tenancy.getBrand(brand))) throw new ApiError('resource_not_found');
      const policy = await services.withdrawalPolicies.policyFor(services.database, brand, query.mode === 'live');
      return { status: 200, body: { object: 'withdrawal_policy', white_label_id: brand, mode: query.mode, ...policy } };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/withdrawal-policy',
    summary: 'Set the withdrawal policy',
    responses: { 200: { description: 'The policy as stored.', schema: withdrawalPolicySchema } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator'],
    body: z
      .object({
        white_label_id: idText.optional(),
        mode: modeSchema,
        approval_threshold_minor: amountMinorSchema.nullable(),
        approval_ttl_seconds: z.number().int().min(POLICY_LIMITS.approval_ttl_seconds.min).max(POLICY_LIMITS.approval_ttl_seconds.max),
        expires_in_seconds: z.number().int().min(POLICY_LIMITS.expires_in_seconds.min).max(POLICY_LIMITS.expires_in_seconds.max),
        max_splits: z.number().int().min(POLICY_LIMITS.max_splits.min).max(POLICY_LIMITS.max_splits.max),
        min_amount_minor: amountMinorSchema,
        max_amount_minor: amountMinorSchema,
      })
      .strict()
      .refine((body) => body.min_amount_minor <= body.max_amount_minor, {
        path: ['min_amount_minor'],
        params: { reason: 'too_large', hint: 'min_amount_minor must not exceed max_amount_minor' },
      }),
    async handler({ context, body }) {
      const brand = brandToActOn(context, body.white_label_id);
      if (!(await services.tenancy.getBrand(brand))) throw new ApiError('resource_not_found');
      const { white_label_id: _ignored, mode, ...terms } = body;
      const policy = await services.withdrawalPolicies.setPolicyByStaff(actorOf(context), brand, mode, terms);
      return { status: 200, body: { object: 'withdrawal_policy', white_label_id: brand, mode, ...policy } };
    },
  });
}
