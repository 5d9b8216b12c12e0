import { z } from 'zod';
import { ApiError, unwrap } from '../platform/errors.ts';
import { accountOfContext, type BackofficeContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { amountMinorSchema, merchantEvidenceSchema } from '../http/order-fields.ts';
import { decodeCursor, encodeCursor, limitParameter } from '../http/paging.ts';
import { requireStaffNote, STAFF_NOTE_MAX_CHARS, STAFF_NOTE_MIN_CHARS, staffNoteSchema } from '../http/staff-note.ts';
import { idText } from '../tenancy/schemas.ts';
import { REJECTION_CODES, REVERSAL_REASON_CODES } from './catalogue.ts';
import type { Decision, Reviewer, ReviewService } from './service.ts';
import { depositOrderSchema } from '../deposits/resources.ts';
import { reviewDecisionSchema, reviewDetailSchema, reviewQueueSchema } from './resources.ts';
import type { Queryable } from '../platform/db.ts';

/**
 * The review desk over HTTP. Back office: the queue (GET /v1/bo/reviews), one order with its slips,
 * evidence and decisions (GET /v1/bo/reviews/:deposit_id), a slip image behind back-office credentials
 * (never a public link), the decisions (approve, reject, escalate; reviewers only), and an operator's
 * reversal of a settled order (POST /v1/bo/deposits/:id/reverse). Merchant: evidence and force-complete
 * on an order in review (spec, POST /v1/pay/deposits/{id}/evidence and /force-complete).
 */

const READ_ROLES = ['platform_admin', 'operator', 'reviewer'] as const;
const LIST_MAX_LIMIT = 100;
const LIST_DEFAULT_LIMIT = 20;


const queueQuerySchema = z
  .object({
    white_label_id: idText.optional(),
    mode: z.enum(['test', 'live']).optional(),
    reason: z.string().regex(/^[A-Z][A-Z_]{1,63}$/).optional(),
    escalated: z.enum(['true', 'false']).optional(),
    limit: limitParameter(LIST_MAX_LIMIT).optional(),
    cursor: z.string().min(1).max(1000).optional(),
  })
  .strict();

/** The queue position a cursor resumes after, bound to the filters it was issued for. */
const queueCursorSchema = z
  .object({
    v: z.literal(1),
    opened_at: z.string().min(1).max(40),
    deposit_id: z.string().min(1).max(100),
    filters: z.object({ mode: z.string().nullable(), reason: z.string().nullable(), escalated: z.string().nullable() }),
  })
  .strict();
type QueueCursor = z.infer<typeof queueCursorSchema>;

const approveSchema = z.object({ verified_amount_minor: amountMinorSchema.optional(), note: staffNoteSchema.optional() }).strict();
const rejectSchema = z.object({ rejection_code: z.enum(REJECTION_CODES), note: staffNoteSchema }).strict();
const escalateSchema = z.object({ note: staffNoteSchema }).strict();
const reverseSchema = z.object({ white_label_id: idText.optional(), reason_code: z.enum(REVERSAL_REASON_CODES), note: staffNoteSchema }).strict();

const forceCompleteNote = z
  .string()
  .max(STAFF_NOTE_MAX_CHARS)
  .refine((text) => [...text.trim()].length >= STAFF_NOTE_MIN_CHARS, { params: { reason: 'too_short', hint: `at least ${STAFF_NOTE_MIN_CHARS} characters` } });

const forceCompleteSchema = z.object({ verified_amount_minor: amountMinorSchema, note: forceCompleteNote }).strict();

function reviewerOf(context: BackofficeContext): Reviewer {
  return { actor: actorOf(context), reviewer_id: context.credential_id, request_id: context.request_id, idempotency_key: context.idempotency_key };
}

/** What the review desk routes call. */
export interface ReviewRouteDependencies {
  /** Reads outside a request transaction. */
  database: Queryable;
  /** The base URL the service advertises. */
  publicBaseUrl(): string;
  review: ReviewService;
}

/** The review desk routes, on the services they call. */
export function reviewRoutes(services: ReviewRouteDependencies): RouteModule {
  return (registrar) => registerReviewRoutes(registrar, services);
}

function registerReviewRoutes(registrar: RouteRegistrar, services: ReviewRouteDependencies): void {
  const review = services.review;
  const imageUrl = (white_label_id: string, deposit_id: string) => (receipt_id: string) =>
    `${services.publicBaseUrl()}/v1/bo/reviews/${deposit_id}/slips/${receipt_id}/image?white_label_id=${white_label_id}`;

  async function detailOrThrow(white_label_id: string, deposit_id: string) {
    const detail = await review.detail(services.database, white_label_id, deposit_id, imageUrl(white_label_id, deposit_id));
    if (!detail) throw new ApiError('resource_not_found');
    return detail;
  }

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/reviews',
    summary: 'The review queue',
    responses: { 200: { description: 'A page of the review queue.', schema: reviewQueueSchema } },
    errors: ['cursor_filter_mismatch', 'resource_not_found'],
    roles: READ_ROLES,
    query: queueQuerySchema,
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      const filters: QueueCursor['filters'] = { mode: query.mode ?? null, reason: query.reason ?? null, escalated: query.escalated ?? null };
      let after: { opened_at: string; deposit_id: string } | null = null;
      if (query.cursor !== undefined) {
        const cursor = decodeCursor(queueCursorSchema, query.cursor);
        if (JSON.stringify(cursor.filters) !== JSON.stringify(filters)) throw new ApiError('cursor_filter_mismatch');
        after = { opened_at: cursor.opened_at, deposit_id: cursor.deposit_id };
      }
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const items = await review.queue(services.database, brand, {
        livemode: filters.mode === null ? null : filters.mode === 'live',
        reason_code: filters.reason,
        escalated: filters.escalated === null ? null : filters.escalated === 'true',
        after,
        limit: limit + 1,
      });
      const page = items.slice(0, limit);
      const last = page.at(-1);
      const next_cursor =
        items.length > limit && last
          ? encodeCursor({ v: 1, opened_at: last.opened_at, deposit_id: last.deposit_id, filters } satisfies QueueCursor)
          : null;
      return { status: 200, body: { object: 'list', data: page, has_more: next_cursor !== null, next_cursor } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/reviews/:deposit_id',
    summary: 'Read a review',
    responses: { 200: { description: 'Everything a reviewer reads about the order.', schema: reviewDetailSchema, cache_control: 'no-store' } },
    roles: READ_ROLES,
    query: z.object({ white_label_id: idText.optional() }).strict(),
    async handler({ context, query, params }) {
      const brand = brandToActOn(context, query.white_label_id);
      return { status: 200, body: await detailOrThrow(brand, params.deposit_id ?? ''), headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/reviews/:deposit_id/slips/:receipt_id/image',
    summary: 'Read a slip image (back office)',
    responses: { 200: { description: 'The slip image.', binary: ['image/jpeg', 'image/png', 'image/webp'], cache_control: 'private, no-store' } },
    // 410 once the evidence retention deleted the image (its receipt's `evidence_purged_at`).
    errors: ['slip_evidence_purged'],
    roles: READ_ROLES,
    query: z.object({ white_label_id: idText.optional() }).strict(),
    async handler({ context, query, params }) {
      const brand = brandToActOn(context, query.white_label_id);
      const image = await review.image(services.database, brand, params.deposit_id ?? '', params.receipt_id ?? '');
      if (!image) throw new ApiError('resource_not_found');
      return {
        status: 200,
        body: null,
        binary: { content_type: image.media_type, bytes: image.bytes },
        headers: { 'Cache-Control': 'private, no-store', 'X-Content-Type-Options': 'nosniff', 'Content-Disposition': 'inline' },
      };
    },
  });

  const decisionRoute = <Schema extends z.ZodType>(action: Decision['action'], schema: Schema, toDecision: (body: z.infer<Schema>) => Decision) =>
    registrar.backoffice({
      method: 'POST',
      url: `/v1/bo/reviews/:deposit_id/${action}`,
      summary: 'Approve, reject or escalate a review',
      responses: { 200: { description: 'The decision and the review after it.', schema: reviewDecisionSchema } },
      errors: ['review_already_decided', 'four_eyes_same_reviewer', 'escalation_same_reviewer', 'deposit_state_conflict', 'review_note_required', 'idempotency_key_reused', 'alloc_state_conflict', 'withdrawal_state_conflict'],
      // Decisions are the reviewers' (operators administer the brand and reverse settled orders).
      roles: ['reviewer'],
      body: schema,
      async handler({ context, body, params }) {
        const brand = brandToActOn(context, undefined);
        const decision = toDecision(body as z.infer<Schema>);
        const deposit_id = params.deposit_id ?? '';
        const outcome = unwrap(await review.decide(brand, deposit_id, reviewerOf(context), decision));
        return {
          status: 200,
          body: { object: 'review_decision', decision_id: outcome.decision_id, effect: outcome.effect, replayed: outcome.replayed, review: await detailOrThrow(brand, deposit_id) },
        };
      },
    });

  decisionRoute('approve', approveSchema, (body) => ({
    action: 'approve',
    verified_amount_minor: body.verified_amount_minor ?? null,
    // An approval's note is optional; one that is given follows the same rule as every reviewer note.
    note: body.note === undefined ? null : requireStaffNote(body.note),
  }));
  decisionRoute('reject', rejectSchema, (body) => ({ action: 'reject', rejection_code: body.rejection_code, note: requireStaffNote(body.note) }));
  decisionRoute('escalate', escalateSchema, (body) => ({ action: 'escalate', note: requireStaffNote(body.note) }));

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/deposits/:id/reverse',
    summary: 'Reverse a settled deposit',
    responses: { 200: { description: 'The reversed order.', schema: depositOrderSchema } },
    errors: ['deposit_state_conflict', 'review_note_required'],
    roles: ['platform_admin', 'operator'],
    body: reverseSchema,
    async handler({ context, body, params }) {
      const brand = brandToActOn(context, body.white_label_id);
      const note = requireStaffNote(body.note);
      const reversed = unwrap(await review.reverse(brand, params.id ?? '', reviewerOf(context), { reason_code: body.reason_code, note }));
      return { status: 200, body: reversed.view };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/evidence',
    summary: 'Attach evidence to a deposit in review',
    responses: { 202: { description: 'The order in review with the evidence attached.', schema: depositOrderSchema } },
    errors: ['deposit_not_reviewable', 'deposit_state_conflict', 'evidence_limit_reached'],
    scope: 'pay:write',
    body: merchantEvidenceSchema,
    async handler({ context, db, body, params }) {
      const result = await review.addEvidence(db, accountOfContext(context), params.id ?? '', { ...body, request_id: context.request_id });
      if (!result) throw new ApiError('resource_not_found');
      return { status: 202, body: unwrap(result) };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/force-complete',
    summary: 'Ask a reviewer to accept a short payment',
    responses: { 202: { description: 'The order in review; a reviewer decides.', schema: depositOrderSchema } },
    errors: ['deposit_not_reviewable', 'deposit_state_conflict', 'evidence_limit_reached'],
    scope: 'pay:write',
    body: forceCompleteSchema,
    async handler({ context, db, body, params }) {
      const result = await review.forceComplete(db, accountOfContext(context), params.id ?? '', { ...body, request_id: context.request_id });
      if (!result) throw new ApiError('resource_not_found');
      return { status: 202, body: unwrap(result) };
    },
  });
}
