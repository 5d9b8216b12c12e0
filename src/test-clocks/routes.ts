import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { isIdOfKind } from '../platform/ids.ts';
import { parseTimestamp } from '../platform/time.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import { accountOfContext, type BackofficeContext, type MerchantContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { limitParameter } from '../http/paging.ts';
import { parseOrThrow } from '../http/validation.ts';
import { idText } from '../tenancy/schemas.ts';
import { backofficeTestClockView, testClockView, type ClockChanger, type TestClockService } from './service.ts';
import { backofficeTestClockListSchema, backofficeTestClockSchema, testClockListSchema, testClockSchema } from './resources.ts';
import type { Queryable } from '../platform/db.ts';

/**
 * Test clocks over HTTP. Merchant, test keys only (a live key gets 404 `resource_not_found` before its
 * input is looked at, as every sandbox route): POST /v1/test/clocks, GET /v1/test/clocks, GET
 * /v1/test/clocks/{id}, POST …/attach, …/detach, …/advance. Back office, the brand's staff:
 * GET /v1/bo/test-clocks, GET /v1/bo/test-clocks/{id}, POST /v1/bo/test-clocks/{id}/advance.
 *
 * These routes run in real time even for a merchant with a clock attached (`outside_test_clock`): they
 * manage the clock, and its rows, events and audit rows are not objects of its timeline.
 */

const LIST_DEFAULT_LIMIT = 20;
const LIST_MAX_LIMIT = 100;
const READ_ROLES = ['platform_admin', 'operator', 'reviewer'] as const;
/** Moving a sandbox merchant's time is brand administration: operators and the platform administrator. */
const ADVANCE_ROLES = ['platform_admin', 'operator'] as const;

const timestampField = z
  .string()
  .max(40)
  .refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp', hint: 'RFC 3339 UTC with milliseconds, e.g. 2026-08-01T00:00:00.000Z' } });

const createSchema = z.object({ name: z.string().trim().min(1).max(100).optional(), frozen_time: timestampField.optional() }).strict();
const advanceSchema = z.object({ frozen_time: timestampField }).strict();
const merchantListSchema = z.object({ limit: limitParameter(LIST_MAX_LIMIT).optional(), starting_after: idText.optional() }).strict();
const backofficeListSchema = z
  .object({
    white_label_id: idText.optional(),
    merchant_id: idText.optional(),
    limit: limitParameter(LIST_MAX_LIMIT).optional(),
    starting_after: idText.optional(),
  })
  .strict();
const backofficeReadSchema = z.object({ white_label_id: idText.optional() }).strict();
const backofficeAdvanceSchema = z.object({ white_label_id: idText.optional(), frozen_time: timestampField }).strict();

/** A sandbox route for a live key does not exist: 404 before anything about it is revealed. */
function requireSandbox(context: MerchantContext): void {
  if (context.livemode) throw new ApiError('resource_not_found');
}

/** A path id that is not a clock id names no clock: 404 without a query. */
function clockIdOf(params: Record<string, string>): string {
  const id = params.id ?? '';
  if (!isIdOfKind(id, 'test_clock')) throw new ApiError('resource_not_found');
  return id;
}

function merchantChanger(context: MerchantContext): ClockChanger {
  return { actor: { actor_type: 'api_key', actor_id: context.api_key_id, request_id: context.request_id }, cause: context.cause };
}

function backofficeChanger(context: BackofficeContext): ClockChanger {
  return { actor: actorOf(context), cause: { request_id: context.request_id, idempotency_key: context.idempotency_key, api_version: CURRENT_API_VERSION } };
}

function page<Row, View>(rows: Row[], limit: number, view: (row: Row) => View) {
  return { object: 'list', data: rows.slice(0, limit).map(view), has_more: rows.length > limit };
}

/** What the test clock routes call. */
export interface TestClockRouteDependencies {
  /** Reads outside a request transaction. */
  database: Queryable;
  testClocks: TestClockService;
}

/** The test clock routes, on the services they call. */
export function testClockRoutes(services: TestClockRouteDependencies): RouteModule {
  return (registrar) => registerTestClockRoutes(registrar, services);
}

function registerTestClockRoutes(registrar: RouteRegistrar, services: TestClockRouteDependencies): void {
  const clocks = services.testClocks;

  registrar.merchant({
    method: 'POST',
    url: '/v1/test/clocks',
    summary: 'Create a test clock',
    responses: { 201: { description: 'The new test clock.', schema: testClockSchema } },
    errors: ['resource_not_found'],
    documented_body: createSchema,
    scope: 'pay:write',
    outside_test_clock: true,
    // Parsed in the handler, after the live-mode check: a live key learns nothing from validation.
    body: z.unknown(),
    async handler({ context, db, body }) {
      requireSandbox(context);
      const input = parseOrThrow(createSchema, body ?? {});
      const created = await clocks.create(db, accountOfContext(context), merchantChanger(context), {
        name: input.name ?? null,
        frozen_time: input.frozen_time === undefined ? null : parseTimestamp(input.frozen_time),
      });
      return { status: 201, body: created };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/test/clocks',
    summary: 'List test clocks',
    responses: { 200: { description: "The merchant's test clocks.", schema: testClockListSchema } },
    errors: ['resource_not_found'],
    documented_query: merchantListSchema,
    scope: 'pay:read',
    outside_test_clock: true,
    query: z.unknown(),
    async handler({ context, db, query }) {
      requireSandbox(context);
      const input = parseOrThrow(merchantListSchema, query);
      const limit = input.limit === undefined ? LIST_DEFAULT_LIMIT : Number(input.limit);
      const rows = await clocks.list(db, { white_label_id: context.white_label_id, merchant_id: context.merchant_id, starting_after: input.starting_after ?? null, limit: limit + 1 });
      return { status: 200, body: page(rows, limit, testClockView) };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/test/clocks/:id',
    summary: 'Read a test clock',
    responses: { 200: { description: 'The test clock.', schema: testClockSchema } },
    scope: 'pay:read',
    outside_test_clock: true,
    async handler({ context, db, params }) {
      requireSandbox(context);
      const row = await clocks.find(db, { white_label_id: context.white_label_id, merchant_id: context.merchant_id }, clockIdOf(params));
      if (!row) throw new ApiError('resource_not_found');
      return { status: 200, body: testClockView(row) };
    },
  });

  for (const action of ['attach', 'detach'] as const) {
    registrar.merchant({
      method: 'POST',
      url: `/v1/test/clocks/:id/${action}`,
      summary: 'Attach or detach a test clock',
      responses: { 200: { description: 'The test clock after the change.', schema: testClockSchema } },
      errors: ['test_clock_already_attached', 'test_clock_advancing'],
      documented_body: z.object({}).strict(),
      scope: 'pay:write',
      outside_test_clock: true,
      body: z.unknown(),
      async handler({ context, db, body, params }) {
        requireSandbox(context);
        parseOrThrow(z.object({}).strict(), body ?? {});
        const account = accountOfContext(context);
        const id = clockIdOf(params);
        const changed = action === 'attach' ? await clocks.attach(db, account, merchantChanger(context), id) : await clocks.detach(db, account, merchantChanger(context), id);
        return { status: 200, body: changed };
      },
    });
  }

  registrar.merchant({
    method: 'POST',
    url: '/v1/test/clocks/:id/advance',
    summary: 'Advance a test clock',
    responses: { 202: { description: 'The advance has started; the clock is `ready` again when it is done.', schema: testClockSchema } },
    errors: ['test_clock_advancing'],
    documented_body: advanceSchema,
    scope: 'pay:write',
    outside_test_clock: true,
    body: z.unknown(),
    async handler({ context, db, body, params }) {
      requireSandbox(context);
      const id = clockIdOf(params);
      const input = parseOrThrow(advanceSchema, body ?? {});
      const target = parseTimestamp(input.frozen_time) as Date;
      const filter = { white_label_id: context.white_label_id, merchant_id: context.merchant_id };
      const started = await clocks.advance(db, filter, merchantChanger(context), id, target, { repeat_is_replay: false });
      // 202: the advance has started; the clock says `ready` again when it is done.
      return { status: 202, body: testClockView(started.clock) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/test-clocks',
    summary: 'List test clocks (back office)',
    responses: { 200: { description: "The brand's test clocks.", schema: backofficeTestClockListSchema, cache_control: 'no-store' } },
    errors: ['resource_not_found'],
    roles: READ_ROLES,
    query: backofficeListSchema,
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const rows = await clocks.list(services.database, { white_label_id: brand, merchant_id: query.merchant_id ?? null, starting_after: query.starting_after ?? null, limit: limit + 1 });
      return { status: 200, body: page(rows, limit, backofficeTestClockView), headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/test-clocks/:id',
    summary: 'Read a test clock (back office)',
    responses: { 200: { description: 'The test clock.', schema: backofficeTestClockSchema, cache_control: 'no-store' } },
    roles: READ_ROLES,
    query: backofficeReadSchema,
    async handler({ context, query, params }) {
      const brand = brandToActOn(context, query.white_label_id);
      const row = await clocks.find(services.database, { white_label_id: brand, merchant_id: null }, clockIdOf(params));
      if (!row) throw new ApiError('resource_not_found');
      return { status: 200, body: backofficeTestClockView(row), headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/test-clocks/:id/advance',
    summary: 'Advance a test clock (back office)',
    responses: { 202: { description: 'The advance has started.', schema: backofficeTestClockSchema }, 200: { description: 'The clock already advanced to this target.', schema: backofficeTestClockSchema } },
    errors: ['test_clock_advancing'],
    roles: ADVANCE_ROLES,
    body: backofficeAdvanceSchema,
    async handler({ context, body, params }) {
      const brand = brandToActOn(context, body.white_label_id);
      const id = clockIdOf(params);
      const target = parseTimestamp(body.frozen_time) as Date;
      const outcome = await clocks.advanceByStaff(brand, backofficeChanger(context), id, target);
      // Back-office routes keep no idempotency records: asking again for the same target answers the clock as it is.
      return outcome.replayed
        ? { status: 200, body: backofficeTestClockView(outcome.clock), headers: { 'Idempotent-Replay': 'true' } }
        : { status: 202, body: backofficeTestClockView(outcome.clock) };
    },
  });
}
