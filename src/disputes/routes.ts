import { z } from 'zod';
import { ApiError, unwrap } from '../platform/errors.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import { accountOfContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { idText } from '../tenancy/schemas.ts';
import { merchantEvidenceSchema } from '../http/order-fields.ts';
import { limitParameter } from '../http/paging.ts';
import { requireStaffNote, staffNoteSchema } from '../http/staff-note.ts';
import { DISPUTE_REASON_CODES, DISPUTE_ROLES, type DisputeService } from './service.ts';
import { backofficeDisputeDetailSchema, backofficeDisputeListSchema, disputeResolutionSchema, merchantDisputeSchema } from './resources.ts';
import { withdrawalOrderSchema } from '../withdrawals/resources.ts';
import type { Queryable } from '../platform/db.ts';

/**
 * Withdrawal disputes over HTTP. Merchant (the withdrawing side): POST /v1/pay/withdrawals/:id/disputes
 * opens one on a fill (201 with the order, `dispute` and `funds_on_hold`), POST /v1/pay/disputes/:id/evidence
 * sends evidence before `respond_by` (202 with the dispute). Back office (operators and the platform
 * administrator): the list, one dispute with its evidence, and the resolution for either side.
 */

const LIST_MAX_LIMIT = 100;
const LIST_DEFAULT_LIMIT = 20;
const MERCHANT_TEXT_MAX_CHARS = 2000;

const openSchema = z
  .object({
    leg_ref: z.string().min(1).max(100),
    reason_code: z.enum(DISPUTE_REASON_CODES),
    note: z.string().trim().min(1).max(MERCHANT_TEXT_MAX_CHARS).optional(),
  })
  .strict();

const listQuerySchema = z
  .object({
    white_label_id: idText.optional(),
    mode: z.enum(['test', 'live']).optional(),
    status: z.enum(['open', 'awaiting_decision', 'resolved']).optional(),
    order: z.enum(['oldest', 'newest']).optional(),
    limit: limitParameter(LIST_MAX_LIMIT).optional(),
  })
  .strict();

const resolveSchema = z
  .object({
    white_label_id: idText.optional(),
    outcome: z.enum(['withdrawer', 'depositor']),
    // Its minimum is `review_note_required`, checked after the schema (spec, back-office note rule).
    note: staffNoteSchema,
  })
  .strict();

/** What the dispute routes call. */
export interface DisputeRouteDependencies {
  /** Reads outside a request transaction. */
  database: Queryable;
  disputes: DisputeService;
}

/** The dispute routes, on the services they call. */
export function disputeRoutes(services: DisputeRouteDependencies): RouteModule {
  return (registrar) => registerDisputeRoutes(registrar, services);
}

function registerDisputeRoutes(registrar: RouteRegistrar, services: DisputeRouteDependencies): void {
  const disputes = services.disputes;

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/withdrawals/:id/disputes',
    summary: 'Dispute a fill (non-receipt)',
    responses: { 201: { description: 'The order with its `dispute` and `funds_on_hold`.', schema: withdrawalOrderSchema } },
    errors: ['dispute_window_closed', 'fill_already_disputed', 'withdrawal_state_conflict'],
    scope: 'pay:write',
    body: openSchema,
    async handler({ context, db, body, params }) {
      const result = await disputes.open(db, accountOfContext(context), params.id ?? '', {
        leg_ref: body.leg_ref,
        reason_code: body.reason_code,
        note: body.note ?? null,
        request_id: context.request_id,
        cause: context.cause,
      });
      if (!result) throw new ApiError('resource_not_found');
      return { status: 201, body: unwrap(result) };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/disputes/:id/evidence',
    summary: 'Send evidence for a dispute',
    responses: { 202: { description: 'The dispute with the evidence counted.', schema: merchantDisputeSchema } },
    errors: ['dispute_evidence_closed', 'evidence_limit_reached'],
    scope: 'pay:write',
    body: merchantEvidenceSchema,
    async handler({ context, db, body, params }) {
      const result = await disputes.addEvidence(db, accountOfContext(context), params.id ?? '', { ...body, request_id: context.request_id });
      if (!result) throw new ApiError('resource_not_found');
      return { status: 202, body: unwrap(result) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/disputes',
    summary: 'List disputes',
    responses: { 200: { description: "The brand's disputes.", schema: backofficeDisputeListSchema } },
    errors: ['resource_not_found'],
    roles: DISPUTE_ROLES,
    query: listQuerySchema,
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const rows = await disputes.list(services.database, brand, {
        status: query.status ?? null,
        livemode: query.mode === undefined ? null : query.mode === 'live',
        newest_first: query.order === 'newest',
        after: null,
        limit: limit + 1,
      });
      return { status: 200, body: { object: 'list', data: rows.slice(0, limit), has_more: rows.length > limit } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/disputes/:id',
    summary: 'Read a dispute',
    responses: { 200: { description: 'The dispute with its evidence.', schema: backofficeDisputeDetailSchema, cache_control: 'no-store' } },
    roles: DISPUTE_ROLES,
    query: z.object({ white_label_id: idText.optional() }).strict(),
    async handler({ context, query, params }) {
      const brand = brandToActOn(context, query.white_label_id);
      const detail = await disputes.detail(services.database, brand, params.id ?? '');
      if (!detail) throw new ApiError('resource_not_found');
      return { status: 200, body: detail, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/disputes/:id/resolve',
    summary: 'Resolve a dispute',
    responses: { 200: { description: 'The resolved dispute.', schema: disputeResolutionSchema } },
    errors: ['dispute_already_resolved', 'dispute_not_resolvable', 'review_note_required'],
    roles: DISPUTE_ROLES,
    body: resolveSchema,
    async handler({ context, body, params }) {
      const brand = brandToActOn(context, body.white_label_id);
      const note = requireStaffNote(body.note);
      const resolved = unwrap(
        await disputes.resolve(brand, params.id ?? '', body.outcome, {
          actor: actorOf(context),
          resolved_by: 'operator',
          resolver_id: context.credential_id,
          note,
          cause: { request_id: context.request_id, idempotency_key: context.idempotency_key, api_version: CURRENT_API_VERSION },
        }),
      );
      return { status: 200, body: { ...resolved.dispute, replayed: resolved.replayed } };
    },
  });
}
