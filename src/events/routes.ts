import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { parseTimestamp } from '../platform/time.ts';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { eventListSchema } from './resources.ts';
import type { EventsService } from './service.ts';

/**
 * GET /v1/pay/events: the reconcile feed. Events of the caller's merchant and environment with
 * `sequence` greater than `since_sequence`, in sequence order, `limit` at a time (1 to 500, default
 * 100). The answer is `{object: "list", data: [event…], has_more, next_cursor}`; `next_cursor` is
 * opaque and carries the filters it was made with, so a later page with other `type`, `status`,
 * `from`, `to` or `order` answers 400 `cursor_filter_mismatch`, while `limit` may change. A page reads at most
 * the service's scan window of the feed (10,000 events), so a page with filters can hold fewer than `limit`
 * events, even none, with `has_more` true: the next page goes on where the window ended.
 */
const MAX_LIMIT = 500;

const timestampText = z.string().max(40).refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp' } });

const querySchema = z
  .object({
    since_sequence: z.string().refine((text) => /^[0-9]{1,15}$/.test(text), { params: { reason: 'must_be_non_negative_integer' } }).optional(),
    limit: z.string().refine((text) => /^[0-9]{1,4}$/.test(text), { params: { reason: 'must_be_integer' } }).optional(),
    cursor: z.string().min(1).max(1000).optional(),
    type: z.string().min(1).max(100).optional(),
    status: z.string().min(1).max(100).optional(),
    from: timestampText.optional(),
    to: timestampText.optional(),
    order: z.enum(['asc', 'desc']).optional(),
  })
  .strict();

/** The filters a cursor is bound to; any change to them mid-cursor is cursor_filter_mismatch. */
export interface CursorFilters {
  type: string | null;
  status: string | null;
  from: string | null;
  to: string | null;
  order: 'asc' | 'desc';
}

interface Cursor {
  v: 1;
  position: number;
  filters: CursorFilters;
}

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor), 'utf8').toString('base64url');
}

function decodeCursor(text: string): Cursor {
  const invalid = new ApiError('validation_error', { details: { fields: [{ path: 'cursor', reason: 'invalid_cursor' }] } });
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw invalid;
  }
  const shape = z.object({
    v: z.literal(1),
    position: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    filters: z.object({
      type: z.string().nullable(),
      status: z.string().nullable(),
      from: z.string().nullable(),
      to: z.string().nullable(),
      order: z.enum(['asc', 'desc']),
    }),
  });
  const result = shape.safeParse(parsed);
  if (!result.success) throw invalid;
  return result.data as Cursor;
}

function sameFilters(left: CursorFilters, right: CursorFilters): boolean {
  return left.type === right.type && left.status === right.status && left.from === right.from && left.to === right.to && left.order === right.order;
}

/** What the event routes call. */
export interface EventRouteDependencies {
  events: EventsService;
}

/** The event routes, on the services they call. */
export function eventRoutes(services: EventRouteDependencies): RouteModule {
  return (registrar) => registerEventRoutes(registrar, services);
}

function registerEventRoutes(registrar: RouteRegistrar, services: EventRouteDependencies): void {
  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/events',
    summary: 'List events (the reconcile feed)',
    responses: { 200: { description: 'A page of events in sequence order.', schema: eventListSchema } },
    errors: ['cursor_filter_mismatch'],
    scope: 'events:read',
    query: querySchema,
    async handler({ context, db, query }) {
      const filters: CursorFilters = {
        type: query.type ?? null,
        status: query.status ?? null,
        from: query.from ?? null,
        to: query.to ?? null,
        order: query.order ?? 'asc',
      };
      const limit = query.limit === undefined ? 100 : Number(query.limit);
      if (limit < 1 || limit > MAX_LIMIT) {
        throw new ApiError('validation_error', { details: { fields: [{ path: 'limit', reason: 'out_of_range', hint: `1 to ${MAX_LIMIT}` }] } });
      }
      const sinceSequence = query.since_sequence === undefined ? 0 : Number(query.since_sequence);
      let position: number | null = null;
      if (query.cursor !== undefined) {
        const cursor = decodeCursor(query.cursor);
        if (!sameFilters(cursor.filters, filters)) throw new ApiError('cursor_filter_mismatch');
        position = cursor.position;
      }
      const descending = filters.order === 'desc';
      const listed = await services.events.listEvents(db, {
        white_label_id: context.white_label_id,
        merchant_id: context.merchant_id,
        livemode: context.livemode,
        after_sequence: !descending && position !== null ? Math.max(position, sinceSequence) : sinceSequence,
        before_sequence: descending && position !== null ? position : null,
        type: filters.type,
        object_status: filters.status,
        created_from: filters.from ? parseTimestamp(filters.from) : null,
        created_to: filters.to ? parseTimestamp(filters.to) : null,
        descending,
        limit: limit + 1,
      });
      const page = listed.events.slice(0, limit);
      // A full page goes on after its last event; a page the scan window cut short goes on where the window ended.
      const next = listed.events.length > limit ? (page.at(-1)?.sequence ?? null) : listed.resume_at;
      return {
        status: 200,
        body: {
          object: 'list',
          data: page,
          has_more: next !== null,
          next_cursor: next !== null ? encodeCursor({ v: 1, position: next, filters }) : null,
        },
      };
    },
  });
}
