import { z } from 'zod';
import { ApiError, unwrap } from '../platform/errors.ts';
import { parseTimestamp } from '../platform/time.ts';
import { accountOfContext, type BackofficeContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { amountMinorSchema } from '../http/order-fields.ts';
import { idText } from '../tenancy/schemas.ts';
import { CLAIM_RESOLUTION_CODES, REFUNDED_IN_SERVICE } from './claims-repository.ts';
import { CLAIM_DECIDE_ROLES, CLAIM_READ_ROLES, type ClaimDecision, type ClaimOpening, type ClaimRefund, type ClaimStaff, type ClaimService } from './claims.ts';
import { REFUND_REASON_CODES } from '../withdrawals/service.ts';
import { REFUND_ERROR_CODES } from '../refunds/service.ts';
import { decodeCursor, encodeCursor, limitParameter } from '../http/paging.ts';
import { transferReportFields } from '../slips/routes.ts';
import { requireStaffNote, staffNoteSchema } from '../http/staff-note.ts';
import { backofficeClaimListSchema, backofficeClaimSchema, claimSchema } from './resources.ts';
import type { Queryable } from '../platform/db.ts';

/**
 * Claims over HTTP. Back office: open a claim for a transfer a payer reports (POST /v1/bo/claims), the
 * brand's claims oldest first (GET /v1/bo/claims), one claim, and the decisions (investigate, resolve,
 * reject). Merchant: its own claim (GET /v1/pay/claims/{id}), where `overpayment.claim_id` leads. The
 * end user's door is the capability route at `claim_url` (src/slips/routes.ts).
 */

/** Who reads, opens and decides claims: the service's rule (claims.ts), which the console's pages use too. */
const READ_ROLES = CLAIM_READ_ROLES;
const DECIDE_ROLES = CLAIM_DECIDE_ROLES;
const LIST_MAX_LIMIT = 100;
const LIST_DEFAULT_LIMIT = 20;
const CLAIM_STATUSES = ['open', 'investigating', 'resolved', 'rejected'] as const;
const CLAIM_CAUSES = ['same_transfer_excess', 'additional_transfer', 'late_slip'] as const;


/** What a payer can say about a transfer: the same fields as at `claim_url`. */
const evidenceSchema = z.object(transferReportFields).strict();

/** The causes staff may open a claim for: a settlement's excess is only ever opened by the service itself. */
export const CLAIM_OPEN_CAUSES = ['late_slip', 'additional_transfer'] as const;

/** POST /v1/bo/claims's body; exported so that the console's form (src/backoffice-console/claims-routes.ts) validates with the same rules. */
export const openClaimBodySchema = z
  .object({
    white_label_id: idText.optional(),
    deposit_id: idText,
    cause: z.enum(CLAIM_OPEN_CAUSES),
    amount_minor: amountMinorSchema.optional(),
    evidence: evidenceSchema,
  })
  .strict()
  .superRefine((body, context) => {
    if (body.evidence.trans_ref === undefined && body.evidence.note === undefined) {
      context.addIssue({ code: 'custom', path: ['evidence', 'note'], params: { reason: 'required', hint: 'trans_ref or a note about the transfer' }, message: 'required' });
    }
    // A transfer after settlement is money on a settled order: its amount and its bank reference are what support checks.
    if (body.cause === 'additional_transfer') {
      if (body.amount_minor === undefined) context.addIssue({ code: 'custom', path: ['amount_minor'], params: { reason: 'required', hint: 'required for additional_transfer' }, message: 'required' });
      if (body.evidence.trans_ref === undefined) {
        context.addIssue({ code: 'custom', path: ['evidence', 'trans_ref'], params: { reason: 'required', hint: 'required for additional_transfer' }, message: 'required' });
      }
    }
  });

const listQuerySchema = z
  .object({
    white_label_id: idText.optional(),
    mode: z.enum(['test', 'live']).optional(),
    status: z.enum(CLAIM_STATUSES).optional(),
    cause: z.enum(CLAIM_CAUSES).optional(),
    deposit_id: idText.optional(),
    limit: limitParameter(LIST_MAX_LIMIT).optional(),
    cursor: z.string().min(1).max(1000).optional(),
  })
  .strict();

/** The list position a cursor resumes after, bound to the filters it was issued for. */
const cursorSchema = z
  .object({
    v: z.literal(1),
    created_at: z.string().min(1).max(40),
    claim_id: z.string().min(1).max(100),
    filters: z.object({ mode: z.string().nullable(), status: z.string().nullable(), cause: z.string().nullable(), deposit_id: z.string().nullable() }).strict(),
  })
  .strict();
type ClaimCursor = z.infer<typeof cursorSchema>;

function decodeClaimCursor(text: string): ClaimCursor & { after: Date } {
  const cursor = decodeCursor(cursorSchema, text);
  const after = parseTimestamp(cursor.created_at);
  if (!after) throw new ApiError('validation_error', { details: { fields: [{ path: 'cursor', reason: 'invalid_cursor' }] } });
  return { ...cursor, after };
}

const brandQuerySchema = z.object({ white_label_id: idText.optional() }).strict();
const investigateSchema = z.object({ white_label_id: idText.optional() }).strict();
/** The refund a resolution `refunded_in_service` makes: `note` is the refund's own, which its merchant reads. */
const claimRefundSchema = z
  .object({
    amount_minor: amountMinorSchema,
    reason_code: z.enum(REFUND_REASON_CODES).optional(),
    note: z.string().trim().min(1).max(500).optional(),
  })
  .strict();

const resolveSchema = z
  .object({
    white_label_id: idText.optional(),
    resolution_code: z.enum(CLAIM_RESOLUTION_CODES),
    note: staffNoteSchema,
    refund: claimRefundSchema.optional(),
    refund_id: idText.optional(),
  })
  .strict()
  .superRefine((body, context) => {
    const given = [body.refund === undefined ? null : 'refund', body.refund_id === undefined ? null : 'refund_id'].filter((name) => name !== null);
    // A refund of the service is made or named exactly when the outcome says the money went back through the service.
    if (body.resolution_code === REFUNDED_IN_SERVICE && given.length !== 1) {
      const path = given.length === 0 ? 'refund' : 'refund_id';
      context.addIssue({ code: 'custom', path: [path], params: { reason: given.length === 0 ? 'required' : 'not_allowed', hint: 'refund or refund_id, one of them' }, message: 'refund or refund_id' });
    }
    if (body.resolution_code !== REFUNDED_IN_SERVICE) {
      for (const name of given) context.addIssue({ code: 'custom', path: [name], params: { reason: 'not_allowed', hint: `only with ${REFUNDED_IN_SERVICE}` }, message: 'not allowed' });
    }
  });

function claimRefundOf(body: z.infer<typeof resolveSchema>): ClaimRefund | null {
  if (body.refund_id !== undefined) return { action: 'link', refund_id: body.refund_id };
  if (body.refund === undefined) return null;
  return { action: 'create', amount_minor: body.refund.amount_minor, reason_code: body.refund.reason_code ?? 'claim_resolution', note: body.refund.note ?? null };
}
const rejectSchema = z.object({ white_label_id: idText.optional(), note: staffNoteSchema }).strict();

/** The service's opening from a validated body, the one translation for the API and the console. */
export function claimOpeningOf(body: z.infer<typeof openClaimBodySchema>): ClaimOpening {
  const evidence = Object.fromEntries(Object.entries(body.evidence).filter(([, value]) => value !== undefined));
  return { deposit_id: body.deposit_id, cause: body.cause, amount_minor: body.amount_minor ?? null, evidence };
}

function staffOf(context: BackofficeContext): ClaimStaff {
  return { actor: actorOf(context), credential_id: context.credential_id, request_id: context.request_id, idempotency_key: context.idempotency_key };
}

/** An answer that changed nothing (the claim as it was) says so, as a replayed idempotent request does. */
function replayHeaders(replayed: boolean): Record<string, string> {
  return replayed ? { 'Idempotent-Replay': 'true' } : {};
}

/** What the claim routes call. */
export interface ClaimRouteDependencies {
  claims: ClaimService;
  /** Reads outside a request transaction. */
  database: Queryable;
}

/** The claim routes, on the services they call. */
export function claimRoutes(services: ClaimRouteDependencies): RouteModule {
  return (registrar) => registerClaimRoutes(registrar, services);
}

function registerClaimRoutes(registrar: RouteRegistrar, services: ClaimRouteDependencies): void {
  const claims = services.claims;

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/claims',
    summary: 'Open a claim',
    responses: { 201: { description: 'The new claim.', schema: backofficeClaimSchema }, 200: { description: 'The claim the same transfer (or request) opened before.', schema: backofficeClaimSchema } },
    errors: ['resource_not_found', 'deposit_state_conflict', 'late_slip_window_open'],
    roles: READ_ROLES,
    body: openClaimBodySchema,
    async handler({ context, body }) {
      const brand = brandToActOn(context, body.white_label_id);
      const opened = unwrap(await claims.open(brand, claimOpeningOf(body), staffOf(context)));
      // 201 for a new claim; 200 with the claim the same transfer (or the same request) opened before.
      return { status: opened.created ? 201 : 200, body: opened.claim, headers: replayHeaders(!opened.created) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/claims',
    summary: 'List claims',
    responses: { 200: { description: "A page of the brand's claims.", schema: backofficeClaimListSchema, cache_control: 'no-store' } },
    errors: ['cursor_filter_mismatch', 'resource_not_found'],
    roles: READ_ROLES,
    query: listQuerySchema,
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      const filters: ClaimCursor['filters'] = { mode: query.mode ?? null, status: query.status ?? null, cause: query.cause ?? null, deposit_id: query.deposit_id ?? null };
      let after: { created_at: Date; claim_id: string } | null = null;
      if (query.cursor !== undefined) {
        const cursor = decodeClaimCursor(query.cursor);
        if (JSON.stringify(cursor.filters) !== JSON.stringify(filters)) throw new ApiError('cursor_filter_mismatch');
        after = { created_at: cursor.after, claim_id: cursor.claim_id };
      }
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const items = await claims.list(services.database, brand, {
        livemode: query.mode === undefined ? null : query.mode === 'live',
        status: query.status ?? null,
        cause: query.cause ?? null,
        deposit_id: query.deposit_id ?? null,
        after,
        limit: limit + 1,
      });
      const page = items.slice(0, limit);
      const last = page.at(-1);
      const next_cursor =
        items.length > limit && last
          ? encodeCursor({ v: 1, created_at: last.created_at, claim_id: last.id, filters } satisfies ClaimCursor)
          : null;
      return { status: 200, body: { object: 'list', data: page, has_more: next_cursor !== null, next_cursor }, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/claims/:id',
    summary: 'Read a claim',
    responses: { 200: { description: 'The claim.', schema: backofficeClaimSchema, cache_control: 'no-store' } },
    roles: READ_ROLES,
    query: brandQuerySchema,
    async handler({ context, query, params }) {
      const brand = brandToActOn(context, query.white_label_id);
      const claim = await claims.get(services.database, brand, params.id ?? '');
      if (!claim) throw new ApiError('resource_not_found');
      return { status: 200, body: claim, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  const decisionRoute = <Schema extends z.ZodType<{ white_label_id?: string | undefined }>>(action: ClaimDecision['action'], schema: Schema, toDecision: (body: z.infer<Schema>) => ClaimDecision) =>
    registrar.backoffice({
      method: 'POST',
      url: `/v1/bo/claims/:id/${action}`,
      summary: 'Investigate, resolve or reject a claim',
      responses: { 200: { description: 'The claim after the decision.', schema: backofficeClaimSchema } },
      errors: [
        'claim_state_conflict',
        'review_note_required',
        ...(action === 'resolve'
          ? (['claim_refund_unusable', ...REFUND_ERROR_CODES.filter((code) => code !== 'resource_not_found')] as const)
          : []),
      ],
      roles: DECIDE_ROLES,
      body: schema,
      async handler({ context, body, params }) {
        const parsed = body as z.infer<Schema>;
        const brand = brandToActOn(context, parsed.white_label_id);
        // The note rule is checked before anything is read, so a short note changes nothing and reveals nothing.
        const decision = toDecision(parsed);
        const decided = unwrap(await claims.decide(brand, params.id ?? '', staffOf(context), decision));
        return { status: 200, body: decided.claim, headers: replayHeaders(decided.replayed) };
      },
    });

  decisionRoute('investigate', investigateSchema, () => ({ action: 'investigate' }));
  decisionRoute('resolve', resolveSchema, (body) => ({ action: 'resolve', resolution_code: body.resolution_code, note: requireStaffNote(body.note), refund: claimRefundOf(body) }));
  decisionRoute('reject', rejectSchema, (body) => ({ action: 'reject', note: requireStaffNote(body.note) }));

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/claims/:id',
    summary: 'Read a claim',
    responses: { 200: { description: 'The claim.', schema: claimSchema } },
    scope: 'pay:read',
    async handler({ context, db, params }) {
      const claim = await claims.getForMerchant(db, accountOfContext(context), params.id ?? '');
      if (!claim) throw new ApiError('resource_not_found');
      return { status: 200, body: claim };
    },
  });
}
